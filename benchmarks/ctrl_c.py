"""Where a Ctrl-C during tracing, lowering and XLA compiling ends up: plain Python,
``otel_jax.install()`` and ``otel-jax run``, side by side.

One program (a child process per trial) compiles one new function after another for a
few seconds: each is traced, lowered and compiled by XLA (a Python loop unrolled into a
few hundred operations, so that XLA's compile takes a while; with ``--trace-heavy`` it
also traces ten times as many operations that XLA never sees, so that tracing does).
This script sends it SIGINT at a random moment after its first compile began, as a
terminal's Ctrl-C does, and reads what happened:

* ``delivered``: the program ended by the KeyboardInterrupt (its traceback, status -2);
* ``lost in gc callback``: CPython raised the KeyboardInterrupt inside a function of
  ``gc.callbacks`` (JAX's ``_xla_gc_callback``), reported it as unraisable
  (``Exception ignored in: <function _xla_gc_callback …>``) and the program went on to its
  end (status 0);
* ``other``: anything else (said with its status and last stderr line); ``hang``: not
  ended within ``--bound`` seconds of the signal (its threads are then dumped by
  faulthandler, SIGABRT).

The three modes run paired and alternating (plain, install, run, plain, …) with the same
random moment for each triple, so that the machine's load falls on all of them alike.
Also counted per mode, in one run of three compiles without a signal: the collections
of the cyclic collector on the main thread while it traces and lowers, and while XLA
compiles, and the share of each phase's time the main thread spent inside them (the
window in which a signal is raised in a ``gc.callbacks`` function); a ``gc.callbacks``
timer of the program's own, in a run without a signal so that it cannot be where a
Ctrl-C lands.

    python benchmarks/ctrl_c.py --python .venv/bin/python \\
        --python .venv-py312/bin/python --python .venv-latest/bin/python --trials 15
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("plain", "install", "run")

PROGRAM = r"""
import gc, os, sys, threading, time
if sys.argv[1] == "install":
    import otel_jax; otel_jax.install()
import jax, jax.numpy as jnp

counting = sys.argv[2] == "count"
counts = {"lower": [0, 0, 0], "compile": [0, 0, 0], "other_threads": 0}
inside = {"lower": 0.0, "compile": 0.0}  # seconds the main thread spent collecting
spent = {"lower": 0.0, "compile": 0.0}  # seconds in each phase
phase = ["lower"]
began = [0.0]
def count(what, info):  # only in the counting run: no signal is sent to it
    if threading.current_thread() is not threading.main_thread():
        counts["other_threads"] += what == "start"
    elif what == "start":
        counts[phase[0]][info["generation"]] += 1
        began[0] = time.perf_counter()
    else:
        inside[phase[0]] += time.perf_counter() - began[0]

dead = int(os.environ.get("CTRL_C_DEAD", "0"))
def make(k):
    def f(x):
        for i in range(int(os.environ.get("CTRL_C_OPS", "150"))):
            x = jnp.sin(x) * (i % 7 + 1 + k) + jnp.cos(x[::-1])
            for _ in range(dead):  # traced, then dropped: only tracing takes longer
                jnp.sin(x) * 2
        return x
    f.__name__ = f"f{k}"
    return f

jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()
if counting:
    gc.callbacks.append(count)
start = time.monotonic()
print("COMPILING", flush=True)
k = 0
end = start + float(os.environ.get("CTRL_C_SECONDS", "6"))
while (k < 3) if counting else (time.monotonic() < end):
    phase[0] = "lower"
    print("P lower %.3f" % (time.monotonic() - start), flush=True)
    t = time.perf_counter()
    lowered = jax.jit(make(k)).lower(jnp.ones(8))
    spent["lower"] += time.perf_counter() - t
    phase[0] = "compile"
    print("P compile %.3f" % (time.monotonic() - start), flush=True)
    t = time.perf_counter()
    lowered.compile()
    spent["compile"] += time.perf_counter() - t
    k += 1
if counting:
    gc.callbacks.remove(count)
    print("COUNTS", k, ",".join(map(str, counts["lower"])), ",".join(map(str, counts["compile"])),
          counts["other_threads"], "%.3f %.3f %.3f %.3f" % (
              inside["lower"], spent["lower"], inside["compile"], spent["compile"]), flush=True)
print("DONE", k, flush=True)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               PYTHONFAULTHANDLER="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _argv(python: str, mode: str, program: str, what: str) -> list[str]:
    if mode == "run":
        return [python, "-m", "otel_jax", "run", "--log-output", "none", "--summary",
                "never", program, mode, what]
    return [python, program, mode, what]


def _versions(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import sys, jax; print(sys.version.split()[0], jax.__version__)"],
        capture_output=True, text=True, env=_env(), timeout=300)
    py, _, jx = out.stdout.strip().partition(" ")
    return f"Python {py}, JAX {jx}"


def count(python: str, mode: str, program: str) -> str:
    out = subprocess.run(_argv(python, mode, program, "count"), capture_output=True,
                         text=True, env=_env(), timeout=600).stdout
    line = next((x for x in out.splitlines() if x.startswith("COUNTS")), None)
    if line is None:
        return "no count"
    _, k, lower, comp, others, *times = line.split()
    in_lower, lowering, in_comp, compiling = map(float, times)
    return (f"{k} compiles; collections on the main thread while tracing and lowering "
            f"{lower} (generations 0, 1, 2), {in_lower * 1e3:.0f} ms of {lowering:.2f} s "
            f"({100 * in_lower / lowering:.1f}%); while XLA compiles {comp}, "
            f"{in_comp * 1e3:.0f} ms of {compiling:.2f} s; on other threads {others}")


def trial(python: str, mode: str, program: str, delay: float, bound: float
          ) -> tuple[str, float, str, str]:
    """One run with a SIGINT ``delay`` seconds after its first compile began: what came of
    it, seconds from the signal to the exit, the phase the signal landed in, a detail."""
    proc = subprocess.Popen(
        _argv(python, mode, program, "signal"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("COMPILING"):
        out, err = proc.communicate()
        return "other", 0.0, "-", f"did not start: {err.strip()[-200:]!r}"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler dumps every thread
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return "hang", time.monotonic() - sent, "-", err[-4000:]
    took = time.monotonic() - sent
    phase = "-"
    for row in out.splitlines():
        if row.startswith("P "):
            _, name, at = row.split()
            if float(at) <= delay:
                phase = name
    lines = err.strip().splitlines()
    ignored = [x for x in lines if x.startswith("Exception ignored")]
    if "DONE" not in out and (proc.returncode == -signal.SIGINT or (
            lines and lines[-1].startswith("KeyboardInterrupt"))):
        return "delivered", took, phase, ""
    if ignored and any("gc" in x.lower() or "GC" in x for x in ignored) and (
            "KeyboardInterrupt" in err):
        return "lost in gc callback", took, phase, ignored[0]
    return "other", took, phase, f"status {proc.returncode}: {lines[-1] if lines else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append",
                        help="an interpreter with otel_jax's dependencies (may repeat; "
                             "default this one)")
    parser.add_argument("--trials", type=int, default=15, help="trials per mode and Python")
    parser.add_argument("--latest", type=float, default=4.0,
                        help="the signal comes uniformly between 0.1 s and this many "
                             "seconds after the first compile began (default 4)")
    parser.add_argument("--bound", type=float, default=60.0,
                        help="seconds after the signal before a run counts as a hang")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated, of " + ", ".join(MODES))
    parser.add_argument("--trace-heavy", action="store_true",
                        help="each function also traces ten times as many operations "
                             "that XLA never sees: most signals land in tracing")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if args.trace_heavy:
        os.environ["CTRL_C_DEAD"] = "10"
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "compiles.py")
        Path(program).write_text(PROGRAM)
        for python in args.python or [sys.executable]:
            print(f"== {python}: {_versions(python)}", flush=True)
            for mode in modes:
                print(f"  {mode}: {count(python, mode, program)}", flush=True)
            results: dict[str, list[tuple[str, float, str, str]]] = {m: [] for m in modes}
            for k in range(args.trials):
                delay = rng.uniform(0.1, args.latest)
                for mode in modes:
                    one = trial(python, mode, program, delay, args.bound)
                    results[mode].append(one)
                    what, took, phase, detail = one
                    print(f"  {k:2d} {mode:7s} signal at {delay:4.2f}s ({phase}): {what}, "
                          f"exit {took:.2f}s later" + (f"; {detail[:160]}" if detail else ""),
                          flush=True)
            for mode in modes if args.trials else ():
                got = results[mode]
                kinds = {w: sum(1 for r in got if r[0] == w)
                         for w in ("delivered", "lost in gc callback", "other", "hang")}
                exits = sorted(r[1] for r in got if r[0] == "delivered")
                median = exits[len(exits) // 2] if exits else float("nan")
                by_phase = {p: sum(1 for r in got if r[2] == p) for p in ("lower", "compile")}
                print(f"  {mode:7s}: " + ", ".join(f"{n} {w}" for w, n in kinds.items())
                      + f" of {len(got)}; signal while lowering {by_phase['lower']}, "
                      f"compiling {by_phase['compile']}; exit after delivery median "
                      f"{median:.2f}s, max {max(exits, default=float('nan')):.2f}s",
                      flush=True)


if __name__ == "__main__":
    main()
