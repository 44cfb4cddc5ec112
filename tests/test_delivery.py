"""Telemetry made off the compiling thread still arrives where the application reads it:
at its own OpenTelemetry flush and shutdown, in forked workers, at a bounded exit on every
supported Python; and compiles made inside otel_jax's own work (a signal handler, a
finalizer, a user's processor or handler) never hang the process."""

from __future__ import annotations

import collections
import contextlib
import gc
import io
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import loopback_listener, needs_loopback, pythonpath
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_jax
from otel_jax._core import _failopen
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._pipeline import _background

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def slow_thread(monkeypatch):
    """otel_jax's background thread looks for work only every 5 s: what is read right after
    a compile is there only if the reader's flush made it so."""
    monkeypatch.setattr(_background, "POLL_S", 5.0)
    otel_jax.uninstall()
    otel_jax.flush()
    yield
    otel_jax.uninstall()


def _compile_spans(exporter: InMemorySpanExporter) -> list:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("jax.compile ")]


def _compiles_counted(reader: InMemoryMetricReader) -> float:
    data = reader.get_metrics_data()
    total = 0.0
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "jax.compilations":  # the user's, not JAX's eager ops
                    total += sum(p.value for p in metric.data.data_points
                                 if not p.attributes.get("jax.compile.eager_op"))
    return total


@pytest.mark.parametrize("processor", [SimpleSpanProcessor, BatchSpanProcessor])
@pytest.mark.parametrize("ending", ["force_flush", "shutdown"])
def test_the_applications_flush_and_shutdown_include_every_compile(slow_thread, processor,
                                                                    ending):
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    otel_jax.install(tracer_provider=tracer_provider, meter_provider=meter_provider,
                     log_output=None)
    f = jax.jit(lambda x: x * 2)
    for n in range(1, 6):
        f(jnp.ones(n))
    if ending == "force_flush":
        assert tracer_provider.force_flush()
        meter_provider.force_flush()
        assert _compiles_counted(reader) == 5
    else:
        tracer_provider.shutdown()
    assert len(_compile_spans(exporter)) == 5


def test_the_meter_providers_flush_alone_includes_every_compile(slow_thread):
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    otel_jax.install(tracer_provider=TracerProvider(), meter_provider=meter_provider,
                     log_output=None)
    f = jax.jit(lambda x: x + 1)
    for n in range(1, 4):
        f(jnp.ones(n))
    meter_provider.force_flush()
    assert _compiles_counted(reader) == 3


def test_the_logger_providers_flush_includes_every_compile(slow_thread):
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    try:
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as Exporter
    except ImportError:  # opentelemetry-sdk < 1.39
        from opentelemetry.sdk._logs.export import InMemoryLogExporter as Exporter
    exporter = Exporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    otel_jax.install(tracer_provider=TracerProvider(), logger_provider=logger_provider,
                     log_output=None)
    f = jax.jit(lambda x: x - 1)
    for n in range(1, 4):
        f(jnp.ones(n))
    assert logger_provider.force_flush()
    assert len(exporter.get_finished_logs()) == 3


def test_the_barriers_leave_with_uninstall():
    otel_jax.uninstall()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel_jax.install(tracer_provider=provider, log_output=None)
    processors = provider._active_span_processor._span_processors
    assert type(processors[0]).__name__ == "SpanBarrier"  # first: before the batch flush
    otel_jax.uninstall()
    assert [type(p).__name__ for p in provider._active_span_processor._span_processors] == [
        "SimpleSpanProcessor"]


# --- processes ------------------------------------------------------------------------------

def _run(script: str, *args: str, timeout: float = 240, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    full.update({"PYTHONPATH": pythonpath(ROOT), "JAX_PLATFORMS": "cpu",
                 "PYTHONWARNINGS": "ignore::DeprecationWarning"})
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, timeout=timeout, env=full)


FORKED_WORKERS = """
import multiprocessing as mp, os, sys, concurrent.futures as cf
import jax, jax.numpy as jnp
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
import otel_jax
from otel_jax._pipeline import _background
_background.POLL_S = 5.0  # the thread would not have emitted them before the child ends
out, how = sys.argv[1], sys.argv[2]

class FileExporter(SpanExporter):
    def export(self, spans):
        with open(out + ".spans", "a") as fh:
            for s in spans:
                if s.name.startswith("jax.compile "):
                    fh.write(f"{os.getpid()}\\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(FileExporter()))
otel_jax.install(tracer_provider=provider, log_output=open(out + ".log", "a", buffering=1))

def work(k):
    f = jax.jit(lambda x: x + k)
    for n in range(1, 9):
        f(jnp.ones(n + 10 * k)).block_until_ready()
    return k

if __name__ == "__main__":
    context = mp.get_context("fork")  # JAX's backend is not started before the fork
    if how == "process":
        p = context.Process(target=work, args=(1,))
        p.start(); p.join()
        sys.exit(p.exitcode)
    if how == "with-pool":  # __exit__ calls terminate(): SIGTERM to the workers
        with context.Pool(2) as pool:
            assert sorted(pool.map(work, [1, 2])) == [1, 2]
        sys.exit(0)
    with cf.ProcessPoolExecutor(2, mp_context=context) as pool:
        assert sorted(pool.map(work, [1, 2])) == [1, 2]
"""


@pytest.mark.slow
@pytest.mark.parametrize("how, compiles", [("process", 8), ("pool", 16), ("with-pool", 16)])
def test_forked_workers_emit_every_compile(tmp_path, how, compiles):
    out = str(tmp_path / "o")
    done = _run(FORKED_WORKERS, out, how)
    assert done.returncode == 0, done.stderr[-2000:]
    spans = Path(out + ".spans").read_text().split() if Path(out + ".spans").exists() else []
    lines = [json.loads(line) for line in Path(out + ".log").read_text().splitlines()]
    assert len(spans) == compiles
    assert sum(1 for line in lines if line["event"] == "jax.compile") == compiles


EXIT_TIMED = """
import atexit, sys, time
atexit.register(lambda: sys.stderr.write(f"HANDLERS-DONE {time.time()}\\n"))  # runs last
import jax, jax.numpy as jnp, otel_jax
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class Blocking(SpanExporter):
    def export(self, spans):
        time.sleep(120)
        return SpanExportResult.SUCCESS

if sys.argv[1] == "blocking-exporter":
    from otel_jax._pipeline import _background
    _background.EXIT_THEIRS_S = 2.0  # the application's code is waited for this long
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Blocking()))
    otel_jax.install(tracer_provider=provider, log_output=None)
else:  # otel_jax's own providers, exporting to OTEL_EXPORTER_OTLP_ENDPOINT
    otel_jax.install(log_output=None)
f = jax.jit(lambda x: x * 2)
for n in range(1, 5):
    f(jnp.ones(n))
sys.stderr.write(f"SCRIPT-END {time.time()}\\n")
"""


def _silent_endpoint() -> tuple[socket.socket, threading.Event]:
    """A port that accepts connections and never answers (bounded: the test closes it)."""
    server = loopback_listener()
    server.listen(64)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
        for conn in held:
            conn.close()
        server.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, stop


@pytest.mark.slow
@pytest.mark.parametrize("case", ["silent-endpoint", "blocking-exporter"])
def test_exit_is_bounded(case):
    env = {"OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    stop = None
    if case == "silent-endpoint":
        server, stop = _silent_endpoint()
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        done = _run(EXIT_TIMED, case, env=env)
    finally:
        if stop is not None:
            stop.set()
    marks = dict(line.split()[:2] for line in done.stderr.splitlines()
                 if line.startswith(("SCRIPT-END", "HANDLERS-DONE")))
    assert set(marks) == {"SCRIPT-END", "HANDLERS-DONE"}, done.stderr[-2000:]
    exit_s = float(marks["HANDLERS-DONE"]) - float(marks["SCRIPT-END"])
    # The documented bounds: otel_jax's flush (2 s) and its providers' shutdown (3 s); a
    # busy machine gets one more second. An exporter the application's processor calls on
    # otel_jax's thread is the application's code: waited for as Python waits for the
    # application's threads (here 2 s at most, 60 s by default), and said once.
    if case == "blocking-exporter":
        said = [line for line in done.stderr.splitlines()
                if "waiting for the application's code" in line]
        assert len(said) == 1 and "otel_jax-emit" in said[0], done.stderr[-2000:]
    assert exit_s < (8.0 if case == "blocking-exporter" else 6.0), (exit_s, done.stderr[-2000:])
    if case == "silent-endpoint":
        said = [line for line in done.stderr.splitlines() if "OtelJaxWarning" in line]
        assert len(said) == 1 and "no answer" in done.stderr, done.stderr[-2000:]
        # Said at exit, where no line of the program's caused it: located at nothing, as
        # Python locates a warning with no frame, not at a place of otel_jax's.
        no_frame = "<sys>:0:" if sys.version_info >= (3, 13) else "sys:1:"
        assert said[0].startswith(f"{no_frame} OtelJaxWarning: "), said


def _answering_endpoint() -> tuple[str, collections.Counter, threading.Event]:
    """An OTLP/HTTP collector that answers 200 to every request and counts them by path."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    posts: collections.Counter = collections.Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            posts[self.path] += 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    needs_loopback()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stop = threading.Event()

    def serve() -> None:
        server.timeout = 0.2
        while not stop.is_set():
            server.handle_request()
        server.server_close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", posts, stop


@pytest.mark.slow
def test_exit_exports_what_is_pending_to_an_answering_endpoint():
    # Nothing is exported before the exit (the batch processors and the metric reader
    # wait 10 min, however slow the program runs here): all of it goes out at exit, on
    # every supported Python (3.12.1 too, which starts no thread at interpreter shutdown).
    endpoint, posts, stop = _answering_endpoint()
    try:
        done = _run(EXIT_TIMED, "otlp", env={"OTEL_METRIC_EXPORT_INTERVAL": "600000",
                                             "OTEL_BSP_SCHEDULE_DELAY": "600000",
                                             "OTEL_BLRP_SCHEDULE_DELAY": "600000",
                                             "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    finally:
        stop.set()
    assert done.returncode == 0, done.stderr[-2000:]
    assert {path: posts[path] > 0 for path in ("/v1/traces", "/v1/metrics", "/v1/logs")} == {
        "/v1/traces": True, "/v1/metrics": True, "/v1/logs": True}, (posts, done.stderr)
    assert "OtelJaxWarning" not in done.stderr, done.stderr[-2000:]


# --- compiles inside otel_jax's own work --------------------------------------------------------

REENTRANT = """
import collections, gc, logging, os, random, signal, sys, threading
import jax, jax.numpy as jnp
from jax._src import monitoring
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
import otel_jax

counted = collections.Counter()  # backend compiles, by JAX's name for the function
def listener(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        counted[kwargs.get("fun_name")] += 1
monitoring.register_event_duration_secs_listener(listener)

@jax.jit
def inside_fn(x):
    return x * 3

OURS = os.path.dirname(otel_jax.__file__) + os.sep

def in_otel_jax(frame):
    # JAX itself cannot take a jit call from a signal handler that lands while it builds
    # a jit wrapper (it waits forever on its own cache's lock, with or without otel_jax, on
    # every supported JAX): the handler compiles only where it interrupted otel_jax.
    return frame is not None and frame.f_code.co_filename.startswith(OURS)

budget = {"n": 0}
def compile_inside():
    # Called where the user's code runs: inside a trace of JAX's (then this call is
    # traced, not compiled), or inside otel_jax's own work.
    if budget["n"] < 25:
        budget["n"] += 1
        try:
            inside_fn(jnp.ones(100 + budget["n"]))
        except Exception:  # JAX cannot take a call landing inside its own dispatch
            pass

how = sys.argv[1]
random.seed(int(sys.argv[2]))
provider = TracerProvider()
if how == "processor":
    class Compiling(SpanExporter):
        def export(self, spans):
            compile_inside()
            return SpanExportResult.SUCCESS
    provider.add_span_processor(SimpleSpanProcessor(Compiling()))
if how == "handler":
    class CompilingHandler(logging.Handler):
        def emit(self, record):
            compile_inside()
    logging.getLogger("otel_jax").addHandler(CompilingHandler())
otel_jax.install(tracer_provider=provider, log_output=open(sys.argv[3], "a", buffering=1),
                 storm_threshold=1)

if how == "signal":
    def handler(signum, frame):
        if in_otel_jax(frame):
            compile_inside()
        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0002, 0.004))
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.001)
if how in ("locks", "finalizer"):
    # Interrupted while otel_jax holds its locks, on the compiling thread: each acquisition
    # of these raises the signal (or runs the collector, whose finalizers compile), so the
    # handler or finalizer runs inside the locked block, at the next instruction.
    from otel_jax._pipeline._engine import ENGINE
    from otel_jax._core import _failopen

    if how == "locks":
        signal.signal(signal.SIGUSR1, lambda signum, frame: compile_inside())
        interrupt = lambda: signal.raise_signal(signal.SIGUSR1)
    else:
        class Compiles:
            def __init__(self):
                self.me = self  # a cycle: freed by the collector, wherever it runs
            def __del__(self):
                compile_inside()
        gc.disable()  # the collector runs where otel_jax holds its locks, and only there
        def interrupt():
            if budget["n"] < 25:
                gc.collect(0)  # the young generation: where the garbage made below is
                Compiles()  # garbage for the next collection

    class Interrupting:
        def __init__(self, lock):
            self._lock = lock
        def __enter__(self):
            self._lock.acquire()
            if threading.current_thread() is threading.main_thread():
                interrupt()
            return self
        def __exit__(self, *exc):
            self._lock.release()
        def acquire(self, *args, **kwargs):
            return self._lock.acquire(*args, **kwargs)
        def release(self):
            self._lock.release()

    if how == "finalizer":
        Compiles()
    ENGINE.history._lock = Interrupting(ENGINE.history._lock)
    ENGINE.policy._lock = Interrupting(ENGINE.policy._lock)
    ENGINE.failopen._lock = Interrupting(ENGINE.failopen._lock)
    _failopen._ONCE._lock = Interrupting(_failopen._ONCE._lock)

@jax.jit
def step_fn(x):
    return x + 1

for n in range(1, 61):
    step_fn(jnp.ones(n)).block_until_ready()
if how == "signal":
    signal.setitimer(signal.ITIMER_REAL, 0)
gc.collect()
assert otel_jax.flush(60)
print("COUNTS", counted["jit(step_fn)"], counted["jit(inside_fn)"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["signal", "locks", "finalizer", "processor", "handler"])
def test_compiles_inside_otel_jax_never_hang_and_are_all_counted(tmp_path, how):
    log = tmp_path / "compiles.jsonl"
    landed = 0  # handler calls that compiled: the case tests nothing if none did
    for seed in (1, 2) if how == "signal" else (1,):
        log.write_text("")
        try:
            done = _run(REENTRANT, how, str(seed), str(log), timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a compile inside otel_jax's work ({how}) hung the process")
        assert done.returncode == 0, done.stderr[-3000:]
        [counts] = [line.split()[1:] for line in done.stdout.splitlines()
                    if line.startswith("COUNTS")]
        step_compiles, inside_compiles = int(counts[0]), int(counts[1])
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        reported = collections.Counter(line["function"].rsplit(".", 1)[-1] for line in lines
                                       if line["event"] == "jax.compile")
        # Every compile JAX made of either function is reported, the ones made inside
        # otel_jax's own work included; none is lost, none is made up.
        assert step_compiles == 60
        assert (reported["step_fn"], reported["inside_fn"]) == (60, inside_compiles)
        landed += inside_compiles
    if how != "handler":  # a log handler of the user's is called only on a warning
        assert landed > 0


FINALIZERS = """
import atexit, collections, json, os, sys, threading
late = []  # set once otel_jax's exit handlers ran: registered before otel_jax's own
atexit.register(late.append, True)
import jax, numpy as np
from jax._src import monitoring
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
import otel_jax

counted = collections.Counter()  # backend compiles, by JAX's name for the function
def listener(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        counted[kwargs.get("fun_name")] += 1
monitoring.register_event_duration_secs_listener(listener)

class Encoding(SpanExporter):  # allocates as it exports, as an encoder does
    def export(self, spans):
        for span in spans:
            [[span.name] for _ in range(3000)]
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Encoding()))
otel_jax.install(tracer_provider=provider, log_output=open(sys.argv[1], "a", buffering=1))
ran_on = collections.Counter()  # where the collector ran the finalizers
OURS = ("otel_jax-",)

@jax.jit
def inside_fn(x):
    return x + 1

class Compiles:
    made = 0
    def __init__(self):
        self.me = self  # a cycle: freed by the collector, on whichever thread it runs
        self.load = [object() for _ in range(20)]
    def __del__(self):
        name = threading.current_thread().name
        if late or sys.is_finalizing():
            if name.startswith(OURS):  # the interpreter tears down: none may run there
                os.write(1, f"LATE-ON {name}\\n".encode())
            return
        ran_on[name] += 1
        if name != "MainThread":  # on a thread of otel_jax's: a compile there
            Compiles.made = min(Compiles.made + 1, 12)  # then calls that compile nothing
            inside_fn(np.ones(Compiles.made, np.float32))

@jax.jit
def step_fn(x):
    return x * 2

for n in range(1, 61):
    step_fn(np.ones(n, np.float32))
    for _ in range(40):
        Compiles()  # garbage made while otel_jax emits
assert otel_jax.flush(60)
print("RAN", json.dumps(ran_on), counted["jit(inside_fn)"], flush=True)
for n in range(61, 66):  # left to the exit, with garbage for its collections
    step_fn(np.ones(n, np.float32))
    for _ in range(40):
        Compiles()
"""


@pytest.mark.slow
def test_finalizers_that_compile_on_otel_jaxs_threads_are_captured_and_never_run_at_teardown(
        tmp_path):
    # The collector runs finalizers on whichever thread allocates past its threshold,
    # otel_jax's emission thread too (its exporter allocates): a finalizer's compile there
    # is captured like any other and holds nothing up. At the exit otel_jax's threads end
    # before the interpreter tears down: no finalizer runs on them then.
    log = tmp_path / "compiles.jsonl"
    done = _run(FINALIZERS, str(log), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LATE-ON" not in done.stdout, done.stdout
    [ran] = [line.split(" ", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("RAN ")]
    ran_on, inside = json.loads(ran.rsplit(" ", 1)[0]), int(ran.rsplit(" ", 1)[1])
    assert sum(ran_on.values()) > 1000 and "otel_jax-emit" in ran_on, ran_on
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    reported = collections.Counter(line["function"].rsplit(".", 1)[-1] for line in lines
                                   if line["event"] == "jax.compile")
    assert reported["step_fn"] == 65
    assert reported["inside_fn"] >= inside, (reported, ran_on)


def test_otel_jaxs_threads_leave_the_programs_collector_as_they_found_it():
    # The program's own gc.disable() holds while otel_jax's threads work and wait; and
    # with it on, it is on again whenever they wait.
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=TracerProvider(), log_output=None)
    f = jax.jit(lambda x: x - 1)
    try:
        f(jnp.ones(3))
        assert otel_jax.flush(30)
        assert gc.isenabled()
        gc.disable()
        try:
            f(jnp.ones(4))
            assert otel_jax.flush(30)
            assert not gc.isenabled()
        finally:
            gc.enable()
        f(jnp.ones(5))
        assert otel_jax.flush(30)
        assert gc.isenabled()
    finally:
        otel_jax.uninstall()


class RaisingHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise OSError("disk full")


@pytest.fixture
def raising_handler():
    """A logging handler of the user's on otel_jax's logger that raises."""
    otel_jax.uninstall()
    _failopen.reset_warnings()
    handler = RaisingHandler()
    logger = logging.getLogger("otel_jax")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        otel_jax.uninstall()


def test_a_users_logging_handler_that_raises_is_named_as_theirs(raising_handler):
    otel_jax.install(tracer_provider=TracerProvider(), log_output=None,
                     storm_threshold=1, emit_in_background=False)
    f = jax.jit(lambda x: x * 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 4):
            f(jnp.ones(n))
        otel_jax.flush()
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    theirs = [m for m in ours if "your logging handler raised OSError: 'disk full'" in m]
    assert len(theirs) == 1, ours
    assert not any("internal error" in m for m in ours), ours
    assert otel_jax.installation() is not None


def test_a_warning_from_the_background_thread_points_at_the_jit_call(raising_handler,
                                                                       monkeypatch):
    caught: list[warnings.WarningMessage] = []
    monkeypatch.setattr(warnings, "showwarning",
                        lambda *a, **k: caught.append(warnings.WarningMessage(*a, **k)))
    otel_jax.install(tracer_provider=TracerProvider(), log_output=None, storm_threshold=1)
    f = jax.jit(lambda x: x * 7)
    line = sys._getframe().f_lineno + 2
    for n in range(1, 4):
        f(jnp.ones(n))
    assert otel_jax.flush()
    ours = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert ours and all((w.filename, w.lineno) == (__file__, line) for w in ours), [
        (w.filename, w.lineno, str(w.message)) for w in ours]


@pytest.mark.parametrize("kind", ["file", "pipe"])
def test_a_log_output_that_does_not_keep_up_is_named_for_what_it_is(tmp_path, kind):
    from otel_jax._emit._logs import JsonLogEmitter

    if kind == "file":
        stream = open(tmp_path / "log.jsonl", "w")
    else:
        read_fd, write_fd = os.pipe()
        stream = os.fdopen(write_fd, "w")
    said: list[str] = []
    emitter = JsonLogEmitter(stream, failopen=_failopen.FailOpen(warn=said.append),
                             queue_size=2)
    release = threading.Event()
    emitter._write = lambda batch: release.wait(30)  # the writer is held: the queue fills
    _failopen.reset_warnings()
    try:
        for _ in range(6):
            emitter._emit(20, "jax.compile", {})
    finally:
        release.set()
        emitter.close(5)
        stream.close()
        if kind == "pipe":
            os.close(read_fd)
    [message] = said
    assert "2 log lines were waiting to be written" in message
    assert ("a file" if kind == "file" else "a pipe") in message
    assert "nobody reads" not in message


def test_a_line_after_uninstall_closed_the_output_is_said_to_be_so(tmp_path):
    from otel_jax._emit._logs import JsonLogEmitter

    said: list[str] = []
    with open(tmp_path / "log.jsonl", "w") as stream:
        emitter = JsonLogEmitter(stream, failopen=_failopen.FailOpen(warn=said.append))
        _failopen.reset_warnings()
        emitter._emit(20, "jax.compile", {})
        assert emitter.close(5)
        emitter._emit(20, "jax.compile", {})  # a compile emitted after uninstall()
    [message] = said
    assert "after uninstall() closed the JSON log stream" in message
    assert "waiting" not in message and "disk" not in message
    assert emitter.dropped == 1


INTERRUPTED = """
import io, os, signal, sys
# Ctrl-C raises KeyboardInterrupt only where SIGINT has Python's handler: a job started with
# `&` from a non-interactive shell (CI, `nohup make test &`) inherits SIGINT ignored, and the
# interpreter then leaves it ignored. Both runs set the disposition they rely on.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
import jax, jax.numpy as jnp
if sys.argv[1] == "installed":
    import otel_jax
    otel_jax.install(log_output=io.StringIO())
jax.jit(lambda x: x + 1)(jnp.ones(3))
os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, with the compile still to be reported
"""


@pytest.mark.slow
def test_an_interrupted_program_dies_of_the_interrupt_as_without_otel_jax():
    plain = _run(INTERRUPTED, "plain")
    installed = _run(INTERRUPTED, "installed")
    assert plain.returncode == -2  # killed by SIGINT, as Python does for a Ctrl-C
    assert installed.returncode == plain.returncode, installed.stderr[-2000:]
    assert "KeyboardInterrupt" in installed.stderr


def test_a_log_output_that_blocks_does_not_keep_the_collector_off():
    # The log writer blocked in the program's stream (a pipe nobody reads, a network
    # handler): the program's collector is the program's all along.
    otel_jax.uninstall()
    entered, release = threading.Event(), threading.Event()

    class Blocking(io.TextIOBase):  # written on otel_jax's log writer thread
        def write(self, text: str) -> int:
            entered.set()
            release.wait(120)
            return len(text)

    otel_jax.install(tracer_provider=TracerProvider(), log_output=Blocking())
    try:
        jax.jit(lambda x: x * 3)(jnp.ones(3))
        assert entered.wait(60)
        assert gc.isenabled()
        before = gc.get_stats()[0]["collections"]
        for _ in range(20_000):  # cyclic garbage, freed by young collections
            cycle: list = []
            cycle.append(cycle)
        assert gc.get_stats()[0]["collections"] > before
    finally:
        release.set()
        otel_jax.uninstall()
        gc.enable()


REFUSED_HAZARDS = """
import structlog, jax, jax.numpy as jnp, otel_jax

def refuse_hazards(logger, method, event_dict):
    if event_dict.get("event") == "jax.compile.hazard":
        raise ValueError("no hazard lines here")
    return event_dict

structlog.configure(processors=[refuse_hazards, structlog.processors.JSONRenderer()])
otel_jax.install(log_output="structlog")
f = jax.jit(lambda x: x * 2)
for n in range(1, 7):  # a new length each call: a shape hazard
    f(jnp.ones(n))
otel_jax.flush()
"""


# --- the collector is the program's; the exit ends otel_jax's threads first -----------------

COLLECTOR_HELD = """
import gc, sys, threading
import jax, numpy as np
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
import otel_jax

entered, release = threading.Event(), threading.Event()

class Stalled(SpanExporter):  # a collector endpoint that does not answer, for a while
    def export(self, spans):
        entered.set()
        release.wait(60)
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(Stalled()))
otel_jax.install(tracer_provider=provider, log_output=None)
young = [0]
def count(phase, info):
    if phase == "start" and info["generation"] == 0:
        young[0] += 1
gc.callbacks.append(count)
f = jax.jit(lambda x: x + 1)
f(np.ones(3, np.float32))
assert entered.wait(60)  # otel_jax's thread is inside the exporter from here on
for _ in range(300_000):  # the program's cyclic garbage: only the collector frees it
    cycle = []
    cycle.append(cycle)
print("YOUNG", young[0], flush=True)
gc.disable()  # the program's own choice, made while otel_jax's thread works
release.set()
f(np.ones(4, np.float32))
assert otel_jax.flush(60)
print("ENABLED", gc.isenabled(), flush=True)
"""


def test_the_collector_is_the_programs_while_an_exporter_holds_otel_jaxs_thread():
    # An exporter that holds otel_jax's thread (an endpoint that does not answer) must not
    # stop the program's garbage from being collected; the program's own gc.disable(),
    # made while otel_jax's thread works, holds after it.
    done = _run(COLLECTOR_HELD, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.split()[:2] for line in done.stdout.splitlines()
                if line.startswith(("YOUNG", "ENABLED")))
    # 300,000 cycles: at least one young collection per 2,000 allocations (3.13's
    # threshold; 700 before), whatever the machine's speed.
    assert int(said["YOUNG"]) >= 100, done.stdout
    assert said["ENABLED"] == "False", done.stdout


EXIT_COMPILES = """
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

how = sys.argv[1]
if how == "on_end":
    class Compiling(SpanProcessor):  # runs on otel_jax's thread: a compile per span
        def on_end(self, span):
            compile_inside()
    provider = TracerProvider()
    provider.add_span_processor(Compiling())
    otel_jax.install(tracer_provider=provider, log_output=None)
else:  # otel_jax's own providers, exporting to the test's endpoint
    otel_jax.install(log_output=None)

class Compiles:
    def __init__(self):
        self.me = self  # a cycle: freed by the collector, on whichever thread it runs
        self.load = [object() for _ in range(20)]
    def __del__(self):
        name = threading.current_thread().name
        if late or sys.is_finalizing():
            if name.startswith(("otel_jax", "Otel")):  # the interpreter tears down
                os.write(1, f"LATE-ON {name}\\n".encode())
            return
        if made[0] < 40:
            compile_inside()

f = jax.jit(lambda x: x + 1)
for n in range(1, 31):
    f(np.ones(n, np.float32))
    if how == "finalizer":
        for _ in range(40):
            Compiles()  # garbage, freed while otel_jax emits and exits
"""


@pytest.mark.slow
@pytest.mark.hazards
def test_the_exit_says_which_lines_were_dropped_and_why():
    """A structlog processor of the application's that raises on hazard lines: the exit
    says hazard lines were dropped because it raised, not that compile lines were, nor
    that the output did not keep up."""
    done = _run(REFUSED_HAZARDS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"event": "jax.compile"' in done.stdout + done.stderr  # compile lines went out
    [said] = [line for line in done.stderr.splitlines() if "were dropped" in line]
    assert "hazard line" in said and "compile line" not in said, said
    assert "your structlog configuration raised ValueError" in said, said
    assert "keep up" not in said, said


@pytest.mark.slow
@pytest.mark.parametrize("how", ["on_end", "finalizer"])
def test_compiles_of_the_programs_code_on_otel_jaxs_threads_at_exit_never_abort(how):
    # A span processor whose on_end compiles (on otel_jax's thread, at every span, so that
    # its compiles make more spans), finalizers that compile where the collector runs them:
    # the exit ends otel_jax's threads before the interpreter tears down, with a bound, and
    # no finalizer runs on them then. Several runs: an abort was one run in two or three.
    env = {"OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    stop = None
    if how == "finalizer":
        endpoint, _posts, stop = _answering_endpoint()
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    try:
        for _ in range(3):
            done = _run(EXIT_COMPILES, how, env=env, timeout=180)
            assert done.returncode == 0, done.stderr[-3000:]
            assert "LATE-ON" not in done.stdout, done.stdout
    finally:
        if stop is not None:
            stop.set()
    if how == "on_end":  # more compiles keep coming than the exit's bound lets through
        assert "exit dropped" in done.stderr and "compile(s)" in done.stderr, done.stderr


FORK_CHILD = """
import atexit, os, sys, time
parent = os.getpid()
atexit.register(lambda: os.getpid() != parent  # the last exit handler to run, in the child
                and sys.stderr.write(f"HANDLERS-DONE {time.time()}\\n"))
import jax, numpy as np
import otel_jax
otel_jax.install(log_output=None)
jax.jit(lambda x: x + 1)(np.ones(3, np.float32))
assert otel_jax.flush(60)
pid = os.fork()
if pid == 0:  # a plain fork: it ends through sys.exit, atexit and the interpreter's exit
    sys.stderr.write(f"CHILD-EXIT {time.time()}\\n")
    sys.exit(0)
_, status = os.waitpid(pid, 0)
sys.stderr.write(f"CHILD-DONE {time.time()} {os.waitstatus_to_exitcode(status)}\\n")
os._exit(0)  # the parent's own exit is not what is tested
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_that_exits_says_what_it_drops_on_every_python():
    # A child of os.fork() that ends with sys.exit shuts down the providers it inherited,
    # within the exit's bound, and says what a silent endpoint kept from it; on Python
    # 3.12.0-3.12.1, which start no thread at interpreter shutdown, as on the others.
    server, stop = _silent_endpoint()
    env = {"OTEL_METRIC_EXPORT_INTERVAL": "600000",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.getsockname()[1]}"}
    try:
        done = _run(FORK_CHILD, env=env, timeout=180)
    finally:
        stop.set()
    assert done.returncode == 0, done.stderr[-3000:]
    marks = {line.split()[0]: line.split()[1:] for line in done.stderr.splitlines()
             if line.startswith(("CHILD-EXIT", "HANDLERS-DONE", "CHILD-DONE"))}
    # The child's own exit status is not otel_jax's: XLA's threads are not fork-safe, and
    # a plain JAX program's forked child that ends through sys.exit dies as the interpreter
    # tears down (SIGSEGV on jaxlib 0.8.0 and 0.10.2 without otel_jax; "pthread_join
    # failed" on 0.8.0 with it), after every exit handler has run.
    assert "HANDLERS-DONE" in marks and "CHILD-DONE" in marks, done.stderr[-3000:]
    # otel_jax's exit bounds (2 s to flush, 3 s to shut down, 1 s for its threads to end),
    # and a second for a busy machine.
    exit_s = float(marks["HANDLERS-DONE"][0]) - float(marks["CHILD-EXIT"][0])
    assert exit_s < 7.0, done.stderr
    said = [line for line in done.stderr.splitlines()
            if "OtelJaxWarning" in line and "exit dropped" in line]
    assert len(said) == 1 and "metric point" in said[0] \
        and "no answer within 3 s" in said[0], done.stderr[-3000:]


# --- exit writes, late compiles, the application's work inside JAX at exit --------------------

@contextlib.contextmanager
def _full_pipe(monkeypatch):  # type: ignore[no-untyped-def]
    """A pipe filled as a writer that stopped at EAGAIN leaves it (under 1,000 bytes free),
    on a kernel whose select() says such a pipe is writable, as gVisor's does: the read
    end, the write end and a text stream on it."""
    monkeypatch.setattr("select.select", lambda r, w, x, t=None: (list(r), list(w), list(x)))
    read, write = os.pipe()
    try:
        os.set_blocking(write, False)
        try:
            while True:
                os.write(write, b"x" * 1000)
        except BlockingIOError:
            pass
        os.set_blocking(write, True)
        yield read, write, open(write, "w", closefd=False)
    finally:
        os.close(read)
        os.close(write)


def test_a_write_at_exit_is_bounded_when_select_says_a_full_pipe_is_writable(monkeypatch):
    # The write that follows such a select() would block: at exit, it gives up at its bound.
    from otel_jax._core import _exitwrite

    line = "a line " * 200 + "\n"  # more than the pipe has room for
    with _full_pipe(monkeypatch) as (read, write, stream):
        done = {}
        writer = threading.Thread(target=lambda: done.setdefault(
            "said", _exitwrite.write_within(stream, line, 0.2)), daemon=True)
        writer.start()
        writer.join(60)
        assert not writer.is_alive() and done == {"said": False}
        assert os.get_blocking(write)  # the application's descriptor is as it was
        os.read(read, 1 << 20)  # the reader comes back: all of it is taken
        assert _exitwrite.write_within(stream, line, 0.2)
        assert os.read(read, 1 << 20).decode() == line


def test_a_full_pipe_is_not_writable_now_whatever_select_says(monkeypatch):
    # What otel_jax says while the program runs (a warning that lines were dropped) is
    # said only where it cannot block: select() alone would let it block on such kernels.
    empty, other = os.pipe()
    try:
        assert _failopen.writable_now(open(other, "w", closefd=False))
    finally:
        os.close(empty)
        os.close(other)
    with _full_pipe(monkeypatch) as (_read, _write, stream):
        assert not _failopen.writable_now(stream)


UNREAD_STDERR = """
import select, sys
# as on a kernel that says a full pipe is writable
select.select = lambda r, w, x, t=None: (list(r), list(w), list(x))
import jax, jax.numpy as jnp
import otel_jax
otel_jax.install()  # JSON lines on stderr, and the OTLP endpoint of the environment
f = jax.jit(lambda x: x * 2)
for n in range(1, 141):
    f(jnp.ones(n)).block_until_ready()
print("MAIN-DONE", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["none", "silent"])
def test_the_exit_never_waits_for_a_stderr_nobody_reads(endpoint):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    env.update({"PYTHONPATH": pythonpath(ROOT), "JAX_PLATFORMS": "cpu",
                "PYTHONWARNINGS": "ignore::DeprecationWarning",
                "OTEL_METRIC_EXPORT_INTERVAL": "600000", "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"})
    stop = None
    if endpoint == "silent":
        server, stop = _silent_endpoint()
        for name in ("TRACES", "METRICS", "LOGS"):
            env.pop(f"OTEL_{name}_EXPORTER")
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.getsockname()[1]}"
    proc = subprocess.Popen([sys.executable, "-c", UNREAD_STDERR], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        import fcntl

        fcntl.fcntl(proc.stderr.fileno(), 1031, 4096)  # F_SETPIPE_SZ: a few lines fill it
    except (ImportError, OSError):
        pass
    try:
        rc = proc.wait(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the program did not end while nobody read its stderr")
    finally:
        if stop is not None:
            stop.set()
        out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert "MAIN-DONE" in out and rc == 0, err[-3000:]


LATE_ATEXIT = """
import atexit, json, sys
def late():  # registered before otel_jax is imported: runs after all of its exit handlers
    import jax, jax.numpy as jnp
    def late_fn(x):
        return x * 2
    g = jax.jit(late_fn)
    g(jnp.ones(3)); g(jnp.ones(4))
    print("LATE-DONE", flush=True)
atexit.register(late)
import jax, jax.numpy as jnp
import otel_jax
otel_jax.install(log_output=sys.stdout)
jax.jit(lambda x: x + 1)(jnp.ones(2))
"""


@pytest.mark.slow
def test_compiles_after_otel_jaxs_exit_are_recorded_inline():
    done = _run(LATE_ATEXIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LATE-DONE" in done.stdout, done.stderr[-3000:]
    assert "internal error" not in done.stderr and "Recursion" not in done.stderr, \
        done.stderr[-3000:]
    late = [json.loads(line) for line in done.stdout.splitlines()
            if line.startswith("{") and "late_fn" in line]
    assert len(late) == 2, done.stdout[-3000:]


LATE_CHAIN = """
import atexit, sys
import numpy as np
atexit.register(lambda: late[0]())  # before otel_jax is imported: runs after its exit handlers
late = []
import jax
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
import otel_jax

@jax.jit
def inside_fn(x):
    return x * 3

made = [0]
class Compiling(SpanProcessor):  # a compile per span, each making a span of its own
    def on_end(self, span):
        made[0] += 1
        inside_fn(np.ones(made[0] + 1000, np.float32))

provider = TracerProvider()
provider.add_span_processor(Compiling())
otel_jax.install(tracer_provider=provider, log_output=None)
late.append(lambda: (jax.jit(lambda x: x - 1)(np.ones(3, np.float32)),
                     print("LATE-DONE", made[0], flush=True)))
jax.jit(lambda x: x + 1)(np.ones(3, np.float32))
"""


@pytest.mark.slow
def test_a_late_compile_whose_span_processor_compiles_at_every_span_lets_the_exit_end():
    # After otel_jax's exit handlers a compile is emitted on the exiting thread, and so is
    # what its span's processor compiles, and what that one's span compiles...: within a
    # bound, then dropped and counted. The same chain reached the exiting thread as a
    # provider's shutdown flushed otel_jax while the emitting thread was ending.
    done = _run(LATE_CHAIN, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    [late] = [line.split() for line in done.stdout.splitlines() if line.startswith("LATE-DONE")]
    assert int(late[1]) >= 1, done.stdout  # its span was emitted: its processor compiled
    assert "exit dropped" in done.stderr and "internal error" not in done.stderr, \
        done.stderr[-3000:]


APPLICATION_IN_JAX = """
import os, sys, time
import jax, jax.numpy as jnp, numpy as np
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanProcessor
import otel_jax
from otel_jax._pipeline import _background
_background.POLL_S = 30.0  # the span is emitted at exit, not before
out = sys.argv[1]

def slow(x):
    time.sleep(15)  # past every bound of otel_jax's exit (2 s + 3 s + 1 s + 4 s)
    return x

class Compiling(SpanProcessor):
    done = False
    def on_end(self, span):
        if self.done or not span.name.startswith("jax.compile "):
            return
        self.done = True
        y = jax.jit(lambda x: jax.pure_callback(slow, x, x))(jnp.ones(3))
        y.block_until_ready()
        with open(out, "w") as fh:
            fh.write("PROCESSOR-DONE")

provider = TracerProvider()
provider.add_span_processor(Compiling())
otel_jax.install(tracer_provider=provider, log_output=None)
jax.jit(lambda x: x + 1)(jnp.ones(2))
"""


@pytest.mark.slow
def test_the_applications_work_inside_jax_at_exit_is_waited_for_to_its_end(tmp_path):
    out = tmp_path / "done"
    done = _run(APPLICATION_IN_JAX, str(out), timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.exists() and out.read_text() == "PROCESSOR-DONE", done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "waiting for the application" in line]
    assert len(said) == 1 and "otel_jax-emit" in said[0], done.stderr[-3000:]


NATIVE_AT_EXIT = """
import os, sys, time
import jax, jax.numpy as jnp
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanProcessor
import otel_jax
from otel_jax._capture._jax import _memory
from otel_jax._pipeline import _background
_background.POLL_S = 30.0  # the span is emitted at exit, not before
out, form = sys.argv[1], sys.argv[2]

@jax.jit
def big(x, n):  # seconds of computation, all of it in XLA's C++: no Python frame
    return jax.lax.fori_loop(0, n, lambda i, y: jnp.sin(y) * 1.0001 + 0.5, x)

x = jnp.ones(1 << 18)
big(x, 10).block_until_ready()
started = time.monotonic()
big(x, 200).block_until_ready()
per_step = max(1e-6, (time.monotonic() - started) / 200)
steps = int(8.0 / per_step)  # past every bound of otel_jax's exit (1 s + 1 s + 4 s)

def compute(what):
    big(x, steps).block_until_ready()
    with open(out, "w") as fh:
        fh.write(what)

if form == "processor":  # the application's code, blocked in C++ on otel_jax's thread
    class Computing(SpanProcessor):
        done = False
        def on_end(self, span):
            if not self.done and span.name.startswith("jax.compile "):
                self.done = True
                compute("PROCESSOR-DONE")
    provider = TracerProvider()
    provider.add_span_processor(Computing())
    otel_jax.install(tracer_provider=provider, log_output=None)
else:  # otel_jax's own call into JAX on that compile, as long as a large program's
    # (its code as if otel_jax's own, as that call's is)
    exec(compile(
        "def slow_size(stats, name):\\n"
        "    if not os.path.exists(out):\\n"
        "        big(x, steps).block_until_ready()\\n"
        "        with open(out, 'w') as fh:\\n"
        "            fh.write('OURS-DONE')\\n"
        "    return size(stats, name)\\n",
        os.path.join(os.path.dirname(_memory.__file__), "_as_if_here.py"), "exec"), globals())
    size = _memory._size
    _memory._size = slow_size
    otel_jax.install(log_output=None)
jax.jit(lambda v: v + 1)(jnp.ones(2))
"""


@pytest.mark.slow
@pytest.mark.parametrize("form", ["processor", "ours"])
def test_a_thread_inside_native_code_at_exit_is_waited_for_never_torn_down(tmp_path, form):
    # The thread is inside XLA's C++ (a computation a span processor runs; otel_jax's own
    # call into JAX on a compile) while the exit runs, with no Python frame of JAX's on
    # its stack: the marks its calls set say where it is, and the exit waits for it.
    # Torn down there, the process aborted (rc 134 / 139).
    out = tmp_path / "done"
    done = _run(NATIVE_AT_EXIT, str(out), form, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = "PROCESSOR-DONE" if form == "processor" else "OURS-DONE"
    assert out.exists() and out.read_text() == expected, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "waiting for the application" in line]
    assert len(said) == (1 if form == "processor" else 0), done.stderr[-3000:]


MAIN_RETURNS_FIRST = """
import threading, time, warnings
import jax, numpy as np
import otel_jax

def showwarning(message, category, filename, lineno, file=None, line=None):
    print(f"SHOWN {category.__name__} {filename}:{lineno} ", flush=True)
warnings.showwarning = showwarning  # the program's own way of showing warnings
otel_jax.install(log_output=None)

def train():  # the program's own thread, still training once the main thread returned
    time.sleep(0.5)
    for n in range(4):
        jax.jit(lambda x: x * 2)(np.ones(2, np.float32))  # a new jit at every step
    otel_jax.flush(60)

threading.Thread(target=train).start()
"""


@pytest.mark.hazards
def test_a_warning_after_the_main_thread_returned_while_the_programs_threads_run_is_its_own(
        tmp_path):
    # Python joins the program's own threads before its exit begins: a hazard warning said
    # then is shown the program's way (its warnings.showwarning, its filters), at the jit
    # call, not in the bounded form kept for the exit itself.
    program = tmp_path / "train.py"  # a file: the hazard reads the loop around the call
    program.write_text(textwrap.dedent(MAIN_RETURNS_FIRST))
    done = _run(f"import runpy; runpy.run_path({str(program)!r}, run_name='__main__')",
                timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = [line for line in done.stdout.splitlines() if line.startswith("SHOWN")]
    assert len(shown) == 1 and "OtelJaxWarning" in shown[0], (done.stdout, done.stderr[-2000:])
    assert "OtelJaxWarning" not in done.stderr, done.stderr[-2000:]
