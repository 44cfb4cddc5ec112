"""What the SDK's OTLP exporters meet and say while one of otel_jax's exports runs.

A ``requests`` session (OTLP/HTTP) and a channel interceptor (OTLP/gRPC) record the
:class:`~otel_jax._emit._health.Answer` each request met on the export call running on
their thread; a logging filter replaces the exporters' per-attempt retry lines with the
breakers' one warning. Its own module: it reaches into the SDK's exporters (``requests``
and ``grpc`` are imported only when an exporter is built), the health model does not.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

from .._core._failopen import Topic, emit, once
from . import _answer_body
from ._bounded import _inside_our_export
from ._health import Answer, _bounded_text, _state_lock, answer_from_error

_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)
_NOISE = ("Transient error", "Failed to export", "Shutdown in progress",
          "Exception while exporting")


def _observe(answer: Answer) -> None:
    """Record ``answer`` on the export call running on this thread, if it is one of ours."""
    call = getattr(_inside_our_export, "call", None)
    if call is not None:
        call.answer = answer


@functools.cache
def _observing_session_class() -> type:
    import requests

    class ObservingSession(requests.Session):
        """A ``requests.Session`` (the OTLP/HTTP exporter's transport) that records the
        status, or the exception, each request of one of otel_jax's exports met."""

        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
            # The body is streamed and read to a cap (_answer_body), unless the caller
            # streams it itself: a collector's 100 MB answer costs no memory.
            bounded = len(args) < 11 and not kwargs.get("stream")
            if bounded:
                kwargs["stream"] = True
            try:
                response = super().request(method, url, *args, **kwargs)
            except Exception as exc:
                _observe(answer_from_error(exc))
                raise
            try:
                retry_after = response.headers.get("Retry-After")
                answer = Answer(http_status=int(response.status_code),
                                reason=_bounded_text(str(response.reason or ""), 60),
                                retry_after=None if retry_after is None
                                else _bounded_text(str(retry_after), 40))
            except Exception:  # a response we cannot read: nothing recorded
                answer = None
            if bounded:
                if answer is not None:  # it answered, whatever its body does next
                    _observe(dataclasses.replace(answer, body=_answer_body.READING))
                note = _answer_body.read_bounded(response)
                if answer is not None and note is not None:
                    answer = dataclasses.replace(answer, body=note)
                    if 200 <= int(response.status_code) < 300 \
                            and note == _answer_body.over_note():
                        _answer_body.say_accepted_oversized(
                            str(url), answer.describe(short=True))
            if answer is not None:
                _observe(answer)
            return response

    return ObservingSession


def observing_session() -> Any:
    """A session for ``OTLP*Exporter(session=...)`` that records what each request met."""
    return _observing_session_class()()


def observe_grpc(exporter: Any) -> bool:
    """Record the gRPC code each export of ``exporter`` (an SDK OTLP gRPC exporter) met,
    by an interceptor on its channel, also when it reconnects. False where the
    exporter is not laid out as known (then failures are classified without codes)."""
    try:
        import grpc

        class Observe(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
            def intercept_unary_unary(self, continuation: Any, details: Any,
                                      request: Any) -> Any:
                outcome = continuation(details, request)
                try:
                    code = outcome.code()
                    if code is not None and code != grpc.StatusCode.OK:
                        _observe(Answer(grpc_code=str(code.name)))
                except Exception:
                    pass
                return outcome

        interceptor = Observe()
        stub_type, channel = exporter._stub, exporter._channel
        if channel is None or exporter._client is None:
            return False

        def intercept() -> None:
            exporter._client = stub_type(grpc.intercept_channel(exporter._channel, interceptor))

        initialize = getattr(exporter, "_initialize_channel_and_stub", None)
        if initialize is not None:  # it makes a new channel and client on UNAVAILABLE
            def reinitialize() -> None:
                initialize()
                intercept()

            exporter._initialize_channel_and_stub = reinitialize
        intercept()
        return True
    except Exception:
        return False

# --- log noise --------------------------------------------------------------------------------

class _QuietExportNoise(logging.Filter):
    """Drops the per-attempt retry messages of the OTLP exporters.

    Messages logged while one of otel_jax's own exporters runs are replaced by
    its breaker's one warning. Messages of other exporters (the application's,
    or those ``opentelemetry-instrument`` configured) are not dropped silently:
    the first becomes one ``OtelJaxWarning`` quoting it, the rest are dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_NOISE):
            return True
        if getattr(_inside_our_export, "active", False):
            return False
        if once(Topic.FOREIGN_EXPORTER):
            try:
                text = record.getMessage()
            except Exception:
                text = str(record.msg)
            if len(text) > 300:
                text = text[:300] + "..."
            emit(f"otel_jax: an OpenTelemetry exporter reports: {text}. Its further retry and "
                 "export-failure messages are not printed (one warning instead of one line "
                 "per attempt); its telemetry is dropped while its exports fail.")
        return False


_filter_installed = False


def quiet_exporter_logs() -> None:
    global _filter_installed
    with _state_lock:
        if _filter_installed:
            return
        _filter_installed = True
    for name in _EXPORTER_LOGGERS:
        logging.getLogger(name).addFilter(_QuietExportNoise())
