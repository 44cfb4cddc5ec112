"""Exit status of programs whose own code compiles on otel_jax's threads as they exit.

One program (a child process per run): otel_jax installed with the program's tracer
provider, whose span processor compiles in ``on_end`` (on otel_jax's emitting thread, at
every span, so that its compiles make more spans: more keep coming than the exit lets
through), and otel_jax's own meter and logger providers exporting to an OTLP/HTTP endpoint
of this script's that answers; the program makes cyclic garbage whose finalizers compile
(40 compiles in all), wherever the collector frees it, up to its last line. Counted per
Python: the exit statuses, and the runs in which a finalizer ran on a thread of otel_jax's
or of the OpenTelemetry SDK's while the interpreter tore down (once otel_jax's exit
handlers ran). A daemon thread inside a compile when the interpreter tears down aborts
the process (status -6 or 134): otel_jax's threads end first.

    python benchmarks/exit_safety.py --python .venv/bin/python \\
        --python .venv-py312/bin/python --python .venv-latest/bin/python
    python benchmarks/exit_safety.py --runs 20 --loaded    # two busy processes meanwhile

``--loaded`` keeps two processes spinning (``while 1: pass``) for the whole run, started
and ended by this script; ``--jobs`` runs that many programs side by side (2 by default).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import atexit, os, sys, threading
late = []  # set once otel_jax's exit handlers ran: registered before otel_jax's own
atexit.register(late.append, True)
import jax, numpy as np
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
import otel_jax

@jax.jit
def inside_fn(x):
    return x * 3

made = [0]
def compile_inside():
    made[0] += 1
    inside_fn(np.ones(made[0] + 1000, np.float32))

class Compiling(SpanProcessor):  # runs on otel_jax's thread: a compile per span
    def on_end(self, span):
        compile_inside()

class Compiles:
    def __init__(self):
        self.me = self  # a cycle: freed by the collector, on whichever thread it runs
        self.load = [object() for _ in range(20)]
    def __del__(self):
        name = threading.current_thread().name
        if late or sys.is_finalizing():
            if name.startswith(("otel_jax", "Otel")):
                os.write(1, f"LATE-ON {name}\n".encode())
            return
        if made[0] < 40:
            compile_inside()

provider = TracerProvider()
provider.add_span_processor(Compiling())
otel_jax.install(tracer_provider=provider, log_output=None)
f = jax.jit(lambda x: x + 1)
for n in range(1, 31):
    f(np.ones(n, np.float32))
    for _ in range(40):
        Compiles()
"""


def answering_endpoint() -> tuple[str, ThreadingHTTPServer]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def one_run(python: str, endpoint: str) -> tuple[int, bool, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu",
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_METRIC_EXPORT_INTERVAL": "600000",
                "PYTHONWARNINGS": "ignore"})
    start = time.monotonic()
    try:
        done = subprocess.run([python, "-c", PROGRAM], capture_output=True, text=True,
                              env=env, timeout=300)
    except subprocess.TimeoutExpired:
        return -999, False, time.monotonic() - start
    return done.returncode, "LATE-ON" in done.stdout, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--loaded", action="store_true")
    args = parser.parse_args()
    endpoint, server = answering_endpoint()
    spinners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                for _ in range(2 if args.loaded else 0)]
    try:
        for python in args.python or [sys.executable]:
            version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                     capture_output=True, text=True).stdout.strip()
            with ThreadPoolExecutor(args.jobs) as pool:
                results = list(pool.map(functools.partial(one_run, python),
                                        [endpoint] * args.runs))
            statuses = collections.Counter(rc for rc, _, _ in results)
            late = sum(1 for _, on, _ in results if on)
            slowest = max(s for _, _, s in results)
            print(f"Python {version}{' (loaded)' if args.loaded else ''}: {args.runs} runs, "
                  f"exit statuses {dict(statuses)}, finalizers on otel_jax's or the SDK's "
                  f"threads at teardown in {late} run(s), slowest run {slowest:.1f} s, "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        server.shutdown()


if __name__ == "__main__":
    main()
