"""Record -> ``jax.compile <function>`` span with one child span per phase JAX reported."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Tracer

from .._core._vocab import (
    EVENT_HAZARD,
    EVENT_PROGRAM_FINDING,
    SPAN_COMPILE_PREFIX,
    SPAN_DIVERGENCE,
)
from .._pipeline._record import (
    CompileRecord,
    Divergence,
    SpanLink,
    Storm,
    divergence_attributes,
    hazard_attributes,
    program_finding_attributes,
    span_attributes,
)

_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return int(seconds * _NS)


#: ``install(eager_op_spans=...)``: ``"nested"`` (default) gives JAX's eager op compiles a
#: span only inside a span of the application's (a step, an epoch), where they add to what
#: it cost; outside any, where each would be a trace of its own and bury the application's
#: traces in Jaeger's trace list, they are counted and logged (at DEBUG) only. ``"always"``
#: gives each its span, a root span outside any other.
EAGER_OP_SPANS = ("nested", "always")


class SpanEmitter:
    """Emits the span of each compile; returns its ids for the other emitters (the
    pipeline's ``LinkEmitter``, called before them).

    Runs in the context of the compiling thread, captured at the compile (on the
    background thread by default, ``_pipeline._background``; inside the user's call
    with ``emit_in_background=False``), so the current context is the user's: the
    compile span becomes a child of their ``train_step`` span, with the compile's
    own start and end times, whenever it is emitted.
    """

    #: The user's code this emitter calls: its exceptions are named as theirs.
    reaches = "span processor"

    def __init__(self, tracer: Tracer, eager_op_spans: str = "nested") -> None:
        self._tracer = tracer
        self._eager_roots = eager_op_spans == "always"

    def compile(self, record: CompileRecord) -> SpanLink | None:
        if record.eager_op and not self._eager_roots \
                and not trace.get_current_span().get_span_context().is_valid:
            return None  # it would start a trace of its own: metrics and log line only
        span = self._tracer.start_span(
            SPAN_COMPILE_PREFIX + record.function.qualname,
            kind=SpanKind.INTERNAL,
            start_time=_ns(record.start),
            attributes=span_attributes(record),
        )
        # JAX's eager op-by-op compiles are many and small: their phase
        # durations stay as attributes, without three child spans each.
        if not record.eager_op:
            context = trace.set_span_in_context(span)
            for timing in record.phases:
                child = self._tracer.start_span(timing.phase.span_name, context=context,
                                                kind=SpanKind.INTERNAL,
                                                start_time=_ns(timing.start))
                child.end(end_time=_ns(timing.end))
        for hazard in record.hazards:  # recompiles this compile shows are coming
            span.add_event(EVENT_HAZARD, hazard_attributes(hazard), timestamp=_ns(record.end))
        for finding in record.program_findings:  # what makes its program large
            span.add_event(EVENT_PROGRAM_FINDING, program_finding_attributes(finding),
                           timestamp=_ns(record.end))
        span.end(end_time=_ns(record.end))
        span_context = span.get_span_context()
        if not span_context.is_valid:
            return None
        return SpanLink(trace.format_trace_id(span_context.trace_id),
                        trace.format_span_id(span_context.span_id),
                        span_context.trace_flags.sampled)

    def storm(self, storm: Storm) -> None:
        """A storm is a log line (and a metric query), not a span of its own."""

    def divergence(self, div: Divergence) -> None:
        """The ``jax.compile.divergence`` span of a divergence between ranks."""
        emit_divergence(self._tracer, div)


def emit_divergence(tracer: Tracer, div: Divergence) -> None:
    """A ``jax.compile.divergence`` span, child of this rank's compile span.

    Peers are compared after the compile span ended, so the divergence is a span of its
    own in the same trace, at the time it was detected, with an ERROR status."""
    from opentelemetry.trace import Status, StatusCode

    span = tracer.start_span(SPAN_DIVERGENCE, context=link_context(div.link),
                             kind=SpanKind.INTERNAL, start_time=_ns(div.detected),
                             attributes=divergence_attributes(div))
    span.set_status(Status(StatusCode.ERROR, div.text[:200]))
    span.end(end_time=_ns(div.detected))


def link_context(link: SpanLink | None) -> Context | None:
    """A context whose current span is the compile span ``link`` names.

    Metrics recorded and logs emitted in it carry the compile span's ids: an
    exemplar on the compile metrics and a log record both link to the trace. The
    emitters run in the compiling thread's context, whose current span is the
    application's (a step, an epoch) or none, so without this context an exemplar
    would name that span, not the compile's, or be missing.
    """
    if link is None:
        return None
    flags = trace.TraceFlags.SAMPLED if link.sampled else trace.TraceFlags.DEFAULT
    span_context = trace.SpanContext(
        int(link.trace_id, 16), int(link.span_id, 16), is_remote=False,
        trace_flags=trace.TraceFlags(flags))
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))
