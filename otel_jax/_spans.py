"""Record -> ``jax.compile <function>`` span with one child span per phase JAX reported."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Tracer

from ._record import PHASES, CompileRecord

_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


class SpanSink:
    """Emits the span of each compile and writes its ids back onto the record.

    Runs on the compiling thread, inside the user's call, so the current
    context there is the user's: the compile span becomes a child of their
    ``train_step`` span without any propagation work.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def __call__(self, record: CompileRecord) -> None:
        span = self._tracer.start_span(
            f"jax.compile {record.function.qualname}",
            kind=SpanKind.INTERNAL,
            start_time=_ns(record.start),
            attributes=record.span_attributes(),
        )
        context = trace.set_span_in_context(span)
        # JAX's eager op-by-op compiles are many and small: their phase
        # durations stay as attributes, without three child spans each.
        for key, name in () if record.eager_op else PHASES:
            phase = record.phases.get(key)
            if phase is not None:
                child = self._tracer.start_span(name, context=context, kind=SpanKind.INTERNAL,
                                                start_time=_ns(phase.start))
                child.end(end_time=_ns(phase.end))
        span.end(end_time=_ns(record.end))
        span_context = span.get_span_context()
        if span_context.is_valid:
            record.trace_id = trace.format_trace_id(span_context.trace_id)
            record.span_id = trace.format_span_id(span_context.span_id)


def compile_span_context(record: CompileRecord) -> Context | None:
    """A context whose current span is the record's compile span (after ``SpanSink`` ran).

    Metrics recorded and logs emitted in it carry the compile span's ids: an
    exemplar on the duration histogram and a log record both link to the trace.
    """
    if record.trace_id is None or record.span_id is None:
        return None
    span_context = trace.SpanContext(
        int(record.trace_id, 16), int(record.span_id, 16), is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))
