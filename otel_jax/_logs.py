"""Record -> one JSON log line (structlog, private chain) and one OpenTelemetry log record.

otel_jax never calls ``structlog.configure`` nor touches the ``logging``
module's handlers: the application's own logging stays exactly as it set it
up. Applications that want their own structlog events correlated with traces
add ``add_otel_context`` to their processor chain.
"""

from __future__ import annotations

import json
import sys
from collections.abc import MutableMapping
from typing import IO, Any

import structlog
from opentelemetry import trace
from opentelemetry._logs import Logger as OtelLogger
from opentelemetry._logs import LogRecord, SeverityNumber

from ._record import CompileRecord, SpanLink, log_fields, span_attributes
from ._spans import link_context
from ._vocab import EVENT_COMPILE, EVENT_STORM, LOGGER_NAME, Attr, Field

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def add_otel_context(logger: Any, method_name: str,
                     event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: add the current span's ``trace_id`` and ``span_id`` (hex).

    Use it in an application's own chain, e.g.
    ``structlog.configure(processors=[otel_jax.add_otel_context, ..., JSONRenderer()])``,
    so that its log lines link to the same traces as otel_jax's compile spans.
    Leaves the event untouched when no span is recording.
    """
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict.setdefault("trace_id", trace.format_trace_id(span_context.trace_id))
        event_dict.setdefault("span_id", trace.format_span_id(span_context.span_id))
    return event_dict


class _CurrentStderr:
    """Resolves ``sys.stderr`` at write time (it may be replaced after install)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _json(event_dict: Any, **kwargs: Any) -> str:
    return json.dumps(event_dict, default=str, ensure_ascii=False)


class JsonLogEmitter:
    """One ``jax.compile`` JSON line per compile on a stream (stderr by default).

    Eager op-by-op compiles are logged at DEBUG, so that the default INFO
    output shows the user's own functions; spans and metrics carry them all.
    """

    def __init__(self, stream: IO[str] | None = None, level: str = "info") -> None:
        self._logger = structlog.wrap_logger(
            structlog.PrintLogger(stream if stream is not None else _CurrentStderr()),
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                _add_logger_name,
                structlog.processors.JSONRenderer(serializer=_json),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, 20)),
            context_class=dict,
            cache_logger_on_first_use=True,
        )

    def __call__(self, record: CompileRecord, link: SpanLink | None) -> None:
        log = self._logger.debug if record.eager_op else self._logger.info
        log(EVENT_COMPILE, **log_fields(record, link))

    def storm(self, event: dict[str, Any]) -> None:
        """The recompile-storm WARNING: function, recompile count, causes so far."""
        self._logger.warning(EVENT_STORM, **event)


def _add_logger_name(logger: Any, method_name: str,
                     event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Name the source and put the envelope first, so a line reads left to right."""
    head = {k: event_dict.pop(k) for k in (Field.TIMESTAMP, Field.LEVEL, Field.EVENT)
            if k in event_dict}
    return {**head, Field.LOGGER: LOGGER_NAME, **event_dict}


class OtelLogEmitter:
    """The same facts as an OpenTelemetry log record, linked to the compile span."""

    def __init__(self, logger: OtelLogger) -> None:
        self._logger = logger

    def __call__(self, record: CompileRecord, link: SpanLink | None) -> None:
        context = link_context(link)
        severity = SeverityNumber.DEBUG if record.eager_op else SeverityNumber.INFO
        self._logger.emit(LogRecord(
            timestamp=int(record.end * 1e9),
            context=context,
            severity_number=severity,
            severity_text=severity.name,
            body=f"{EVENT_COMPILE} {record.function.qualname}: {record.cause_kind.value}: "
                 f"{record.cause}",
            attributes={Attr.EVENT_NAME: EVENT_COMPILE, **span_attributes(record)},
        ))
