"""Exemplars: each point of the compile metrics, and of the step time, names the span it measured.

An application's own MeterProvider (an in-memory reader) and TracerProvider, with the SDK's
default exemplar filter (trace-based: an exemplar is kept only for a measurement recorded in
a sampled span's context). otel_jax records on its emitting thread, in the compiling thread's
context, whose current span is the application's: the exemplar must still name the compile
span (a child of the application's span), so that Prometheus's exemplar opens that trace.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import otel_jax

COMPILE_METRICS = ("jax.compilations", "jax.compile.duration", "jax.compilations.after_warmup")


class App:
    """The application's providers, set up as a user sets them up."""

    def __init__(self, tracer_provider=None, mode: str = "") -> None:
        self.mode = mode
        self.spans = InMemorySpanExporter()
        self.tracer_provider = tracer_provider or TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("app")

    def points(self) -> dict[str, list]:
        """Every data point by metric name, from one collection (exemplars reset per one)."""
        otel_jax.flush()
        out: dict[str, list] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out

    def finished(self, name: str) -> list:
        otel_jax.flush()
        return [s for s in self.spans.get_finished_spans() if s.name == name]


@pytest.fixture(params=["true", "false"], ids=["background", "compiling-thread"])
def app(request, monkeypatch):
    """otel_jax on the application's providers; emitting off and on the compiling thread."""
    monkeypatch.setenv("OTEL_JAX_EMIT_IN_BACKGROUND", request.param)
    otel_jax.uninstall()
    made = App(mode=request.param)
    otel_jax.install(tracer_provider=made.tracer_provider, meter_provider=made.meter_provider,
                     log_output=None)
    try:
        yield made
    finally:
        otel_jax.uninstall()


def _of(points: list, function: str) -> list:
    return [p for p in points if p.attributes.get("code.function.name") == function]


def _ids(span) -> tuple[int, int]:
    return span.context.trace_id, span.context.span_id


def test_compile_metrics_carry_the_compile_span_inside_the_applications_span(app):
    def update(x):
        return x * 2

    update.__qualname__ = name = f"update_{app.mode}"  # a first compile in each run
    update = jax.jit(update)
    with app.tracer.start_as_current_span("train_step"):
        update(jnp.ones(2))
    otel_jax.mark_warmup_done()
    with app.tracer.start_as_current_span("train_step"):
        update(jnp.ones(3))  # a recompile, after warm-up

    steps = app.finished("train_step")
    compiles = app.finished("jax.compile " + name)
    assert len(steps) == 2 and len(compiles) == 2
    # The compile spans are children of the application's spans.
    assert [c.parent.span_id for c in compiles] == [s.context.span_id for s in steps]
    first, recompile = (_ids(c) for c in compiles)

    points = app.points()
    by_kind = {p.attributes["jax.compile.cause.kind"]: p
               for p in _of(points["jax.compilations"], name)}
    assert {k: [(e.trace_id, e.span_id) for e in p.exemplars] for k, p in by_kind.items()} \
        == {"first_compile": [first], "shape": [recompile]}
    by_recompile = {p.attributes["jax.compile.is_recompile"]: p
                    for p in _of(points["jax.compile.duration"], name)}
    assert {k: [(e.trace_id, e.span_id) for e in p.exemplars]
            for k, p in by_recompile.items()} == {False: [first], True: [recompile]}
    for point in by_recompile.values():
        assert [e.value for e in point.exemplars] == [pytest.approx(point.sum)]
    [after] = _of(points["jax.compilations.after_warmup"], name)
    assert [(e.trace_id, e.span_id) for e in after.exemplars] == [recompile]
    # No exemplar names the application's span instead of the compile's.
    step_ids = {s.context.span_id for s in steps}
    assert not {e.span_id for m in COMPILE_METRICS for p in points[m]
                for e in p.exemplars} & step_ids


def test_a_compile_outside_any_span_is_its_own_trace_and_its_exemplar(app):
    @jax.jit
    def alone(x):
        return x + 1

    alone(jnp.ones(2))
    name = "test_a_compile_outside_any_span_is_its_own_trace_and_its_exemplar.<locals>.alone"
    [span] = app.finished("jax.compile " + name)
    assert span.parent is None
    points = app.points()
    for metric in ("jax.compilations", "jax.compile.duration"):
        [point] = _of(points[metric], name)
        assert [(e.trace_id, e.span_id) for e in point.exemplars] == [_ids(span)], metric


def test_step_time_carries_the_step_span(app):
    @jax.jit
    def stepped(x):
        return x - 1

    with app.tracer.start_as_current_span("epoch"):
        for n in (2, 2):
            with otel_jax.step("train_step"):
                stepped(jnp.ones(n))
    steps = app.finished("train_step")
    [epoch] = app.finished("epoch")
    assert [s.parent.span_id for s in steps] == [epoch.context.span_id] * 2
    points = {p.attributes["jax.step.compiled"]: p for p in app.points()["jax.step.duration"]
              if p.attributes["jax.step.name"] == "train_step"}
    # The step that compiled, and the one that did not: each its own step span, not the epoch.
    assert [(e.trace_id, e.span_id) for e in points[True].exemplars] == [_ids(steps[0])]
    assert [(e.trace_id, e.span_id) for e in points[False].exemplars] == [_ids(steps[1])]


def test_unsampled_compiles_leave_no_exemplar():
    """An exemplar names a trace that was kept: a span the sampler dropped is stored nowhere."""
    otel_jax.uninstall()
    app = App(TracerProvider(sampler=ALWAYS_OFF))
    otel_jax.install(tracer_provider=app.tracer_provider, meter_provider=app.meter_provider,
                     log_output=None)
    try:
        @jax.jit
        def dropped(x):
            return x * 3

        with otel_jax.step("train_step"):
            dropped(jnp.ones(2))
        dropped(jnp.ones(3))
        points = app.points()
    finally:
        otel_jax.uninstall()
    name = "test_unsampled_compiles_leave_no_exemplar.<locals>.dropped"
    counted = _of(points["jax.compilations"], name) + _of(points["jax.compile.duration"], name)
    assert len(counted) == 4  # still counted and timed
    assert [e for p in counted + points["jax.step.duration"] for e in p.exemplars] == []


def test_without_a_tracer_provider_the_metrics_are_as_before():
    """No tracing (the API's no-op provider): every compile counted and timed, no exemplar."""
    otel_jax.uninstall()
    reader = InMemoryMetricReader()
    otel_jax.install(tracer_provider=trace.NoOpTracerProvider(),
                     meter_provider=MeterProvider(metric_readers=[reader]), log_output=None)
    try:
        @jax.jit
        def untraced(x):
            return x / 2

        with otel_jax.step("train_step"):
            untraced(jnp.ones(2))
        untraced(jnp.ones(3))
        otel_jax.flush()
        data = reader.get_metrics_data()
    finally:
        otel_jax.uninstall()
    name = "test_without_a_tracer_provider_the_metrics_are_as_before.<locals>.untraced"
    points = {m.name: list(m.data.data_points) for rm in data.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics}
    counts = {p.attributes["jax.compile.cause.kind"]: p.value
              for p in _of(points["jax.compilations"], name)}
    assert counts == {"first_compile": 1, "shape": 1}
    assert sum(p.count for p in points["jax.step.duration"]) == 1
    assert [e for ps in points.values() for p in ps for e in getattr(p, "exemplars", ())] == []
