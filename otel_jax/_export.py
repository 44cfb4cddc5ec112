"""Exporters that fail open: a collector that is down costs dropped telemetry and one warning.

The OTLP exporters retry each failed batch with backoff until their timeout,
logging every attempt. Wrapped here (only the exporters otel_jax creates
itself), the first failure produces one warning naming the endpoint; then a
breaker shared by the three signals drops batches at once for a while
instead of retrying each, so that neither the background export threads nor
the process's exit wait on a collector that is not there.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

try:
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
except ImportError:  # opentelemetry-sdk < 1.39
    from opentelemetry.sdk._logs.export import LogExporter as LogRecordExporter
    from opentelemetry.sdk._logs.export import LogExportResult as LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ._engine import OtelJaxWarning

OPEN_SECONDS = 30.0
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)
_NOISE = ("Transient error", "Failed to export", "Shutdown in progress", "Exception while exporting")


class Breaker:
    """Shared by the exporters of one endpoint: open after a failure, retried after a while."""

    def __init__(self, endpoint: str, open_seconds: float = OPEN_SECONDS) -> None:
        self.endpoint = endpoint
        self.open_seconds = open_seconds
        self.failures = 0
        self._open_until = 0.0
        self._warned = False
        self._lock = threading.Lock()

    def allows(self) -> bool:
        return time.monotonic() >= self._open_until

    def failed(self, signal: str, detail: str) -> None:
        with self._lock:
            self.failures += 1
            self._open_until = time.monotonic() + self.open_seconds
            first, self._warned = not self._warned, True
        if first:
            message = (f"otel_jax: cannot export {signal} to {self.endpoint} ({detail}); "
                       "telemetry is dropped while the collector is unreachable (retried every "
                       f"{self.open_seconds:.0f} s). The training loop is not affected.")
            try:
                warnings.warn(message, OtelJaxWarning, stacklevel=2)
            except Exception:
                logging.getLogger("otel_jax").warning(message)

    def succeeded(self) -> None:
        self._open_until = 0.0


class _QuietExportNoise(logging.Filter):
    """Drops the per-attempt retry messages the breaker's one warning replaces."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_NOISE)


_filter_installed = False


def quiet_exporter_logs() -> None:
    global _filter_installed
    if not _filter_installed:
        _filter_installed = True
        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(_QuietExportNoise())


def _guarded_export(breaker: Breaker, signal: str, export: Any, batch: Any, ok: Any,
                    failure: Any, **kwargs: Any) -> Any:
    if not breaker.allows():
        return failure
    try:
        result = export(batch, **kwargs)
    except Exception as exc:
        breaker.failed(signal, f"{type(exc).__name__}: {exc}")
        return failure
    if result == ok:
        breaker.succeeded()
    else:
        breaker.failed(signal, "export failed")
    return result


class _Delegating:
    """Shutdown and flush go to the wrapped exporter; only ``export`` is guarded."""

    _inner: Any
    _breaker: Breaker

    def __init__(self, inner: Any, breaker: Breaker) -> None:
        self._inner, self._breaker = inner, breaker

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self._inner, "force_flush", None)
        return True if flush is None else bool(flush(timeout_millis))


class FailOpenSpanExporter(_Delegating, SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return _guarded_export(self._breaker, "spans", self._inner.export, spans,
                               SpanExportResult.SUCCESS, SpanExportResult.FAILURE)


class FailOpenLogExporter(_Delegating, LogRecordExporter):
    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        return _guarded_export(self._breaker, "logs", self._inner.export, batch,
                               LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE)


class FailOpenMetricExporter(MetricExporter):
    def __init__(self, inner: MetricExporter, breaker: Breaker) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self._inner, self._breaker = inner, breaker

    def export(self, metrics_data: Any, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        return _guarded_export(self._breaker, "metrics", self._inner.export, metrics_data,
                               MetricExportResult.SUCCESS, MetricExportResult.FAILURE,
                               timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)
