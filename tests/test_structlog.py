"""structlog: otel_jax's default JSON lines come from its own structlog processor chain, and
``install(log_output="structlog")`` sends its events through the application's structlog
configuration, with the context the application bound on the compiling thread.

Every configuration here is a real one, set up as an application would (``structlog.configure``
with structlog's own processors, renderers and logger factories, ``logging`` handlers with
``ProcessorFormatter``), and restored afterwards.
"""

from __future__ import annotations

import io
import json
import logging
import threading
from pathlib import Path
import warnings

import jax
import jax.numpy as jnp
import pytest
import structlog
from conftest import Telemetry
from opentelemetry import trace

import otel_jax
from otel_jax._report import _aggregate
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._core._vocab import DivergenceKind
from otel_jax._emit import _app_structlog, _logs
from otel_jax._pipeline._engine import ENGINE
from otel_jax._pipeline._record import Divergence, SpanLink

# The default line's fields, in order, for a jitted function's compile inside a span.
DEFAULT_FIELDS = [
    "timestamp", "level", "event", "logger", "function", "file", "line", "callsite", "count",
    "is_recompile", "eager_op", "after_warmup", "cause_kind", "cause", "diff", "diff_total",
    "compared_with", "fingerprint", "program_fingerprint", "hint", "compile_s",
]
DEFAULT_TAIL = ["device_platform", "device_kind", "device_count", "process_index",
                "memory_argument_bytes", "memory_output_bytes", "memory_temp_bytes",
                "memory_generated_code_bytes", "program_ops", "program_top_lines",
                "program_constant_bytes", "trace_id", "span_id"]
#: A field the line has only where the device gives it (TPU, GPU; not the CPU).
DEVICE_LIMIT = "device_memory_limit_bytes"
#: Fields the line has only where the backend gives XLA's cost analysis.
COST = ("program_flops", "program_bytes_accessed")


@pytest.fixture
def app_structlog():
    """The application's structlog configuration, restored after the test; otel_jax
    uninstalled on both sides."""
    otel_jax.uninstall()
    was_configured = structlog.is_configured()
    saved = structlog.get_config()
    try:
        yield
    finally:
        otel_jax.uninstall()
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**saved)


def _install(log_output, **kwargs) -> Telemetry:
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=log_output, **kwargs)
    return t


def _json_events(out: io.StringIO, event: str = "jax.compile") -> list[dict]:
    assert otel_jax.flush(30)
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    return [ln for ln in lines if ln.get("event") == event]


def _json_config(out: io.StringIO) -> None:
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False)


def _span_ids(t: Telemetry, function: str) -> list[tuple[str, str]]:
    return [(trace.format_trace_id(s.context.trace_id), trace.format_span_id(s.context.span_id))
            for s in t.compiles(function)]


def test_app_json_renderer_gets_the_compile_and_the_context_bound_at_the_compile(app_structlog):
    out = io.StringIO()
    _json_config(out)
    t = _install("structlog")
    assert not [s for s in otel_jax.installation().sinks
                if isinstance(s, _logs.JsonLogEmitter)]

    @jax.jit
    def step(x):
        return x * 2

    with structlog.contextvars.bound_contextvars(run_id="run-42", host="worker-3"):
        step(jnp.ones(2))
        step(jnp.ones(3))
    # Bound after the compiles, before the writer thread renders them: not on their lines.
    with structlog.contextvars.bound_contextvars(run_id="later", host="elsewhere"):
        lines = [ln for ln in _json_events(out) if ln["function"].endswith("step")]
    name = "test_app_json_renderer_gets_the_compile_and_the_context_bound_at_the_compile" \
           ".<locals>.step"
    assert [ln["function"] for ln in lines] == [name, name]
    assert [ln["count"] for ln in lines] == [1, 2]
    assert [(ln["run_id"], ln["host"]) for ln in lines] == [("run-42", "worker-3")] * 2
    assert [ln["cause_kind"] for ln in lines] == ["first_compile", "shape"]
    assert lines[1]["diff"] == [{"path": "x", "kind": "shape", "before": "f32[2]",
                                 "after": "f32[3]"}]
    assert lines[1]["is_recompile"] is True and lines[1]["compile_s"] > 0
    assert all(ln["level"] == "info" and ln["logger"] == "otel_jax" for ln in lines)
    assert all(ln["timestamp"].endswith("Z") for ln in lines)  # the app's TimeStamper
    assert [(ln["trace_id"], ln["span_id"]) for ln in lines] == _span_ids(t, name)
    # otel-jax report reads the application's JSON lines as it reads otel_jax's own.
    rows, _ = _aggregate.summarize(io.BytesIO(out.getvalue().encode()))
    [row] = [r for r in rows if r["function"] == name]
    assert row["compiles"] == 2 and row["recompiles"] == 1


def test_the_stdlib_bridge_reaches_the_apps_logging_handlers(app_structlog):
    records: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Capture()
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer()]))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.stdlib.filter_by_level,
                    structlog.stdlib.add_logger_name,
                    structlog.stdlib.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True)
    try:
        t = _install("structlog", storm_threshold=2)

        @jax.jit
        def bridged(x):
            return x - 1

        with structlog.contextvars.bound_contextvars(run_id="run-7", host="node-1"):
            for n in (1, 2, 3):
                bridged(jnp.ones(n))
        assert otel_jax.flush(30)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    ours = [r for r in records if r.name == "otel_jax"]
    rendered = [json.loads(handler.format(r)) for r in ours]
    compiles = [(r, ev) for r, ev in zip(ours, rendered) if ev["event"] == "jax.compile"
                and ev["function"].endswith("bridged")]
    assert [ev["count"] for _, ev in compiles] == [1, 2, 3]
    for record, ev in compiles:
        assert record.levelno == logging.INFO
        assert ev["run_id"] == "run-7" and ev["host"] == "node-1"
        assert ev["logger"] == "otel_jax" and ev["level"] == "info"
    assert compiles[2][1]["cause_kind"] == "shape"
    name = "test_the_stdlib_bridge_reaches_the_apps_logging_handlers.<locals>.bridged"
    assert [(ev["trace_id"], ev["span_id"]) for _, ev in compiles] == _span_ids(t, name)
    [(record, storm)] = [(r, ev) for r, ev in zip(ours, rendered)
                         if ev["event"] == "jax.recompile_storm"]
    assert record.levelno == logging.WARNING
    assert storm["function"] == name and storm["recompiles"] == 2
    assert storm["causes"] == {"shape": 2} and storm["run_id"] == "run-7"


def test_the_apps_console_renderer(app_structlog):
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="%H:%M:%S"),
                    structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False)
    _install("structlog")

    @jax.jit
    def shown(x):
        return x + 3

    with structlog.contextvars.bound_contextvars(run_id="run-9", host="tpu-host-0"):
        shown(jnp.ones(4))
    assert otel_jax.flush(30)
    [line] = [ln for ln in out.getvalue().splitlines() if "shown" in ln]
    assert "jax.compile" in line and "[info" in line and "[otel_jax]" in line
    for pair in ("run_id=run-9", "host=tpu-host-0", "cause_kind=first_compile", "count=1",
                 "function=test_the_apps_console_renderer.<locals>.shown"):
        assert pair in line, line


def test_a_compile_on_another_thread_carries_that_threads_context(app_structlog):
    out = io.StringIO()
    _json_config(out)
    _install("structlog")

    @jax.jit
    def threaded(x):
        return x * 5

    def worker() -> None:
        with structlog.contextvars.bound_contextvars(run_id="worker-run", shard=3):
            threaded(jnp.ones(3))

    with structlog.contextvars.bound_contextvars(run_id="main-run", host="h0"):
        threaded(jnp.ones(2))
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(60)
        assert not thread.is_alive()
        lines = {ln["count"]: ln for ln in _json_events(out)
                 if ln["function"].endswith("threaded")}
    assert lines[1]["run_id"] == "main-run" and lines[1]["host"] == "h0"
    assert "shard" not in lines[1]
    # The worker thread started with a context of its own: what it bound, nothing of main's.
    assert lines[2]["run_id"] == "worker-run" and lines[2]["shard"] == 3
    assert "host" not in lines[2]


def test_a_divergence_is_logged_in_the_context_of_its_compile(app_structlog):
    out = io.StringIO()
    _json_config(out)
    t = _install("structlog")

    @jax.jit
    def ranked(x):
        return x + 2

    with structlog.contextvars.bound_contextvars(run_id="run-div", host="host-5"):
        ranked(jnp.ones(2))
    name = "test_a_divergence_is_logged_in_the_context_of_its_compile.<locals>.ranked"
    [(trace_id, span_id)] = _span_ids(t, name)
    div = Divergence(name, 1, DivergenceKind.SIGNATURE, "x: f32[2] (rank 0) vs f32[3] (rank 1)",
                     ((0,), (1,)), (), (), 0, 0.0, SpanLink(trace_id, span_id))
    report = ENGINE.cross_rank.report
    assert report is not None
    # Detected later, on a thread of its own that bound nothing (as the cross-rank check).
    thread = threading.Thread(target=report, args=(div,))
    thread.start()
    thread.join(60)
    [line] = _json_events(out, "jax.compile.divergence")
    assert line["level"] == "warning" and line["function"] == name
    assert line["divergence"] == div.text and line["ranks"] == [[0], [1]]
    assert line["run_id"] == "run-div" and line["host"] == "host-5"
    assert line["span_id"] == span_id


def test_an_app_processor_that_raises_costs_one_warning_and_that_line(app_structlog):
    out = io.StringIO()
    raised: list[str] = []

    def flaky(logger, method_name, event_dict):
        if not raised and str(event_dict.get("function")).endswith("fragile"):
            raised.append(event_dict["event"])
            raise ValueError("the application's processor is broken")  # said here
        return event_dict

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, flaky,
                    structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False)
    _install("structlog", hazards=False)  # three new lengths in a row: a shape hazard's

    @jax.jit
    def fragile(x):
        return x * 7

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with structlog.contextvars.bound_contextvars(run_id="run-f"):
            assert float(fragile(jnp.ones(1)).sum()) == 7.0
            assert otel_jax.flush(30)  # the first line is rendered (and fails) alone
            assert float(fragile(jnp.ones(2)).sum()) == 14.0
            assert float(fragile(jnp.ones(3)).sum()) == 21.0
            lines = [ln for ln in _json_events(out) if ln["function"].endswith("fragile")]
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(said) == 1, [str(w.message) for w in said]
    assert "structlog configuration raised ValueError" in str(said[0].message)
    # located at their processor's line that raised, not at otel_jax's thread
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if text.endswith("# said here"))
    assert (said[0].filename, said[0].lineno) == (__file__, line)
    assert raised == ["jax.compile"]
    assert [ln["count"] for ln in lines] == [2, 3]
    assert all(ln["run_id"] == "run-f" for ln in lines)
    [emitter] = [s for s in otel_jax.installation().sinks
                 if isinstance(s, _app_structlog.StructlogEmitter)]
    assert emitter.dropped == 1


def test_default_json_lines_keep_their_fields_whatever_the_app_configured(app_structlog):
    app_out = io.StringIO()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(app_out))
    config = structlog.get_config()
    handlers = list(logging.getLogger().handlers)
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log)

    @jax.jit
    def plain(x):
        return x / 2

    with structlog.contextvars.bound_contextvars(run_id="not-on-default-lines"), \
            t.tracer.start_as_current_span("train_step"):
        plain(jnp.ones(2))
        plain(jnp.ones(3))
    otel_jax.flush()
    raw = [ln for ln in t.log.getvalue().splitlines() if "plain" in ln]
    lines = [json.loads(ln) for ln in raw]
    assert len(lines) == 2
    for text, line in zip(raw, lines):
        keys = [k for k in line if k != DEVICE_LIMIT and k not in COST]
        assert keys[:len(DEFAULT_FIELDS)] == DEFAULT_FIELDS
        assert keys[-len(DEFAULT_TAIL):] == DEFAULT_TAIL
        # json.dumps' own separators and unescaped text, as before
        assert text == json.dumps(line, ensure_ascii=False)
        assert line["event"] == "jax.compile" and line["logger"] == "otel_jax"
        assert line["level"] == "info" and "run_id" not in line
        # ISO-8601 UTC with microseconds: 2026-12-01T19:50:10.123456Z
        assert len(line["timestamp"]) == 27 and line["timestamp"][19] == "."
    assert lines[1]["cause_kind"] == "shape" and lines[1]["count"] == 2
    # otel_jax configured nothing: the app's structlog and logging are as it left them.
    assert structlog.get_config() == config
    assert logging.getLogger().handlers == handlers
    otel_jax.flush()
    assert app_out.getvalue() == ""


def test_log_output_values_are_checked_and_the_instrumentor_takes_structlog(app_structlog):
    with pytest.raises(ValueError, match="structlog"):
        otel_jax.install(log_output="stdout")
    instrumentor = otel_jax.JaxInstrumentor()
    instrumentor.instrument(log_output="structlog")
    try:
        handle = otel_jax.installation()
        assert handle is not None
        assert [type(s) for s in handle.sinks if isinstance(s, _logs.LogEmitter)] == [
            _app_structlog.StructlogEmitter]
    finally:
        instrumentor.uninstrument()
    assert otel_jax.installation() is None
