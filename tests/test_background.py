"""Emitting off the compiling thread: what is there when the jit call returns, and after
``otel_jax.flush()``."""

from __future__ import annotations

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_jax
from otel_jax._core import _failopen
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._core._vocab import Metric
from otel_jax._pipeline import _background
from otel_jax._pipeline._background import WORKER


class BlockingExporter(SpanExporter):
    """Holds the emitting thread in ``export`` until released (at most 30 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.exported: list = []

    def export(self, spans):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.release.wait(30)
        self.exported.extend(spans)
        return SpanExportResult.SUCCESS

    def compiles(self) -> list:
        return [s for s in self.exported if s.name.startswith("jax.compile ")]


def short(span) -> str:  # type: ignore[no-untyped-def]
    """A compile span's function, without the test function it is local to."""
    return span.name.rsplit(".", 1)[-1]


def _provider(exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def blocked():
    """install() whose spans go to an exporter that blocks until released."""
    otel_jax.uninstall()
    exporter = BlockingExporter()
    reader = InMemoryMetricReader()
    otel_jax.install(tracer_provider=_provider(exporter),
                     meter_provider=MeterProvider(metric_readers=[reader]), log_output=None)
    try:
        yield exporter, reader
    finally:
        exporter.release.set()
        otel_jax.flush()
        otel_jax.uninstall()


def test_spans_arrive_after_flush_and_the_call_does_not_wait_for_the_exporter(blocked):
    exporter, _ = blocked

    @jax.jit
    def held(x):
        return x * 2

    held(jnp.ones(3))  # returns although its span's export blocks
    assert exporter.entered.wait(30)
    assert exporter.compiles() == []
    assert [e.count for e in otel_jax.compile_history(held)] == [1]  # synchronous
    exporter.release.set()
    assert otel_jax.flush() is True
    assert [short(s) for s in exporter.compiles()] == ["held"]


def test_flush_is_bounded_when_the_exporter_blocks(blocked):
    exporter, _ = blocked

    @jax.jit
    def stuck(x):
        return x + 1

    stuck(jnp.ones(3))
    assert exporter.entered.wait(30)
    assert otel_jax.flush(0.05) is False  # gave up: the exporter still holds the thread
    exporter.release.set()
    assert otel_jax.flush(None) is True
    assert len(exporter.compiles()) == 1


def test_a_full_queue_drops_and_counts_never_blocks(blocked, monkeypatch):
    exporter, reader = blocked
    _failopen.reset_warnings()
    monkeypatch.setattr(WORKER, "capacity", 1)

    @jax.jit
    def flood(x):
        return x - 1

    # NumPy inputs: a new shape of jnp.ones would be an eager compile of its own.
    flood(np.ones(1, np.float32))
    assert exporter.entered.wait(30)  # the first compile's job holds the thread
    before = WORKER.dropped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flood(np.ones(2, np.float32))
        flood(np.ones(3, np.float32))
    assert WORKER.dropped == before + 2
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "dropped" in ours[0] and "jax.compile.dropped" in ours[0]
    # The record, the history and the testing kit never lose a compile.
    assert [e.count for e in otel_jax.compile_history(flood)] == [1, 2, 3]
    exporter.release.set()
    assert otel_jax.flush()
    assert len(exporter.compiles()) == 1
    data = reader.get_metrics_data()
    points = [p for rm in data.resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == Metric.DROPPED for p in m.data.data_points]
    assert [p.value for p in points] == [WORKER.dropped]


def test_spans_nest_under_the_users_span_with_the_compiles_own_times():
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    provider = _provider(memory)
    otel_jax.install(tracer_provider=provider, log_output=None)
    tracer = provider.get_tracer("tests")

    @jax.jit
    def nested(x):
        return jnp.sin(x)

    try:
        with tracer.start_as_current_span("train_step") as step:
            nested(jnp.ones(3))
        assert otel_jax.flush()
        [entry] = otel_jax.compile_history(nested)
        [span] = [s for s in memory.get_finished_spans()
                  if s.name.startswith("jax.compile ") and short(s) == "nested"]
        [user] = [s for s in memory.get_finished_spans() if s.name == "train_step"]
    finally:
        otel_jax.uninstall()
    assert span.parent.span_id == step.get_span_context().span_id
    assert span.context.trace_id == step.get_span_context().trace_id
    assert span.start_time == int(entry.timestamp * 1e9)
    assert abs((span.end_time - span.start_time) - entry.compile_s * 1e9) < 1e3
    # The compile's own times, inside the step's, not the time it was emitted at.
    assert user.start_time <= span.start_time <= span.end_time <= user.end_time
    phases = [s for s in memory.get_finished_spans() if s.parent is not None
              and s.parent.span_id == span.context.span_id]
    assert phases and all(span.start_time <= p.start_time <= p.end_time <= span.end_time
                          for p in phases)


def test_uninstall_flushes():
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    otel_jax.install(tracer_provider=_provider(memory), log_output=None)

    @jax.jit
    def last(x):
        return x * 3

    last(jnp.ones(3))
    otel_jax.uninstall()
    assert [short(s) for s in memory.get_finished_spans()
            if s.name.startswith("jax.compile ")] == ["last"]


def test_testing_kit_and_raise_policy_see_each_compile_before_the_call_returns(blocked):
    exporter, _ = blocked

    @jax.jit
    def guarded(x):
        return x / 2

    with otel_jax.testing.record_compiles(guarded) as compiles:
        guarded(jnp.ones(3))
        assert exporter.entered.wait(30)  # the span is still waiting to be exported
        assert [r.cause_kind.value for r in compiles] == ["first_compile"]
    with pytest.raises(AssertionError, match="expected at most 0 compilations"), \
            otel_jax.testing.assert_max_compiles(0, fn=guarded):
        guarded(jnp.ones(4))
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=_provider(exporter), log_output=None,
                     on_recompile="raise")
    otel_jax.mark_warmup_done()
    with pytest.raises(otel_jax.RecompileError, match="f32\\[4\\] -> f32\\[5\\]"):
        guarded(jnp.ones(5))
    assert exporter.compiles() == []  # all of it while the exporter was still held
    # The refused compile is forgotten (JAX compiles it again on a retry), as before.
    assert [e.count for e in otel_jax.compile_history(guarded)] == [1, 2]


def test_emitting_on_the_compiling_thread_when_asked(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_EMIT_IN_BACKGROUND", "false")
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    handle = otel_jax.install(tracer_provider=_provider(memory), log_output=None)
    assert handle._options.emit_in_background is False

    @jax.jit
    def inline(x):
        return x + 2

    pending = WORKER.pending
    try:
        inline(jnp.ones(3))
        names = [short(s) for s in memory.get_finished_spans()]  # no flush: already there
    finally:
        otel_jax.uninstall()
    assert "inline" in names
    assert WORKER.pending == pending


def test_flush_from_an_emitting_job_does_not_wait_for_itself():
    worker = _background.Worker()
    answers: list[bool] = []
    done = threading.Event()

    def job() -> None:
        answers.append(worker.flush(30))
        done.set()

    assert worker.submit(job)
    assert done.wait(30) and worker.flush(30)
    assert answers == [False]  # itself is still running: not everything was emitted
