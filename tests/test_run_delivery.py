"""``otel-jax run`` delivers as ``install()`` in code does: a program that sets up its own
OpenTelemetry after ``import jax`` finds every compile in its providers at its own
``force_flush()`` and at its exit; the run folder goes at every exit otel_jax sees (or at the
next run, after a signal killed the program); the program's signals and exit are its own;
a Python that cannot take the command's set-up says so. Real programs, in subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import pythonpath

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300

pytestmark = pytest.mark.slow


def env(tmp: Path, **extra: str) -> dict[str, str]:
    # OTEL_JAX_HAZARDS as the test is marked (tests/conftest.py): these programs count
    # their records, and a hazard's line would be one more
    out = {k: v for k, v in os.environ.items()
           if (not k.startswith(("OTEL_", "JAX_")) or k == "OTEL_JAX_HAZARDS")
           and k != "XLA_FLAGS"}
    out.update(PYTHONPATH=pythonpath(ROOT), OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               TMPDIR=str(tmp), JAX_PLATFORMS="cpu")
    out.update(extra)
    return out


def run(*args: str, cwd: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_jax", "run", *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
                          env=environ)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


OWN_PROVIDERS = """
    import os, sys
    import jax, numpy as np
    from opentelemetry import _logs, metrics, trace
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (BatchSpanProcessor, SpanExporter,
                                                SpanExportResult)

    from otel_jax._pipeline import _background
    _background.POLL_S = 5.0  # nothing is emitted on its own before the program reads

    out = sys.argv[1]

    class Spans(SpanExporter):  # what reaches the application's exporter, at any time
        def export(self, spans):
            with open(out + ".spans", "a") as fh:
                fh.writelines(f"{s.name}\\n" for s in spans if s.name == "jax.compile triple")
            return SpanExportResult.SUCCESS

    class Logs:  # a log-record exporter, as the batch processor calls it
        def export(self, batch):
            with open(out + ".logs", "a") as fh:
                fh.writelines("record\\n" for r in batch
                              if "triple" in str(getattr(r, "log_record", r).body))
            return None
        def force_flush(self, timeout_millis=30000):
            return True
        def shutdown(self):
            pass

    def count(suffix):
        try:
            with open(out + suffix) as fh:
                return len(fh.read().splitlines())
        except FileNotFoundError:
            return 0

    # Set up after `import jax` (otel-jax run installed otel_jax then): the usual order of
    # an instrumented application. Shut down by the SDK's own exit handlers.
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Spans()))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(meter_provider)
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(Logs()))
    _logs.set_logger_provider(logger_provider)

    def compiles_counted():
        data = reader.get_metrics_data()
        return sum(p.value for rm in (data.resource_metrics if data else ())
                   for sm in rm.scope_metrics for m in sm.metrics
                   if m.name == "jax.compilations" for p in m.data.data_points
                   if str(p.attributes.get("code.function.name", "")).endswith("triple"))

    @jax.jit
    def triple(x):
        return x * 3

    for n in range(1, 6):
        triple(np.ones(n, np.float32)).block_until_ready()
    tracer_provider.force_flush()
    logger_provider.force_flush()
    meter_provider.force_flush()
    print("AT-FLUSH", count(".spans"), compiles_counted(), count(".logs"), flush=True)
    for n in range(6, 9):  # left to the exit
        triple(np.ones(n, np.float32)).block_until_ready()
    if sys.argv[2] == "shutdown":
        tracer_provider.shutdown()
        print("AT-SHUTDOWN", count(".spans"), flush=True)
"""


@pytest.mark.parametrize("ending", ["exit", "shutdown"])
def test_a_program_that_sets_up_opentelemetry_after_jax_loses_nothing(
        tmp_path: Path, ending: str) -> None:
    script = write(tmp_path / "app.py", OWN_PROVIDERS)
    out = tmp_path / "out"
    proc = run("--log-output", "none", "--summary", "never", str(script), str(out), ending,
               cwd=tmp_path, environ=env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Its own flush right after 5 compiles: their spans exported, their points in the
    # reader, their log records exported (one jax.compile record each).
    [at_flush] = [line.split()[1:] for line in proc.stdout.splitlines()
                  if line.startswith("AT-FLUSH")]
    assert [float(v) for v in at_flush] == [5, 5, 5], proc.stderr[-3000:]
    if ending == "shutdown":
        assert "AT-SHUTDOWN 8" in proc.stdout, proc.stderr[-3000:]
    # At exit, the 3 compiles made since: every span and log record exported.
    spans = (tmp_path / "out.spans").read_text().splitlines()
    assert len(spans) == 8, proc.stderr[-3000:]
    assert len((tmp_path / "out.logs").read_text().split()) == 8, proc.stderr[-3000:]
    assert "already shutdown" not in proc.stderr


@pytest.mark.parametrize("option", ["-E", "-S", "-I"])
def test_python_options_that_keep_the_bootstrap_out_are_said_in_one_line(
        tmp_path: Path, option: str) -> None:
    started = time.monotonic()
    proc = run(sys.executable, option, "-c", "print('RAN')", cwd=tmp_path,
               environ=env(tmp_path))
    assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("otel-jax run:")]
    assert len(said) == 1 and option in said[0] and "cannot be installed" in said[0], \
        proc.stderr
    # decided before the run folder is made: nothing is left behind
    assert not list(tmp_path.glob("otel_jax-run-*"))
    assert time.monotonic() - started < TIMEOUT_S


POOLS = """
    import multiprocessing as mp, sys
    if sys.argv[3] == "top":  # else JAX is first imported by a worker's task
        import jax

    def work(k):
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + k)(jnp.ones(k % 7 + 1)).block_until_ready()
        return k

    if __name__ == "__main__":
        context = mp.get_context(sys.argv[1])  # the parent never starts JAX's backend
        for run in range(int(sys.argv[2])):
            # __exit__ calls terminate(): SIGTERM to workers that may still be emitting
            with context.Pool(4) as pool:
                assert pool.map(work, range(32 * run, 32 * run + 32)) == list(
                    range(32 * run, 32 * run + 32))
"""


# Where each worker imports JAX anew (spawned, or JAX first imported in a task), fewer
# pools keep the test's time near the first case's; each pool's workers are terminated all
# the same.
@pytest.mark.parametrize(("method", "imports", "runs"), [
    ("fork", "top", 10), ("fork", "task", 2), ("spawn", "top", 3), ("forkserver", "task", 2)])
def test_every_compile_of_a_pools_workers_arrives(tmp_path: Path, method: str, imports: str,
                                                  runs: int) -> None:
    """A ``Pool`` in a ``with`` statement, over and over: its workers are terminated as
    soon as the parent has their results, yet every compile's JSON line, span (at a real
    OTLP receiver) and summary entry is there, whichever the start method (a spawned
    worker runs no after-fork callback: ``_setup._exit.watch_spawned``)."""
    import logging
    import threading

    from conftest import free_port, needs_loopback

    needs_loopback()  # the receiver listens on 127.0.0.1
    pytest.importorskip("oteltest")
    from oteltest.sink import HttpSink
    from oteltest.sink.handler import RequestHandler

    class Spans(RequestHandler):
        def __init__(self) -> None:
            self.names: list[str] = []
            self.lock = threading.Lock()

        def handle_trace(self, request, headers):  # type: ignore[no-untyped-def]
            with self.lock:
                self.names += [s.name for rs in request.resource_spans
                               for ss in rs.scope_spans for s in ss.spans]

        def handle_metrics(self, request, headers):  # type: ignore[no-untyped-def]
            pass

        def handle_logs(self, request, headers):  # type: ignore[no-untyped-def]
            pass

    spans, port = Spans(), free_port()
    sink = HttpSink(spans, logging.getLogger("otlp-receiver"), port=port)
    sink.start()
    try:
        script = write(tmp_path / "pools.py", POOLS)
        proc = run("--summary", "always", str(script), method, str(runs), imports,
                   cwd=tmp_path,
                   environ=env(tmp_path, OTEL_TRACES_EXPORTER="otlp",
                               OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        expected = 32 * runs
        lines = [line for line in proc.stderr.splitlines()
                 if '"event": "jax.compile"' in line and "<lambda>" in line]
        assert len(lines) == expected, proc.stderr[-3000:]
        assert f"otel-jax run: {expected} compiles," in proc.stderr, proc.stderr[-3000:]
        deadline = time.monotonic() + 30  # the exports were made before the workers ended
        while time.monotonic() < deadline:
            with spans.lock:
                arrived = sum(name == "jax.compile work.<locals>.<lambda>"
                              for name in spans.names)
            if arrived >= expected:
                break
            time.sleep(0.2)
        assert arrived == expected, (arrived, proc.stderr[-3000:])
    finally:
        sink.stop()


# --- exit, signals, closed streams ---------------------------------------------------------

def _small_pipe(fd: int) -> None:
    """The pipe behind ``fd`` made as small as Linux allows (one page): a few lines fill it."""
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ
    except (ImportError, OSError):
        pass


MANY_COMPILES = """
    import sys
    import jax, jax.numpy as jnp
    f = jax.jit(lambda x: x * 2)
    for n in range(1, 141):  # every one recompiles: the summary has something to say
        f(jnp.ones(n)).block_until_ready()
    print("MAIN-DONE", flush=True)
"""


def test_the_exit_never_waits_for_a_stderr_nobody_reads(tmp_path: Path) -> None:
    # A parent that reads the program's stderr only once it ended: its JSON lines filled
    # the pipe long before the summary comes. The exit writes what it can within its
    # bound, drops the rest, and ends.
    script = write(tmp_path / "many.py", MANY_COMPILES)
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_jax", "run", "--summary", "always", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env(tmp_path))
    assert proc.stderr is not None and proc.stdout is not None
    _small_pipe(proc.stderr.fileno())
    try:
        rc = proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the program did not end while nobody read its stderr")
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert "MAIN-DONE" in out and rc == 0, err[-3000:]


def _pid_dead() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_next_run_removes_the_folders_of_runs_killed_by_a_signal(tmp_path: Path) -> None:
    from otel_jax._run._launch import RUN_PREFIX, remove_stale_runs

    dead = tmp_path / f"{RUN_PREFIX}{_pid_dead()}-abc"
    alive = tmp_path / f"{RUN_PREFIX}{os.getpid()}-def"
    unnamed = tmp_path / f"{RUN_PREFIX}xyz"
    for folder in (dead, alive, unnamed):
        folder.mkdir()
        (folder / "1.jsonl").write_text("{}\n")
    assert remove_stale_runs(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and alive.exists() and unnamed.exists()


SIGNALS = """
    import signal, sys
    if sys.argv[1] == "jax":
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + 1)(jnp.ones(3))
    names = {signal.SIG_DFL: "default", signal.SIG_IGN: "ignored",
             signal.default_int_handler: "python's"}
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        print(sig.name, names.get(signal.getsignal(sig), "other"))
"""


@pytest.mark.parametrize("imports", ["jax", "nothing"])
@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_the_programs_signals_keep_their_disposition(tmp_path: Path, imports: str,
                                                     sigint: str) -> None:
    # What plain Python gives the program, in the same environment, is what it must find:
    # a job started in the background (`nohup make test &`, some CI runners) inherits SIGINT
    # ignored, and Python then leaves it ignored rather than installing its own handler.
    script = write(tmp_path / "signals.py", SIGNALS)

    def start(argv: list[str]) -> subprocess.CompletedProcess[str]:
        def child() -> None:  # in the child, before exec: what its parent gives it
            signal.signal(signal.SIGINT, signal.SIG_IGN if sigint == "ignored"
                          else signal.SIG_DFL)
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                              cwd=tmp_path, env=env(tmp_path), preexec_fn=child)

    plain = start([sys.executable, str(script), imports])
    proc = start([sys.executable, "-m", "otel_jax", "run", "--log-output", "none",
                  str(script), imports])
    assert plain.returncode == 0 and proc.returncode == 0, (plain.stderr + proc.stderr)[-3000:]
    assert proc.stdout == plain.stdout, (proc.stdout, plain.stdout)
    expected = "ignored" if sigint == "ignored" else "python's"
    assert f"SIGINT {expected}" in plain.stdout.splitlines(), plain.stdout


LONG_COMPILE = """
    import sys, time
    import jax, jax.numpy as jnp
    def f(x):
        for i in range(2000):  # a compile that takes seconds
            x = jnp.sin(x) * (i % 7 + 1) + jnp.cos(x[::-1])
        return x
    jax.jit(lambda x: x + 1)(jnp.ones(3))
    print("COMPILING", flush=True)
    jax.jit(f)(jnp.ones(8)).block_until_ready()
    print("COMPILED", flush=True)
"""


def test_sigterm_ends_the_program_mid_compile(tmp_path: Path) -> None:
    # Schedulers end a job with SIGTERM and expect the default action: the process dies at
    # once, inside XLA's compile too, and its run folder is removed by the next run.
    script = write(tmp_path / "long.py", LONG_COMPILE)
    proc = subprocess.Popen([sys.executable, "-m", "otel_jax", "run", "--log-output", "none",
                             str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=tmp_path, env=env(tmp_path), text=True)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "COMPILING"
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        rc = proc.wait(timeout=TIMEOUT_S)
        took = time.monotonic() - sent
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert rc == -signal.SIGTERM and "COMPILED" not in rest, (rc, rest)
    assert took < 2.0, took
    assert list(tmp_path.glob("otel_jax-run-*"))  # nothing of the program's could remove it
    after = run("--log-output", "none", sys.executable, "-c", "pass", cwd=tmp_path,
                environ=env(tmp_path))
    assert after.returncode == 0, after.stderr
    assert not list(tmp_path.glob("otel_jax-run-*"))


CLOSED = """
    import sys
    import jax, jax.numpy as jnp
    f = jax.jit(lambda x: x * 2)
    f(jnp.ones(2)); f(jnp.ones(3))  # a recompile: the summary has something to say
    open(sys.argv[1], "w").write("RAN")
"""


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_the_program_runs_with_a_standard_stream_closed(tmp_path: Path, closed: int) -> None:
    script = write(tmp_path / "closed.py", CLOSED)
    marker = tmp_path / "ran"
    # closed by a shell, as `2>&-` does (no preexec_fn: this process runs JAX's threads)
    proc = subprocess.run(
        ["sh", "-c", f'exec "$@" {closed}>&-', "sh", sys.executable, "-m", "otel_jax",
         "run", str(script), str(marker)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S,
        cwd=tmp_path, env=env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert marker.read_text() == "RAN"
    assert not list(tmp_path.glob("otel_jax-run-*"))
