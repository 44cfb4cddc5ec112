"""Memory per distinct jitted function: plain JAX, and with otel_jax installed.

A program that jits many distinct functions (a sweep, a notebook kept open for days,
generated code) must not grow without bound because otel_jax keeps something per function:
past ``max_functions`` (``OTEL_JAX_MAX_FUNCTIONS``) the least recently compiled functions'
detail is dropped. Each mode runs in its own process: it jits ``--functions`` distinct
functions (one line of source each, so each is its own function to JAX and to otel_jax;
each let go once it ran, as a sweep or generated code does) on the CPU and prints its
resident memory per function, for each slice of the run; with otel_jax the slices past
the cap should cost what plain JAX costs.

    PYTHONPATH=$PWD python benchmarks/functions_memory.py [--functions 20000] [--cap 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import gc, json, os, sys
mode, n, slices = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import jax, jax.numpy as jnp
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def compile_one(i):
    # A function made, jitted, called and let go, as a sweep or generated code does: what
    # stays is what JAX and otel_jax keep of it.
    space = {}
    exec(compile(f"def f{i}(x):\n    return x * {i} + 1", "generated_functions.py", "exec"),
         space)
    jax.jit(space[f"f{i}"])(x).block_until_ready()
x = jnp.ones(4)
if mode == "otel_jax":
    import otel_jax
    otel_jax.install(log_output=open(os.devnull, "w"))
for i in range(50):  # warm-up: JAX's and otel_jax's one-off costs
    compile_one(i)
gc.collect()
marks = [(50, rss())]
step = max(1, (n - 50) // slices)
for i in range(50, 50 + step * slices):
    compile_one(i)
    if (i + 1 - 50) % step == 0:
        gc.collect()
        marks.append((i + 1, rss()))
dropped = None
if mode == "otel_jax":
    from otel_jax._pipeline import _engine
    dropped = _engine.ENGINE.history.dropped_functions
print("RESULT " + json.dumps({"marks": marks, "dropped": dropped}))
"""


def run(mode: str, functions: int, slices: int, cap: int | None) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if cap is not None:
        env["OTEL_JAX_MAX_FUNCTIONS"] = str(cap)
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(functions), str(slices)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return dict(json.loads(line.removeprefix("RESULT ")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", type=int, default=20_000)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--cap", type=int, default=None,
                        help="OTEL_JAX_MAX_FUNCTIONS for the otel_jax run (default: its own)")
    args = parser.parse_args()
    results = {mode: run(mode, args.functions, args.slices, args.cap)
               for mode in ("plain", "otel_jax")}
    print(f"{args.functions} distinct functions; resident memory per function, by slice "
          "(KB):")
    print(f"{'functions':>20} {'plain JAX':>10} {'otel_jax':>10} {'otel_jax more':>14}")
    plain, ours = results["plain"]["marks"], results["otel_jax"]["marks"]
    for (a0, p0), (a1, p1), (_, o0), (_, o1) in zip(plain, plain[1:], ours, ours[1:]):
        per_plain, per_ours = (p1 - p0) / (a1 - a0) / 1e3, (o1 - o0) / (a1 - a0) / 1e3
        print(f"{f'{a0}-{a1}':>20} {per_plain:10.2f} {per_ours:10.2f} "
              f"{per_ours - per_plain:14.2f}")
    total = (ours[-1][1] - ours[0][1]) - (plain[-1][1] - plain[0][1])
    print(f"otel_jax holds {total / 1e6:.1f} MB more in all; functions whose detail it "
          f"dropped: {results['otel_jax']['dropped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
