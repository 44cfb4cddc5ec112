"""Exporters that fail open: a collector that is down costs dropped telemetry and one warning.

The OTLP exporters retry each failed batch with backoff until their timeout,
logging every attempt. Wrapped here (only the exporters otel_jax creates
itself):

* the first failure produces one warning naming the endpoint; then a breaker
  shared by the three signals drops batches at once for a while instead of
  retrying each;
* every export runs on a helper thread and is waited for at most the
  exporter's timeout (plus a little), and at most until the deadline of a
  bounded window: ``uninstall()`` flushes within :data:`UNINSTALL_SECONDS`,
  the process's exit within :data:`EXIT_SECONDS`. A collector that accepts
  connections and never answers cannot hold the training loop, uninstall or
  exit; what a window dropped is said in one warning;
* a record whose text cannot be encoded (a lone surrogate) is a bad record,
  not a collector outage: it is dropped with one warning and the rest of its
  batch is exported; the breaker stays closed.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

try:
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
except ImportError:  # opentelemetry-sdk < 1.39
    from opentelemetry.sdk._logs.export import LogExporter as LogRecordExporter
    from opentelemetry.sdk._logs.export import (  # type: ignore[assignment]
        LogExportResult as LogRecordExportResult,
    )
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

OPEN_SECONDS = 30.0
#: The longest ``uninstall()`` waits for telemetry still to be exported.
UNINSTALL_SECONDS = 2.0
#: The longest the process's exit waits for otel_jax's providers to shut down.
EXIT_SECONDS = 3.0
#: Beyond its own timeout, how long an exporter call is waited for.
_GRACE_SECONDS = 2.0

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

_state_lock = threading.Lock()
_inside_our_export = threading.local()


def _warn(message: str) -> None:
    from ._providers import emit_warning

    emit_warning(message)


# --- bounded windows (uninstall, exit) ------------------------------------------------------

class _Window:
    """While open, no export waits past ``deadline``; what is dropped meanwhile is counted."""

    def __init__(self, seconds: float, what: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.what = what
        self.dropped: dict[tuple[str, str], int] = {}  # (endpoint, signal) -> records
        self.cut: set[str] = set()  # endpoints with an export cut off by the deadline
        self.details: dict[str, str] = {}

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


_window: _Window | None = None


def open_window(seconds: float, what: str) -> _Window:
    global _window
    with _state_lock:
        _window = _Window(seconds, what)
        return _window


def close_window(window: _Window) -> None:
    """End ``window`` and say, in one warning per endpoint, what it dropped and why,
    unless that endpoint's breaker already warned that its telemetry is dropped."""
    global _window
    with _state_lock:
        if _window is window:
            _window = None
    by_endpoint: dict[str, list[str]] = {}
    for (endpoint, signal), n in sorted(window.dropped.items()):
        if n:
            by_endpoint.setdefault(endpoint, []).append(f"{n} {_UNITS.get(signal, signal)}")
    for endpoint, parts in by_endpoint.items():
        breaker = _breakers.get(endpoint)
        if breaker is not None and breaker.warned_before(window):
            continue
        if breaker is not None:
            breaker.mark_warned()
        why = window.details.get(endpoint, "export failed")
        if endpoint in window.cut:
            why = f"no answer within {window.seconds:g} s"
        _warn(f"otel_jax: {window.what} dropped {', '.join(parts)} that could not be exported "
              f"to {endpoint} ({why}); {window.what} waits at most {window.seconds:g} s for "
              "telemetry.")


_UNITS = {"spans": "spans", "logs": "log records", "metrics": "metric points"}


# --- breaker ----------------------------------------------------------------------------------

_breakers: dict[str, Breaker] = {}


def breaker_for(endpoint: str) -> Breaker:
    with _state_lock:
        return _breakers.setdefault(endpoint, Breaker(endpoint))


class Breaker:
    """Shared by the exporters of one endpoint: open after a failure, retried after a while."""

    def __init__(self, endpoint: str, open_seconds: float = OPEN_SECONDS) -> None:
        self.endpoint = endpoint
        self.open_seconds = open_seconds
        self.failures = 0
        self._open_until = 0.0
        self._warned = False
        self._warned_at = 0.0
        self._lock = threading.Lock()

    def allows(self) -> bool:
        return time.monotonic() >= self._open_until

    def failed(self, signal: str, detail: str) -> None:
        with self._lock:
            self.failures += 1
            self._open_until = time.monotonic() + self.open_seconds
            window = _window
            if window is not None:
                # Said once, with what was dropped, when the window closes.
                window.details.setdefault(self.endpoint, detail)
                return
            first, self._warned = not self._warned, True
            if first:
                self._warned_at = time.monotonic()
        if first:
            _warn(f"otel_jax: cannot export {signal} to {self.endpoint} ({detail}); "
                  "telemetry is dropped while the collector is unreachable (retried every "
                  f"{self.open_seconds:.0f} s). The training loop is not affected.")

    def succeeded(self) -> None:
        self._open_until = 0.0

    def warned_before(self, window: _Window) -> bool:
        return self._warned

    def mark_warned(self) -> None:
        self._warned = True


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
        global _foreign_announced
        with _state_lock:
            first, _foreign_announced = not _foreign_announced, True
        if first:
            try:
                text = record.getMessage()
            except Exception:
                text = str(record.msg)
            if len(text) > 300:
                text = text[:300] + "..."
            _warn(f"otel_jax: an OpenTelemetry exporter reports: {text}. Its further retry and "
                  "export-failure messages are not printed (one warning instead of one line "
                  "per attempt); its telemetry is dropped while the collector is unreachable.")
        return False


_filter_installed = False
_foreign_announced = False


def quiet_exporter_logs() -> None:
    global _filter_installed
    with _state_lock:
        if _filter_installed:
            return
        _filter_installed = True
    for name in _EXPORTER_LOGGERS:
        logging.getLogger(name).addFilter(_QuietExportNoise())


# --- bad records ------------------------------------------------------------------------------

_RECORD_FIELDS = ("name", "attributes", "events", "links", "status", "description", "body",
                  "event_name", "severity_text", "log_record", "resource",
                  "instrumentation_scope", "version", "schema_url")


def _bad_text(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _has_bad_text(value: Any, depth: int = 0, seen: dict[int, bool] | None = None) -> bool:
    """Whether ``value`` (a record, mapping, sequence or string) holds text no exporter
    can encode. Resources and scopes shared by a batch are checked once (``seen``)."""
    if isinstance(value, str):
        return _bad_text(value)
    if value is None or isinstance(value, (bool, int, float, bytes)) or depth > 6:
        return False
    if isinstance(value, Mapping):
        return any((isinstance(k, str) and _bad_text(k)) or _has_bad_text(v, depth + 1, seen)
                   for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_bad_text(v, depth + 1, seen) for v in value)
    if seen is not None:
        key = id(value)
        if key in seen:
            return seen[key]
    bad = False
    for name in _RECORD_FIELDS:
        try:
            field = getattr(value, name, None)
        except Exception:
            continue
        if field is not None and not callable(field) and _has_bad_text(field, depth + 1, seen):
            bad = True
            break
    if seen is not None:
        seen[id(value)] = bad
    return bad


def _split_bad(batch: Sequence[Any]) -> tuple[list[Any], int]:
    seen: dict[int, bool] = {}
    good = [item for item in batch if not _has_bad_text(item, 0, seen)]
    return good, len(batch) - len(good)


def _clean_metrics(data: Any) -> tuple[Any, int]:
    """``data`` without the data points (or metrics) whose text cannot be encoded."""
    seen: dict[int, bool] = {}
    if not _has_bad_text_metrics(data, seen):
        return data, 0
    dropped = 0
    resource_metrics = []
    for rm in data.resource_metrics:
        if _has_bad_text(rm.resource, 0, seen):
            dropped += sum(_points(m) for sm in rm.scope_metrics for m in sm.metrics)
            continue
        scope_metrics = []
        for sm in rm.scope_metrics:
            if _has_bad_text(sm.scope, 0, seen):
                dropped += sum(_points(m) for m in sm.metrics)
                continue
            metrics = []
            for m in sm.metrics:
                if any(_has_bad_text(getattr(m, f, None)) for f in ("name", "description", "unit")):
                    dropped += _points(m)
                    continue
                points = m.data.data_points
                good = [p for p in points if not _has_bad_text(p.attributes)]
                if len(good) != len(points):
                    dropped += len(points) - len(good)
                    m = dataclasses.replace(m, data=dataclasses.replace(m.data, data_points=good))
                metrics.append(m)
            scope_metrics.append(dataclasses.replace(sm, metrics=metrics))
        resource_metrics.append(dataclasses.replace(rm, scope_metrics=scope_metrics))
    return dataclasses.replace(data, resource_metrics=resource_metrics), dropped


def _has_bad_text_metrics(data: Any, seen: dict[int, bool]) -> bool:
    for rm in data.resource_metrics:
        if _has_bad_text(rm.resource, 0, seen):
            return True
        for sm in rm.scope_metrics:
            if _has_bad_text(sm.scope, 0, seen):
                return True
            for m in sm.metrics:
                if any(_has_bad_text(getattr(m, f, None)) for f in ("name", "description", "unit")):
                    return True
                if any(_has_bad_text(p.attributes) for p in m.data.data_points):
                    return True
    return False


def _points(metric: Any) -> int:
    try:
        return len(metric.data.data_points)
    except Exception:
        return 1


def metric_points(data: Any) -> int:
    try:
        return sum(_points(m) for rm in data.resource_metrics for sm in rm.scope_metrics
                   for m in sm.metrics)
    except Exception:
        return 1


_bad_records_warned = False


def _bad_records(signal: str, n: int, detail: str = "") -> None:
    global _bad_records_warned
    with _state_lock:
        first, _bad_records_warned = not _bad_records_warned, True
    if first:
        _warn(f"otel_jax: dropped {n} {_UNITS.get(signal, signal)} whose text cannot be encoded "
              f"(e.g. a lone surrogate in a string{detail}); the rest of the telemetry is "
              "exported. Later bad records are dropped without a warning.")


# --- the bounded call -------------------------------------------------------------------------

class _Call:
    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        _inside_our_export.active = True
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # reported to the waiting thread
            self.error = exc
        finally:
            _inside_our_export.active = False
            self.done.set()


def run_bounded(fn: Callable[..., Any], timeout: float, *args: Any,
                name: str = "otel_jax-bounded", **kwargs: Any) -> _Call | None:
    """Run ``fn`` on a daemon thread and wait at most ``timeout`` seconds.

    Returns the finished call, or ``None`` when it is still running (it is left
    to finish, or to die with the process, on its own).
    """
    call = _Call(fn, args, kwargs)
    _start(call, name)
    return call if call.done.wait(max(0.0, timeout)) else None


def _start(call: _Call, name: str) -> None:
    try:
        threading.Thread(target=call.run, name=name, daemon=True).start()
    except RuntimeError:  # no new threads at this point of interpreter shutdown
        call.run()


class _Guard:
    """What the three wrappers share: breaker, bounded wait, one call in flight."""

    def __init__(self, inner: Any, breaker: Breaker, signal: str, timeout: float) -> None:
        self._inner, self._breaker, self._signal = inner, breaker, signal
        self._timeout = timeout
        self._in_flight: _Call | None = None

    def _drop(self, n: int, window: _Window | None) -> None:
        if window is not None:
            key = (self._breaker.endpoint, self._signal)
            window.dropped[key] = window.dropped.get(key, 0) + n

    def run(self, export: Callable[..., Any], batch: Any, n: int, ok: Any, failure: Any,
            **kwargs: Any) -> Any:
        window = _window
        if not self._breaker.allows():
            self._drop(n, window)
            return failure
        in_flight = self._in_flight
        if in_flight is not None and not in_flight.done.is_set():
            # The previous export still waits on the collector: do not pile up another.
            self._drop(n, window)
            return failure
        wait = self._timeout + _GRACE_SECONDS
        if window is not None:
            wait = min(wait, window.remaining())
        call = _Call(export, (batch,), kwargs)
        self._in_flight = call
        _start(call, f"otel_jax-export-{self._signal}")
        if not call.done.wait(wait):
            self._drop(n, window)
            if window is not None and window.remaining() <= 0:
                window.cut.add(self._breaker.endpoint)
            self._breaker.failed(self._signal, f"no answer within {wait:.3g} s")
            return failure
        if call.error is not None:
            exc = call.error
            if not isinstance(exc, OSError) and isinstance(
                    exc, (UnicodeError, ValueError, TypeError, OverflowError, RecursionError)):
                # The batch could not be serialised: a bad record, not an outage.
                _bad_records(self._signal, n, f"; {type(exc).__name__}")
                return failure
            self._drop(n, window)
            self._breaker.failed(self._signal, f"{type(exc).__name__}: {exc}")
            return failure
        if call.result == ok:
            self._breaker.succeeded()
        else:
            self._drop(n, window)
            self._breaker.failed(self._signal, "export failed")
        return call.result

    def shutdown(self, **kwargs: Any) -> None:
        window = _window
        wait = window.remaining() if window is not None else self._timeout + _GRACE_SECONDS
        run_bounded(self._inner.shutdown, wait, name="otel_jax-exporter-shutdown", **kwargs)


class _Delegating:
    """Shutdown and flush go to the wrapped exporter, bounded; ``export`` is guarded."""

    _signal = ""

    def __init__(self, inner: Any, breaker: Breaker, timeout: float = 10.0) -> None:
        self._inner, self._breaker = inner, breaker
        self._guard = _Guard(inner, breaker, self._signal, timeout)

    def _export_records(self, batch: Sequence[Any], ok: Any, failure: Any) -> Any:
        good, bad = _split_bad(batch)
        if bad:
            _bad_records(self._signal, bad)
            if not good:
                return ok  # nothing left to send; not the collector's fault
        return self._guard.run(self._inner.export, good, len(good), ok, failure)

    def shutdown(self) -> None:
        self._guard.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self._inner, "force_flush", None)
        if flush is None:
            return True
        call = run_bounded(flush, min(timeout_millis / 1000, self._guard._timeout), timeout_millis)
        return bool(call is not None and call.error is None and call.result)


class FailOpenSpanExporter(_Delegating, SpanExporter):
    _signal = "spans"

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        result = self._export_records(spans, SpanExportResult.SUCCESS, SpanExportResult.FAILURE)
        return cast(SpanExportResult, result)


class FailOpenLogExporter(_Delegating, LogRecordExporter):
    _signal = "logs"

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        result = self._export_records(batch, LogRecordExportResult.SUCCESS,
                                      LogRecordExportResult.FAILURE)
        return cast(LogRecordExportResult, result)


class FailOpenMetricExporter(MetricExporter):
    def __init__(self, inner: MetricExporter, breaker: Breaker, timeout: float = 10.0) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self._inner, self._breaker = inner, breaker
        self._guard = _Guard(inner, breaker, "metrics", timeout)

    def export(self, metrics_data: Any, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        try:
            data, bad = _clean_metrics(metrics_data)
        except Exception:  # an unexpected shape: send it as it is
            data, bad = metrics_data, 0
        if bad:
            _bad_records("metrics", bad)
        result = self._guard.run(self._inner.export, data, metric_points(data),
                                 MetricExportResult.SUCCESS, MetricExportResult.FAILURE,
                                 timeout_millis=timeout_millis, **kwargs)
        return cast(MetricExportResult, result)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        call = run_bounded(self._inner.force_flush, min(timeout_millis / 1000,
                                                        self._guard._timeout), timeout_millis)
        return bool(call is not None and call.error is None and call.result)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._guard.shutdown(timeout_millis=timeout_millis, **kwargs)
