"""One rank of a multi-process JAX job, for tests/test_multiprocess.py and the example.

``python _multiprocess_worker.py SCENARIO RANK COUNT PORT LOG [TIMEOUT_S] [ON_DIVERGENCE]``:
joins the job over the coordination service on 127.0.0.1:PORT, installs otel_jax with
its JSON log in LOG, runs SCENARIO and prints one ``RESULT <json>`` line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

SCENARIO, RANK, COUNT, PORT, LOG = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4], sys.argv[5]
TIMEOUT_S = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
ON_DIVERGENCE = sys.argv[7] if len(sys.argv) > 7 else "log"

if SCENARIO == "exit_in_read":
    import atexit

    def _in_the_client_after_jax_shutdown() -> None:
        """Registered before jax.distributed.initialize: runs after JAX's shutdown, right
        before the interpreter finalizes. A thread of ours still inside the client's C++
        then would take the GIL back during finalization and abort the process."""
        frames = sys._current_frames()
        inside = []
        for thread in threading.enumerate():
            frame = frames.get(thread.ident or -1)
            if thread.name.startswith("otel_jax") and frame is not None \
                    and frame.f_code.co_filename.endswith(os.path.join("_jax", "_coordination.py")):
                inside.append(f"{thread.name} in {frame.f_code.co_name}")
        elapsed = time.monotonic() - EXIT_STARTED[0] if EXIT_STARTED else -1.0
        print("EXIT " + json.dumps({"inside_client": inside, "exit_s": elapsed}), flush=True)

    EXIT_STARTED: list[float] = []
    atexit.register(_in_the_client_after_jax_shutdown)

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_platforms", "cpu")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{PORT}", num_processes=COUNT,
                           process_id=RANK, initialization_timeout=60)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


class CountingClient:
    """The job's coordination client, every call and byte (keys and values, both ways)
    counted from outside the library."""

    def __init__(self, client):
        self._client = client
        self.calls = 0
        self.bytes = 0

    def __getattr__(self, name):
        method = getattr(self._client, name)
        if not name.startswith(("key_value", "blocking_key_value")):
            return method

        def counted(*args):
            sent = sum(len(a) for a in args if isinstance(a, (str, bytes)))
            try:
                out = method(*args)
            except Exception:
                self.calls += 1
                self.bytes += sent
                raise
            if isinstance(out, (str, bytes)):
                got = len(out)
            elif isinstance(out, list):
                got = sum(len(k) + len(v) for k, v in out)
            else:
                got = len(str(out))
            self.calls += 1
            self.bytes += sent + got
            return out

        return counted


if SCENARIO == "fleet":
    from jax._src import distributed

    jax.devices()  # the job's own start-up exchange is not the check's
    COUNTER = CountingClient(distributed.global_state.client)
    distributed.global_state.client = COUNTER

import otel_jax  # noqa: E402
from otel_jax._pipeline._engine import ENGINE  # noqa: E402

if os.environ.get("OTEL_JAX_TEST_FAN_IN"):
    # a tree of groups of this many ranks, with a few processes
    from otel_jax._fleet import _ranks

    _ranks.FAN_IN = int(os.environ["OTEL_JAX_TEST_FAN_IN"])

log = open(LOG, "w", encoding="utf-8")
RANK_LOCAL = tuple(p for p in os.environ.get("OTEL_JAX_TEST_RANK_LOCAL", "").split(",") if p)
if os.environ.get("OTEL_JAX_TEST_STRUCTLOG"):
    # The application's own structlog set-up, writing JSON to LOG, with context bound on
    # the main thread: otel_jax's events go through it (log_output="structlog").
    import structlog

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(log))
    structlog.contextvars.bind_contextvars(run_id="job-1", host=f"host-{RANK}")
    otel_jax.install(log_output="structlog", on_divergence=ON_DIVERGENCE,
                     divergence_timeout_s=TIMEOUT_S, rank_local=RANK_LOCAL)
else:
    otel_jax.install(log_output=log, on_divergence=ON_DIVERGENCE,
                     divergence_timeout_s=TIMEOUT_S, rank_local=RANK_LOCAL)


@jax.jit
def total(batch):
    return jnp.sum(batch["x"]) * 2


@jax.jit
def step(x):
    # The program depends on the rank, the signature does not.
    return x * 2 if RANK == 0 else x + 1


@jax.jit
def global_sum(x):
    return jnp.sum(x)


@jax.jit
def double(x):
    return x * 2


result: dict = {"rank": RANK, "errors": []}


def call(fn, *args):
    try:
        return fn(*args)
    except otel_jax.DivergenceError as exc:
        result["errors"].append(str(exc))
        return None


if SCENARIO == "same":
    call(total, {"x": np.ones(4, np.float32)})
    call(total, {"x": np.ones(4, np.float32)})
    call(double, np.ones(3, np.float32))
    call(total, {"x": np.ones(6, np.float32)})
elif SCENARIO in ("global_same", "global_shape"):
    # One global array over the devices of every process, built from each one's rows.
    rows = 5 if (SCENARIO == "global_shape" and RANK == 1) else 4
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    x = jax.make_array_from_process_local_data(sharding, np.ones(rows, np.float32))
    out = call(global_sum, x)
    result["sum"] = None if out is None else float(np.asarray(out.addressable_data(0)))
elif SCENARIO == "shape":
    # rank 1 has one more row in its local batch (rank 3 too, with four ranks)
    call(total, {"x": np.ones(5 if RANK % 2 else 4, np.float32)})
elif SCENARIO == "shape_last":
    call(total, {"x": np.ones(5 if RANK == COUNT - 1 else 4, np.float32)})
elif SCENARIO == "program":
    call(step, np.ones(3, np.float32))
elif SCENARIO == "extra":
    call(total, {"x": np.ones(4, np.float32)})
    if RANK == 1:  # only rank 1 gets the last, partial batch
        call(total, {"x": np.ones(2, np.float32)})
elif SCENARIO == "extra_then_same":
    call(total, {"x": np.ones(4, np.float32)})
    if RANK == 1:  # one partial batch on rank 1 alone, then the same batches everywhere
        call(total, {"x": np.ones(2, np.float32)})
    for n in (6, 7, 8):
        call(total, {"x": np.ones(n, np.float32)})
elif SCENARIO == "finish_early":
    call(total, {"x": np.ones(4, np.float32)})
    call(total, {"x": np.ones(6, np.float32)})
    if RANK == 1:  # done at once, while rank 0 still works (a checkpoint) before it ends
        otel_jax.uninstall()
elif SCENARIO == "slow":
    call(total, {"x": np.ones(4, np.float32)})
    if RANK == 1:  # the same program, long after rank 0 compiled it and moved on
        time.sleep(3 * TIMEOUT_S)
    call(total, {"x": np.ones(6, np.float32)})
elif SCENARIO == "rank0_evaluates":
    call(total, {"x": np.ones(4, np.float32)})
    if RANK == 0:  # only rank 0 evaluates: by design, declared rank_local
        call(double, np.ones(3, np.float32))
elif SCENARIO == "fleet":
    # a train step over a 200-leaf parameter tree, compiled for a few batch shapes on
    # every rank, then once with a different local batch on the last rank
    params = {f"layer{i // 4}": {f"w{i % 4}": np.ones((4, 3), np.float32)}
              for i in range(199)}

    @jax.jit
    def train_step(params, batch):
        return sum(jnp.sum(p) for p in jax.tree_util.tree_leaves(params)) + jnp.sum(
            batch["x"])

    def settle():
        otel_jax.flush()  # the compiles reach the cross-rank check off the compiling thread
        checker = ENGINE.cross_rank.checker
        deadline = time.monotonic() + 4 * TIMEOUT_S + 60
        while checker is not None and not checker.settled() and time.monotonic() < deadline:
            time.sleep(0.05)

    def checker_cpu_s():
        # the CPU of the check's own threads, the client's calls included (Linux)
        return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident))
                   for t in threading.enumerate()
                   if t.name == "otel_jax-ranks" and t.ident is not None and t.is_alive())

    compiles = 3 if COUNT < 8 else 2  # as tests/test_multiprocess.py expects
    per_compile = []
    for n in range(compiles):
        before = checker_cpu_s()
        call(train_step, params, {"x": np.ones((12 + n, 8), np.float32)})
        settle()
        per_compile.append(checker_cpu_s() - before)
    result["same"] = {"compiles": compiles, "calls": COUNTER.calls, "bytes": COUNTER.bytes,
                      "cpu_s": checker_cpu_s(), "cpu_per_compile_s": per_compile}
    rows = 112 if RANK == COUNT - 1 else 12 + compiles
    call(train_step, params, {"x": np.ones((rows, 8), np.float32)})
    settle()
    result["diverged"] = {"calls": COUNTER.calls - result["same"]["calls"],
                          "bytes": COUNTER.bytes - result["same"]["bytes"],
                          "cpu_s": checker_cpu_s() - result["same"]["cpu_s"]}
elif SCENARIO == "killed":
    call(total, {"x": np.ones(4, np.float32)})
    if RANK == 1:
        print("READY", flush=True)
        time.sleep(600)  # killed by the test
    time.sleep(1.0)
    call(total, {"x": np.ones(7, np.float32)})  # rank 1 is dead by now

elif SCENARIO == "exit_in_read":
    call(total, {"x": np.ones(4, np.float32)})
    if COUNT == 2 and RANK == 1:
        # One compile more than rank 0, the last thing before exit: rank 1 compares it,
        # its thread waiting (TIMEOUT_S) for rank 0's entry that never comes, and the
        # program ends as a script does, with no uninstall.
        call(total, {"x": np.ones(2, np.float32)})
        time.sleep(0.5)
    elif COUNT == 3 and RANK < 2:
        # Ranks 0 and 1 compile once more than rank 2: rank 0 arrives first and compares,
        # waiting for rank 2; rank 1 waits in its read of the verdict, which every rank
        # reads (not a key only it waits for), when its program ends.
        if RANK == 1:
            time.sleep(1.0)
        call(total, {"x": np.ones(2, np.float32)})
        time.sleep(1.0)
    import atexit

    atexit.register(lambda: EXIT_STARTED.append(time.monotonic()))  # the first to run
    print("RESULT " + json.dumps(result), flush=True)
    sys.exit(0)

otel_jax.flush()  # the compiles reach the cross-rank check off the compiling thread
checker = ENGINE.cross_rank.checker
deadline = time.monotonic() + 3 * TIMEOUT_S + 20
while checker is not None and not checker.settled() and time.monotonic() < deadline:
    time.sleep(0.05)
result["settled"] = checker is not None and checker.settled()
if os.environ.get("OTEL_JAX_TEST_DEBUG") and checker is not None:
    result["state"] = [checker.off, checker.channel._failures, checker.channel.closed,
                       checker.dropped, checker.protocol.unresolved]
if SCENARIO != "killed":
    from jax._src import distributed

    distributed.global_state.client.wait_at_barrier("otel_jax_test_end", 60_000)
installation = otel_jax.installation()  # None on a rank that uninstalled early
for sink in installation.sinks if installation is not None else ():
    if hasattr(sink, "flush"):
        sink.flush(30.0)
otel_jax.uninstall()  # deletes this rank's entries
log.close()
if SCENARIO != "killed":
    from jax._src import distributed

    client = distributed.global_state.client
    client.wait_at_barrier("otel_jax_test_uninstalled", 60_000)
    result["keys_left"] = [key for key, _ in client.key_value_dir_get("otel_jax/")]
print("RESULT " + json.dumps(result), flush=True)
if SCENARIO == "killed":
    # Rank 0 hosts the coordination service: it stays until the other survivors are done.
    from pathlib import Path

    Path(LOG + ".done").touch()
    others = [Path(LOG).with_name(f"rank{r}.jsonl.done") for r in range(2, COUNT)]
    deadline = time.monotonic() + 60
    while RANK == 0 and not all(p.exists() for p in others) and time.monotonic() < deadline:
        time.sleep(0.05)
    os._exit(0)  # JAX's own shutdown would wait for the dead rank
