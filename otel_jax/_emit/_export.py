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
  the gRPC code or the exception each request met (:class:`Answer`), recorded
  by a session and a channel interceptor handed to the SDK's exporters;
* every export runs on a helper thread and is waited for at most the
  exporter's timeout (plus a little), and at most until the deadline of a
  bounded window: ``uninstall()`` flushes within :data:`UNINSTALL_SECONDS`,
  the process's exit within :data:`EXIT_SECONDS`. A collector that accepts
  connections and never answers cannot hold the training loop, uninstall or
  exit; what a window dropped is said in one warning, with what the endpoint
  last answered;
* a record whose text cannot be encoded (a lone surrogate) is a bad record,
  not a collector outage: it is dropped with one warning and the rest of its
  batch is exported; the breaker stays closed.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import os
import queue
import socket
import sys
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

from .._core._failopen import Topic, emit, once

OPEN_SECONDS = 30.0
#: The longest ``uninstall()`` waits for telemetry still to be exported.
UNINSTALL_SECONDS = 2.0
#: The longest the process's exit waits for otel_jax's providers to shut down.
EXIT_SECONDS = 3.0
#: Beyond its own timeout, how long an exporter call is waited for.
_GRACE_SECONDS = 2.0

#: The signals, in the order messages name them.
SIGNALS = ("traces", "metrics", "logs")
#: HTTP statuses by which an endpoint says it does not take a signal: no such path
#: (404), not this method (405), not this content type (415).
NOT_ACCEPTED_HTTP = frozenset({404, 405, 415})
#: The gRPC code by which an endpoint says it has no such service.
NOT_ACCEPTED_GRPC = frozenset({"UNIMPLEMENTED"})
#: gRPC codes of an endpoint that cannot be reached or did not answer in time.
UNREACHABLE_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})

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

_state_lock = threading.RLock()
_inside_our_export = threading.local()



def _bounded_text(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# --- what each request of an export met --------------------------------------------------------

class Health(enum.Enum):
    """What a failed export says about the endpoint, for its signal."""

    NOT_ACCEPTED = "not_accepted"  # the endpoint does not take this signal
    UNREACHABLE = "unreachable"  # connection failed or no answer in time
    REJECTED = "rejected"  # it answered, and refused the batch
    FAILED = "failed"  # nothing known beyond the exporter's failure


@dataclasses.dataclass(frozen=True)
class Answer:
    """What one request of an export met: an HTTP status, a gRPC code, or an error
    before any answer (``connection``: the error is a connection failure or a timeout)."""

    http_status: int | None = None
    reason: str = ""
    retry_after: str | None = None
    grpc_code: str | None = None
    error: str | None = None
    connection: bool = False

    @property
    def health(self) -> Health:
        if self.http_status is not None:
            return Health.NOT_ACCEPTED if self.http_status in NOT_ACCEPTED_HTTP \
                else Health.REJECTED
        if self.grpc_code is not None:
            if self.grpc_code in NOT_ACCEPTED_GRPC:
                return Health.NOT_ACCEPTED
            return Health.UNREACHABLE if self.grpc_code in UNREACHABLE_GRPC else Health.REJECTED
        return Health.UNREACHABLE if self.connection else Health.FAILED

    @property
    def answered(self) -> bool:
        """Whether the endpoint answered at all (a status or a code other than
        "unreachable"), as opposed to an error before any answer."""
        return self.http_status is not None or (
            self.grpc_code is not None and self.grpc_code not in UNREACHABLE_GRPC)

    def describe(self, short: bool = False) -> str:
        """``HTTP 404``, ``HTTP 429 Too Many Requests, Retry-After: 30``, ``gRPC UNIMPLEMENTED``,
        ``ConnectionError: ...``; ``short``: the status or code alone."""
        if self.http_status is not None:
            if short:
                return f"HTTP {self.http_status}"
            text = f"HTTP {self.http_status} {self.reason}".rstrip()
            if self.retry_after:
                text += f", Retry-After: {self.retry_after}"
            return text
        if self.grpc_code is not None:
            return f"gRPC {self.grpc_code}"
        return self.error or "export failed"


def answer_from_error(exc: BaseException) -> Answer:
    return Answer(error=_bounded_text(f"{type(exc).__name__}: {exc}"),
                  connection=_is_connection_failure(exc))


def _is_connection_failure(exc: BaseException) -> bool:
    """A connection refused, reset or closed, a name that does not resolve, a timeout:
    decided by the exception's type (requests wraps the socket's errors in its own)."""
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
        return True
    requests = sys.modules.get("requests")
    if requests is not None:
        exceptions = requests.exceptions
        return isinstance(exc, (exceptions.ConnectionError, exceptions.Timeout))
    return False


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
            try:
                response = super().request(method, url, *args, **kwargs)
            except Exception as exc:
                _observe(answer_from_error(exc))
                raise
            try:
                retry_after = response.headers.get("Retry-After")
                _observe(Answer(http_status=int(response.status_code),
                                reason=_bounded_text(str(response.reason or ""), 60),
                                retry_after=None if retry_after is None
                                else _bounded_text(str(retry_after), 40)))
            except Exception:  # a response we cannot read: nothing recorded
                pass
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


# --- bounded windows (uninstall, exit) ------------------------------------------------------

class _Window:
    """While open, no export waits past ``deadline``; what is dropped meanwhile is counted."""

    def __init__(self, seconds: float, what: str) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.what = what
        self.dropped: dict[tuple[str, str], int] = {}  # (endpoint, signal) -> records
        # Endpoints with an export cut off by the deadline -> what it had met so far.
        self.cut: dict[str, Answer | None] = {}
        self.details: dict[str, str] = {}
        # Exports started in the window and not yet ended -> (endpoint, signal, records).
        self.pending: dict[_Call, tuple[str, str, int]] = {}
        self.closed = False

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def begin(self, call: _Call, endpoint: str, signal: str, n: int) -> None:
        with _state_lock:
            if not self.closed:
                self.pending[call] = (endpoint, signal, n)

    def end(self, call: _Call) -> bool:
        """Whether the export ``call`` is still the caller's to account for: False when
        the window closed first and counted it as dropped (cut by the deadline)."""
        with _state_lock:
            return self.pending.pop(call, None) is not None or not self.closed

    def _close(self) -> None:
        """Exports still out when the window closes were cut by its deadline."""
        with _state_lock:
            self.closed = True
            pending, self.pending = self.pending, {}
        for call, (endpoint, signal, n) in pending.items():
            self.dropped[(endpoint, signal)] = self.dropped.get((endpoint, signal), 0) + n
            self.cut.setdefault(endpoint, call.failure_answer())


_window: _Window | None = None


def open_window(seconds: float, what: str) -> _Window:
    global _window
    with _state_lock:
        _window = _Window(seconds, what)
        return _window


def close_window(window: _Window) -> None:
    """End ``window`` and say, in one warning per endpoint, what it dropped and why,
    unless that endpoint already warned that its telemetry is dropped."""
    global _window
    with _state_lock:
        if _window is window:
            _window = None
    window._close()
    by_endpoint: dict[str, list[str]] = {}
    for (endpoint, signal), n in sorted(window.dropped.items()):
        breaker = _breakers.get((endpoint, signal))
        if breaker is not None and breaker.off is not None:
            continue  # the endpoint does not take this signal: said when that was found
        if n:
            by_endpoint.setdefault(endpoint, []).append(f"{n} {_UNITS.get(signal, signal)}")
    for endpoint, parts in by_endpoint.items():
        state = _endpoints.get(endpoint)
        if state is not None and state.warned:
            continue
        if state is not None:
            state.warned = True
        why = window.details.get(endpoint, "export failed")
        if endpoint in window.cut:
            seen = window.cut[endpoint]
            if seen is None:
                why = f"no answer within {window.seconds:g} s"
            elif seen.answered:
                why = f"it answered {seen.describe()}; the exporter was still retrying"
            else:
                why = f"{seen.describe()}; the exporter was still retrying"
        emit(f"otel_jax: {window.what} dropped {', '.join(parts)} that could not be exported "
             f"to {endpoint} ({why}); {window.what} waits at most {window.seconds:g} s for "
             "telemetry.")


_UNITS = {"traces": "spans", "spans": "spans", "logs": "log records",
          "metrics": "metric points"}


# --- per-signal breakers ------------------------------------------------------------------------

class _Endpoint:
    """What the signals sent to one endpoint share: its one warning about failures."""

    def __init__(self) -> None:
        self.warned = False


_endpoints: dict[str, _Endpoint] = {}
_breakers: dict[tuple[str, str], Breaker] = {}


def breaker_for(endpoint: str, signal: str) -> Breaker:
    """The breaker of ``signal`` sent to ``endpoint`` (one per pair, for the process)."""
    with _state_lock:
        return _breakers.setdefault((endpoint, signal), Breaker(endpoint, signal))


def _still_sent(signal: str) -> list[str]:
    with _state_lock:
        breakers = list(_breakers.values())
    return [s for s in SIGNALS if s != signal
            and any(b.signal == s and b.off is None for b in breakers)]


class Breaker:
    """One signal's health at one endpoint: open after a failure (batches dropped at once,
    retried after ``open_seconds``), or off for good when the endpoint does not take the
    signal. The other signals, at this endpoint or any other, are not affected."""

    def __init__(self, endpoint: str, signal: str = "traces",
                 open_seconds: float = OPEN_SECONDS) -> None:
        self.endpoint = endpoint
        self.signal = signal
        self.open_seconds = open_seconds
        self.failures = 0
        #: Why the endpoint does not take this signal (``HTTP 404``), once it said so.
        self.off: str | None = None
        self._open_until = 0.0
        self._lock = threading.RLock()
        self._shared = _endpoints.setdefault(endpoint, _Endpoint())  # atomic

    def allows(self) -> bool:
        return self.off is None and time.monotonic() >= self._open_until

    def failed(self, health: Health, detail: str, answer: Answer | None = None,
               window: _Window | None = None) -> None:
        """An export of this signal failed: ``health`` says what that tells of the endpoint.
        ``window``: the bounded window the export ran in, which says it when it closes."""
        if health is Health.NOT_ACCEPTED:
            self._turn_off(answer.describe(short=True) if answer is not None else detail)
            return
        with self._lock:
            self.failures += 1
            self._open_until = time.monotonic() + self.open_seconds
            if window is not None:
                # Said once, with what was dropped, when the window closes.
                window.details.setdefault(self.endpoint, f"{self.signal}: {detail}")
                return
            first, self._shared.warned = not self._shared.warned, True
        if not first:
            return
        retry = (f"retried every {self.open_seconds:.0f} s; the training loop is not "
                 "affected")
        if health is Health.UNREACHABLE:
            emit(f"otel_jax: cannot export {self.signal} to {self.endpoint}: the collector "
                 f"is unreachable ({detail}). Telemetry is dropped while it is ({retry}).")
        elif health is Health.REJECTED:
            emit(f"otel_jax: cannot export {self.signal} to {self.endpoint}: the endpoint "
                 f"answered {detail}. {self.signal.capitalize()} are dropped while it does "
                 f"({retry}).")
        else:
            emit(f"otel_jax: cannot export {self.signal} to {self.endpoint} ({detail}). "
                 f"{self.signal.capitalize()} are dropped while exports fail ({retry}).")

    def _turn_off(self, status: str) -> None:
        with self._lock:
            if self.off is not None:
                return
            self.off = status
        others = _still_sent(self.signal)
        flows = (f"{' and '.join(others)} still sent" if others
                 else "nothing else is sent there")
        emit(f"otel_jax: the OTLP endpoint does not accept {self.signal} ({status}): "
             f"{self.signal} off, {flows} (endpoint {self.endpoint}).")

    def succeeded(self) -> None:
        self._open_until = 0.0


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


def _bad_records(signal: str, n: int, detail: str = "") -> None:
    if once(Topic.BAD_RECORDS):
        emit(f"otel_jax: dropped {n} {_UNITS.get(signal, signal)} whose text cannot be encoded "
             f"(e.g. a lone surrogate in a string{detail}); the rest of the telemetry is "
             "exported. Later bad records are dropped without a warning.")


# --- the bounded call -------------------------------------------------------------------------

class _Call:
    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result: Any = None
        self.error: BaseException | None = None
        #: What the last request of the call met (set by the observing session/interceptor).
        self.answer: Answer | None = None
        self.done = threading.Event()

    def failure_answer(self) -> Answer | None:
        """What the last request met, unless it succeeded (then it says nothing of a
        failure)."""
        answer = self.answer
        if answer is not None and answer.http_status is not None \
                and 200 <= answer.http_status < 400:
            return None
        return answer

    def run(self) -> None:
        _inside_our_export.active = True
        _inside_our_export.call = self
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # reported to the waiting thread
            self.error = exc
        finally:
            _inside_our_export.active = False
            _inside_our_export.call = None
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


def run_all_bounded(calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
                    deadline: float, name: str = "otel_jax-bounded") -> None:
    """Run each ``(fn, args)`` on its own daemon thread, side by side, and wait for them at
    most until ``deadline`` (``time.monotonic()``); those still running are left to finish,
    or to die with the process, on their own."""
    started = []
    for fn, args in calls:
        call = _Call(fn, args, {})
        _start(call, name)
        started.append(call)
    for call in started:
        call.done.wait(max(0.0, deadline - time.monotonic()))


def _start(call: _Call, name: str) -> None:
    try:
        threading.Thread(target=call.run, name=name, daemon=True).start()
    except RuntimeError:
        # No new thread at this point of interpreter shutdown (Python 3.12 refuses them in
        # atexit handlers): a thread started before it takes the call, so that the wait
        # stays bounded. Without one the call is not made: an unbounded call here is an
        # exit that may never end.
        if not _SPARES.take(call):
            call.done.set()


class _Spares:
    """Daemon threads started while the interpreter still allows it (``threading``'s exit
    hook, which runs before ``atexit``'s), each waiting for one bounded call of the exit."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.RLock()

    def prestart(self, count: int) -> None:
        """Have at least ``count`` threads waiting; never raises."""
        with self._lock:
            missing = count - self._idle
            for _ in range(max(0, missing)):
                try:
                    threading.Thread(target=self._serve, name="otel_jax-exit",
                                     daemon=True).start()
                except RuntimeError:
                    return
                self._idle += 1

    def take(self, call: _Call) -> bool:
        """Hand ``call`` to a waiting thread; whether one was there."""
        with self._lock:
            if self._idle <= 0:
                return False
            self._idle -= 1
        self._calls.put(call)
        return True

    def _serve(self) -> None:
        self._calls.get().run()

    def after_fork(self) -> None:
        self._calls = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.RLock()


_SPARES = _Spares()
#: Calls the exit makes side by side: the shutdown of each provider otel_jax built (three
#: signals), and one more.
EXIT_SPARES = 4


def prestart_exit_threads(count: int = EXIT_SPARES) -> None:
    """Start, now, the threads the exit's bounded calls will need: called from
    ``threading``'s exit hook, where threads may still be started."""
    _SPARES.prestart(count)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SPARES.after_fork)


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
        window = _window
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
        window = _window
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
