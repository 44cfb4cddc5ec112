"""The compile telemetry as OpenTelemetry log records, each in its compile span's trace.

A sink of its own beside the JSON and structlog lines (:mod:`._logs`): it hands each
record to the application's (or otel_jax's) logger provider, whose processors batch and
export them, so it needs no queue or thread of otel_jax's.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from opentelemetry._logs import Logger as OtelLogger
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context

from .._core._vocab import EVENT_COMPILE, EVENT_DIVERGENCE, EVENT_HAZARD, Attr
from .._pipeline._record import (
    AttributeValue,
    CompileRecord,
    Divergence,
    SpanLink,
    Storm,
    divergence_attributes,
    hazard_attributes,
    span_attributes,
)
from ._spans import link_context

__all__ = ["OtelLogEmitter"]


def _has_event_name_field() -> bool:
    """Whether this OpenTelemetry API's log record has its own event name (the data model's
    ``EventName``, in ``LogRecord(event_name=...)`` since API 1.35). Where it does, the
    ``event.name`` attribute that the field replaced is not sent as well."""
    try:
        return "event_name" in inspect.signature(LogRecord.__init__).parameters
    except (TypeError, ValueError):  # a signature Python cannot read: the attribute
        return False


#: Read once: the installed API does not change while the program runs.
EVENT_NAME_FIELD = _has_event_name_field()


class OtelLogEmitter:
    """The same facts as an OpenTelemetry log record, linked to the compile span."""

    #: The user's code this emitter calls: its exceptions are named as theirs.
    reaches = "log record processor"

    def __init__(self, logger: OtelLogger, *, event_name_field: bool = EVENT_NAME_FIELD,
                 eager_ops: bool = False) -> None:
        self._logger = logger
        #: JAX's eager op-by-op compiles (DEBUG) are sent only when asked for
        #: (``log_level="debug"``), as the JSON and console lines: else they would crowd
        #: the program's own compiles out of a log store's default view.
        self._eager_ops = eager_ops
        #: The event's name in the record's own field, else (an API that lacks it) in
        #: the ``event.name`` attribute. A parameter so that a test can take either path.
        self._event_name_field = event_name_field

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        if record.eager_op and not self._eager_ops:
            return
        context = link_context(link)
        name = record.function.qualname
        self._record(record.end, context,
                     SeverityNumber.DEBUG if record.eager_op else SeverityNumber.INFO,
                     EVENT_COMPILE, f"{name}: {record.cause_kind.value}: {record.cause}",
                     span_attributes(record))
        for hazard in record.hazards:
            self._record(record.end, context,
                         SeverityNumber.WARN if hazard.warn else SeverityNumber.INFO,
                         EVENT_HAZARD, f"{name}: {hazard.kind.value}: {hazard.text}",
                         {Attr.FUNCTION: name, **hazard_attributes(hazard)})

    def storm(self, storm: Storm) -> None:
        """The storm WARNING is the log lines' (JSON or structlog), as it always was."""

    def divergence(self, div: Divergence) -> None:
        """A divergence between ranks as a WARNING log record, in the compile span's trace."""
        self._record(div.detected, link_context(div.link), SeverityNumber.WARN,
                     EVENT_DIVERGENCE, f"{div.function}: {div.kind.value}: {div.text}",
                     divergence_attributes(div))

    def _record(self, at: float, context: Context | None, severity: SeverityNumber,
                event: str, text: str, attributes: Mapping[str, AttributeValue]) -> None:
        """One log record of ``event``: its body ``"<event> <text>"``, its event name in the
        record's field (or attribute), its attributes named by the event."""
        if not self._event_name_field:
            attributes = {Attr.EVENT_NAME: event, **attributes}
        record = LogRecord(
            timestamp=int(at * 1e9),
            context=context,
            severity_number=severity,
            severity_text=severity.name,
            body=f"{event} {text}",
            attributes=dict(attributes),
        )
        if self._event_name_field:
            record.event_name = event
        self._logger.emit(record)
