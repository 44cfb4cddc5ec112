"""Two local processes of one JAX job compile different programs, and otel_jax names it.

The script launches itself twice as the two ranks of a job (``jax.distributed.initialize``
on 127.0.0.1, gloo CPU collectives). Both ranks run the same training step, but rank 1
gets one more row in its local batch: the kind of mismatch that, on a real cluster,
hangs the next collective or returns wrong numbers without a word. Each rank's
otel_jax compares its compiles with the other rank's over JAX's own coordination
service and logs one WARNING line, event ``jax.compile.divergence``::

    total_loss #1 (signature): batch['x']: f32[4,3] (rank 0) vs f32[5,3] (rank 1) (+1 more)

(the one more is ``batch['y']``).
Then ``otel-jax report`` reads both ranks' logs and lists the divergence first.

    python examples/multiprocess.py             # the job, then the report
    python examples/multiprocess.py --same      # the same batch on both ranks: no divergence
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path


def rank_main(rank: int, port: int, log_path: str, same: bool) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=rank)
    import jax.numpy as jnp
    import numpy as np

    import otel_jax

    log = open(log_path, "w", encoding="utf-8")
    otel_jax.install(log_output=log, divergence_timeout_s=10)

    @jax.jit
    def total_loss(params, batch):
        return jnp.sum((batch["x"] @ params["w"] - batch["y"]) ** 2)

    rows = 4 if (same or rank == 0) else 5
    params = {"w": jnp.ones((3,))}
    batch = {"x": np.ones((rows, 3), np.float32), "y": np.zeros((rows,), np.float32)}
    print(f"rank {rank}: loss {float(total_loss(params, batch)):.1f} over {rows} rows",
          flush=True)

    # Wait until this rank has compared its compile with the other's, then together leave.
    import time

    from otel_jax._pipeline._engine import ENGINE

    otel_jax.flush()  # the compile handed to the cross-rank check (on otel_jax's thread)
    checker = ENGINE.cross_rank.checker
    deadline = time.monotonic() + 30
    while checker is not None and not checker.settled() and time.monotonic() < deadline:
        time.sleep(0.05)
    from jax._src import distributed

    distributed.global_state.client.wait_at_barrier("example-end", 60_000)
    otel_jax.uninstall()
    log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", action="store_true", help="the same batch on both ranks")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        rank_main(args.rank, args.port, args.log, args.same)
        return 0

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = Path(tempfile.mkdtemp(prefix="otel_jax_multiprocess_"))
    logs = [workdir / f"rank{r}.jsonl" for r in (0, 1)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--port", str(port),
                               "--log", str(logs[r]), *(["--same"] if args.same else [])],
                              env=env) for r in (0, 1)]
    try:
        codes = [p.wait(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        print(f"a rank failed: exit codes {codes}", file=sys.stderr)
        return 1

    print("\nWhat each rank logged about the other:")
    for path in logs:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "jax.compile.divergence":
                print(f"  rank {event['process_index']}: {event['function']} "
                      f"#{event['count']} ({event['divergence_kind']}): {event['divergence']}")
    print("\n$ otel-jax report " + " ".join(str(p) for p in logs), flush=True)
    return subprocess.call([sys.executable, "-m", "otel_jax", "report",
                            *map(str, logs)])


if __name__ == "__main__":
    sys.exit(main())
