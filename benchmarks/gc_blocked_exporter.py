"""Resident memory of a program making cyclic garbage while an exporter blocks for 10 s.

The program (a child process per run) compiles one jitted function; a span is then ended
on a thread that is not the program's main thread, into the program's own
``SimpleSpanProcessor`` whose exporter sleeps 10 s (a collector endpoint that does not
answer): with otel_jax installed that thread is otel_jax's emitting thread, ending the
compile's span; without otel_jax it is a thread of the program's, ending a span of its
own. Meanwhile the main thread makes cyclic garbage (lists that hold themselves, each
with a small payload) for 6 s, keeping none of it. Reported per run: the growth of the
resident set over the allocation (peak minus the start, ``ru_maxrss``), the young
collections made meanwhile, and the garbage made (which varies with the machine's
speed). The collector is the program's: with or without otel_jax, young collections keep
freeing the garbage, and the growth stays within a few megabytes of the plain run's.

    python benchmarks/gc_blocked_exporter.py                          # this Python
    python benchmarks/gc_blocked_exporter.py --python .venv/bin/python \\
        --python .venv-py312/bin/python --python .venv-latest/bin/python
    python benchmarks/gc_blocked_exporter.py --quick                  # 2 s + 1 s, a smoke run

Each Python runs the plain program and the one with otel_jax, alternately, ``--repeat``
times (3 by default); the table gives each run's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import gc, json, resource, sys, threading, time
import jax, numpy as np
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

mode, block_s, alloc_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
entered = threading.Event()

class Stalled(SpanExporter):  # an endpoint that does not answer for block_s
    def export(self, spans):
        entered.set()
        time.sleep(block_s)
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Stalled()))
if mode == "otel_jax":
    import otel_jax
    otel_jax.install(tracer_provider=provider, log_output=None)
f = jax.jit(lambda x: x + 1)
f(np.ones(3, np.float32))  # with otel_jax: its span ends on otel_jax's thread
if mode == "plain":  # the same stalled export, on a thread of the program's
    tracer = provider.get_tracer("plain")
    threading.Thread(target=lambda: tracer.start_span("work").end(), daemon=True).start()
assert entered.wait(60)
before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
before_young = gc.get_stats()[0]["collections"]
made = 0
end = time.monotonic() + alloc_s
while time.monotonic() < end:
    for _ in range(1000):
        cycle = [made, made + 1, made + 2, "payload" * 4]
        cycle.append(cycle)
        made += 1
print(json.dumps({
    "rss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss) / 1024,
    "young_collections": gc.get_stats()[0]["collections"] - before_young,
    "cycles_made": made, "gc_enabled": gc.isenabled(),
    "python": sys.version.split()[0], "jax": jax.__version__}), flush=True)
import os
os._exit(0)  # not waiting for the stalled export: the exit is not what is measured
"""


def run(python: str, mode: str, block_s: float, alloc_s: float) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"})
    done = subprocess.run([python, "-c", CHILD, mode, str(block_s), str(alloc_s)],
                          capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{python} {mode} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[],
                        help="a Python to run the program with (repeatable; default: this one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--block", type=float, default=10.0, help="the exporter's stall, s")
    parser.add_argument("--alloc", type=float, default=6.0, help="the allocation, s")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.block, args.alloc, args.repeat = 2.0, 1.0, 1
    if args.alloc >= args.block:
        raise SystemExit("--alloc must be shorter than --block: it is measured during the stall")
    print("| Python, JAX | run | RSS growth | young collections | cycles made |")
    print("|---|---|---|---|---|")
    for python in args.python or [sys.executable]:
        for _ in range(args.repeat):
            for mode in ("plain", "otel_jax"):
                r = run(python, mode, args.block, args.alloc)
                print(f"| {r['python']}, {r['jax']} | {mode} | {r['rss_growth_mb']:+.1f} MB | "
                      f"{r['young_collections']:,} | {r['cycles_made']:,} |", flush=True)


if __name__ == "__main__":
    main()
