"""The export health model: what each request of an export met, and each signal's breaker.

An :class:`Answer` (an HTTP status, a gRPC code or the exception a request met) says
what a failed export tells of its endpoint (:class:`Health`); a :class:`Breaker` per
signal and endpoint turns that into one warning and a pause, or turns a signal the
endpoint does not take off for good. Its own module: the state the bounded windows, the
request observers and the fail-open exporters all read, with no OpenTelemetry import.
"""

from __future__ import annotations

import dataclasses
import enum
import socket
import sys
import threading
import time
from typing import Protocol

from .._core._failopen import emit, is_installed_file, user_frame

OPEN_SECONDS = 30.0

#: The signals, in the order messages name them.
SIGNALS = ("traces", "metrics", "logs")
#: HTTP statuses by which an endpoint says it does not take a signal: no such path
#: (404), not this method (405), not this content type (415).
NOT_ACCEPTED_HTTP = frozenset({404, 405, 415})
#: The gRPC code by which an endpoint says it has no such service.
NOT_ACCEPTED_GRPC = frozenset({"UNIMPLEMENTED"})
#: gRPC codes of an endpoint that cannot be reached or did not answer in time.
UNREACHABLE_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})

#: The lock of the export state: breakers, endpoints, the bounded window, the log filter.
_state_lock = threading.RLock()


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
    #: What became of an HTTP answer's body when not read whole (:mod:`._answer_body`).
    body: str | None = None
    #: No connection could be made at all (refused, a name that does not resolve): the
    #: endpoint is down for every signal sent there, not only for this request's path.
    no_connection: bool = False

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
    def endpoint_down(self) -> bool:
        """Whether what this request met says the whole endpoint is down (every signal sent
        there fails alike): no connection could be made, or gRPC's ``UNAVAILABLE``."""
        return self.no_connection or self.grpc_code == "UNAVAILABLE"

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
            if self.body:
                text += f", {self.body}"
            return text
        if self.grpc_code is not None:
            return f"gRPC {self.grpc_code}"
        return self.error or "export failed"


def answer_from_error(exc: BaseException) -> Answer:
    return Answer(error=_bounded_text(f"{type(exc).__name__}: {exc}"),
                  connection=_is_connection_failure(exc), no_connection=_no_connection(exc))


def _no_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a connection that could not be made at all: refused,
    or a name that does not resolve (requests wraps urllib3's ``NewConnectionError`` in
    its own ``ConnectionError``, through ``MaxRetryError.reason``). Decided by types,
    looked for a few levels deep; a connection reset or closed mid-request is not one."""
    urllib3 = sys.modules.get("urllib3")
    new_connection: tuple[type, ...] = ()
    if urllib3 is not None:
        new_connection = tuple(t for t in (getattr(urllib3.exceptions, "NewConnectionError",
                                                   None),) if isinstance(t, type))
    seen: list[object] = [exc]
    for _ in range(16):
        if not seen:
            return False
        err = seen.pop()
        if isinstance(err, (ConnectionRefusedError, socket.gaierror, *new_connection)):
            return True
        if isinstance(err, BaseException):
            seen += [e for e in (err.__cause__, err.__context__,
                                 getattr(err, "reason", None), *err.args[:2])
                     if isinstance(e, BaseException)]
    return False


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


#: What a signal's records are called in messages.
_UNITS = {"traces": "spans", "spans": "spans", "logs": "log records",
          "metrics": "metric points"}


class _WindowDetails(Protocol):
    """What a breaker needs of the bounded window an export ran in
    (:class:`otel_jax._emit._bounded._Window`): where it says, when it closes, why an
    endpoint failed."""

    details: dict[str, str]


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


def _sent_there(endpoint: str) -> list[str]:
    """The signals this process sends to ``endpoint`` that it has not turned off."""
    with _state_lock:
        sent = {b.signal for (url, _), b in _breakers.items() if url == endpoint
                and b.off is None}
    return [s for s in SIGNALS if s in sent]


def _named(signals: list[str]) -> str:
    """``traces, metrics and logs``."""
    return ", ".join(signals[:-1]) + " and " + signals[-1] if len(signals) > 1 else \
        "".join(signals)


def _set_up_at() -> str | None:
    """``file:line`` of the user's own line that set this export up (``install()``), or
    ``None`` where none is theirs (``otel-jax run``'s bootstrap, an installed library)."""
    found = user_frame()
    if found is None:
        return None
    code, line = found[0].f_code, found[0].f_lineno
    return None if is_installed_file(code.co_filename) else f"{code.co_filename}:{line}"


def _still_sent(endpoint: str, signal: str) -> list[str]:
    """The other signals this process sends to ``endpoint`` and the endpoint still takes."""
    with _state_lock:
        breakers = [b for (url, _), b in _breakers.items() if url == endpoint]
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
        #: Where its warnings are located: the user's line that set the export up, made on
        #: the user's thread; its failures are found on an exporter's thread, where no line
        #: of the user's is on the stack.
        self.site = _set_up_at()

    def allows(self) -> bool:
        return self.off is None and time.monotonic() >= self._open_until

    def failed(self, health: Health, detail: str, answer: Answer | None = None,
               window: _WindowDetails | None = None) -> None:
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
            # Down for every signal sent there: named all, not the one that failed first.
            down = (_sent_there(self.endpoint) or [self.signal]) if (
                answer is not None and answer.endpoint_down) else [self.signal]
            emit(f"otel_jax: cannot export {_named(down)} to {self.endpoint}: the "
                 f"collector is unreachable ({detail}). Telemetry is dropped while it is "
                 f"({retry}).", at=self.site)
        elif health is Health.REJECTED:
            emit(f"otel_jax: cannot export {self.signal} to {self.endpoint}: the endpoint "
                 f"answered {detail}. {self.signal.capitalize()} are dropped while it does "
                 f"({retry}).", at=self.site)
        else:
            emit(f"otel_jax: cannot export {self.signal} to {self.endpoint} ({detail}). "
                 f"{self.signal.capitalize()} are dropped while exports fail ({retry}).",
                 at=self.site)

    def _turn_off(self, status: str) -> None:
        with self._lock:
            if self.off is not None:
                return
            self.off = status
        others = _still_sent(self.endpoint, self.signal)
        flows = (f"{' and '.join(others)} still sent" if others
                 else "nothing else is sent there")
        emit(f"otel_jax: the OTLP endpoint does not accept {self.signal} ({status}): "
             f"{self.signal} off, {flows} (endpoint {self.endpoint}).", at=self.site)

    def succeeded(self) -> None:
        self._open_until = 0.0

