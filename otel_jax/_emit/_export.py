"""Exporters that fail open: a collector that is down costs dropped telemetry and one warning.

The OTLP exporters retry each failed batch with backoff until their timeout,
logging every attempt. Wrapped here (only the exporters otel_jax creates
itself), each signal (traces, metrics, logs) keeps its own health, so that no
signal ever drops another's data:

* an endpoint that does not take a signal (HTTP 404, 405 or 415, gRPC
  UNIMPLEMENTED: Jaeger with its defaults takes traces only) turns that signal
  off, with one warning naming the signal, the status and what still flows;
* an endpoint that cannot be reached (connection refused, reset or closed, a
  timeout) or that refuses a batch (any other status) costs one warning per
  endpoint; then that signal's breaker drops its batches at once for a while
  instead of retrying each. What happened is decided from the HTTP status,
  the gRPC code or the exception each request met (:class:`~._health.Answer`),
  recorded by a session and a channel interceptor handed to the SDK's exporters;
* every export runs on a helper thread and is waited for at most the
  exporter's timeout (plus a little), and at most until the deadline of a
  bounded window: ``uninstall()`` flushes within
  :data:`~._bounded.UNINSTALL_SECONDS`, the process's exit within
  :data:`~._bounded.EXIT_SECONDS`. A collector that accepts connections and
  never answers cannot hold the training loop, uninstall or exit; what a
  window dropped is said in one warning, with what the endpoint last answered;
* a record whose text cannot be encoded (a lone surrogate) is a bad record,
  not a collector outage: it is dropped with one warning and the rest of its
  batch is exported; the breaker stays closed.

The health model is in :mod:`._health`, the request observers in :mod:`._observe`, the
bounded calls and windows in :mod:`._bounded`, the bad-text cleaning in :mod:`._clean`;
this module holds the exporters that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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

from .._core._failopen import Topic, emit, once
from . import _bounded
from ._bounded import _Call, _start, _Window, run_bounded
from ._clean import _bad_records, _clean_metrics, _split_bad, metric_points
from ._health import _UNITS, Breaker, Health, _state_lock, answer_from_error

#: Beyond its own timeout, how long an exporter call is waited for.
_GRACE_SECONDS = 2.0


def _unsent(signal: str, n: int) -> None:
    """The exporter failed a batch without sending a request: the batch, not the endpoint."""
    if once(Topic.UNSENT_BATCH):
        emit(f"otel_jax: the OTLP exporter did not send a batch of {n} "
             f"{_UNITS.get(signal, signal)} (it could not be encoded or is over the "
             "exporter's size limit); it is dropped and the rest of the telemetry is "
             "exported. Later such batches are dropped without a warning.")


class _Guard:
    """What the three wrappers share: breaker, bounded wait, one call in flight.

    ``observed``: the inner exporter's requests are recorded (:class:`Answer`), so a
    failure with no request at all is the batch's, not the endpoint's.
    """

    def __init__(self, inner: Any, breaker: Breaker, signal: str, timeout: float,
                 observed: bool = False) -> None:
        self._inner, self._breaker, self._signal = inner, breaker, signal
        self._timeout = timeout
        self._observed = observed
        self._in_flight: _Call | None = None

    def _drop(self, n: int, window: _Window | None) -> None:
        if window is not None:
            key = (self._breaker.endpoint, self._signal)
            with _state_lock:  # the signals shut down side by side
                window.dropped[key] = window.dropped.get(key, 0) + n

    def run(self, export: Callable[..., Any], batch: Any, n: int, ok: Any, failure: Any,
            **kwargs: Any) -> Any:
        window = _bounded._window  # rebound by open_window(): read where it lives
        breaker = self._breaker
        if breaker.off is not None:
            return failure  # the endpoint does not take this signal: said once, when found
        if not breaker.allows():
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
        if window is not None:
            window.begin(call, breaker.endpoint, self._signal, n)
        _start(call, f"otel_jax-export-{self._signal}")
        finished = call.done.wait(wait)
        answer = call.failure_answer()
        if window is not None and not window.end(call):
            finished = False  # the window closed first: it counted the batch as cut
        elif not finished:
            self._drop(n, window)
            if window is not None:
                with _state_lock:
                    window.cut.setdefault(breaker.endpoint, answer)
        if not finished:
            if answer is not None and answer.answered:
                breaker.failed(answer.health, answer.describe(), answer, window)
            elif answer is not None:
                breaker.failed(Health.UNREACHABLE,
                               f"{answer.describe()}; still retrying after {wait:.3g} s",
                               answer, window)
            else:
                breaker.failed(Health.UNREACHABLE, f"no answer within {wait:.3g} s",
                               None, window)
            return failure
        if call.error is not None:
            exc = call.error
            if not isinstance(exc, OSError) and isinstance(
                    exc, (UnicodeError, ValueError, TypeError, OverflowError, RecursionError)):
                # The batch could not be serialised: a bad record, not an outage.
                _bad_records(self._signal, n, f"; {type(exc).__name__}")
                return failure
            self._drop(n, window)
            seen = answer if answer is not None else answer_from_error(exc)
            breaker.failed(seen.health, seen.describe(), seen, window)
            return failure
        if call.result == ok:
            breaker.succeeded()
            return call.result
        if answer is None and self._observed:
            _unsent(self._signal, n)
            return call.result
        self._drop(n, window)
        if answer is None:
            breaker.failed(Health.FAILED, "export failed", None, window)
        else:
            breaker.failed(answer.health, answer.describe(), answer, window)
        return call.result

    def shutdown(self, **kwargs: Any) -> None:
        window = _bounded._window
        wait = window.remaining() if window is not None else self._timeout + _GRACE_SECONDS
        run_bounded(self._inner.shutdown, wait, name="otel_jax-exporter-shutdown", **kwargs)


class _Delegating:
    """Shutdown and flush go to the wrapped exporter, bounded; ``export`` is guarded."""

    _signal = ""

    def __init__(self, inner: Any, breaker: Breaker, timeout: float = 10.0,
                 observed: bool = False) -> None:
        self._inner, self._breaker = inner, breaker
        self._guard = _Guard(inner, breaker, self._signal, timeout, observed)

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
    _signal = "traces"

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
    def __init__(self, inner: MetricExporter, breaker: Breaker, timeout: float = 10.0,
                 observed: bool = False) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self._inner, self._breaker = inner, breaker
        self._guard = _Guard(inner, breaker, "metrics", timeout, observed)

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
