"""Bounded calls and windows: no export, flush or shutdown holds the caller past its deadline.

A call runs on a daemon thread and is waited for at most a timeout (:func:`run_bounded`,
:func:`run_all_bounded`); at the process's exit, where Python 3.12+ refuses new threads,
it is handed to a thread prestarted at ``install()`` (:class:`_Spares`). A
window (``uninstall()``, the exit) caps every export started in it at its deadline and
says, when it closes, what it dropped. Its own module: the exit path needs it without the
exporters, and it is imported at ``install()`` (nothing may be imported at a forked
child's exit on Python 3.13).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._core import _threads
from .._core._failopen import emit
from ._health import _UNITS, Answer, _breakers, _endpoints, _state_lock

#: The longest ``uninstall()`` waits for telemetry still to be exported.
UNINSTALL_SECONDS = 2.0
#: The longest the process's exit waits for otel_jax's providers to shut down.
EXIT_SECONDS = 3.0

#: The export call running on this thread, if it is one of otel_jax's (``call``, ``active``).
_inside_our_export = threading.local()


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
                and 200 <= answer.http_status < 400 and answer.body is None:
            return None  # a body being read, or cut, is said even of a success
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
        _threads.daemon(call.run, name).start()
    except RuntimeError:
        # No new thread at this point of interpreter shutdown (Python 3.12 refuses them in
        # atexit handlers): a thread started before it takes the call, so that the wait
        # stays bounded. Without one the call is not made: an unbounded call here is an
        # exit that may never end.
        if not _SPARES.take(call):
            call.done.set()


class _Spares:
    """Daemon threads started while the interpreter still allows it, each serving the exit's
    bounded calls one at a time. Python 3.12.0-3.12.1 refuse new threads in ``threading``'s
    exit hook and in ``atexit`` alike, so they are started at ``install()`` (when otel_jax
    has providers to shut down at exit); ``threading``'s exit hook tops them up where it
    can. An idle one waits on a queue: no wake-ups, no work."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.RLock()
        #: How many were asked for: a forked child starts as many of its own.
        self._wanted = 0

    def prestart(self, count: int) -> None:
        """Have at least ``count`` threads waiting; never raises."""
        with self._lock:
            self._wanted = max(self._wanted, count)
            missing = count - self._idle
            for _ in range(max(0, missing)):
                try:
                    _threads.daemon(self._serve, "otel_jax-exit").start()
                except RuntimeError:
                    return
                self._idle += 1

    @property
    def idle(self) -> int:
        return self._idle

    def take(self, call: _Call) -> bool:
        """Hand ``call`` to a waiting thread; whether one was there."""
        with self._lock:
            if self._idle <= 0:
                return False
            self._idle -= 1
        self._calls.put(call)
        return True

    def _serve(self) -> None:
        calls = self._calls  # a forked child gets a queue of its own (after_fork)
        while True:
            call = calls.get()
            call.run()
            with self._lock:
                if calls is not self._calls:
                    return
                self._idle += 1

    def after_fork(self) -> None:
        """In a forked child: the parent's threads are not there. The child's exit shuts its
        providers down too (a child of ``os.fork()`` that ends with ``sys.exit``, through
        ``atexit``), where Python 3.12.0-3.12.1 start no thread: it gets threads of its own
        now, while it still can, as many as the parent had (an idle one costs nothing)."""
        self._calls = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.RLock()
        self.prestart(self._wanted)


_SPARES = _Spares()
#: The bounded calls the exit can have running at once: the shutdown of each provider otel_jax
#: built (three signals), within each the export of what its processor or reader still holds
#: (three), then the exporters' shutdowns (three, once an export ended or was cut off), and
#: one more.
EXIT_SPARES = 10


def prestart_exit_threads(count: int = EXIT_SPARES) -> None:
    """Start, now, the threads the exit's bounded calls will need (see :class:`_Spares`)."""
    _SPARES.prestart(count)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SPARES.after_fork)


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
            elif seen.answered and seen.body is not None:
                why = f"it answered {seen.describe()}"
            elif seen.answered:
                why = f"it answered {seen.describe()}; the exporter was still retrying"
            else:
                why = f"{seen.describe()}; the exporter was still retrying"
        emit(f"otel_jax: {window.what} dropped {', '.join(parts)} that could not be exported "
             f"to {endpoint} ({why}); {window.what} waits at most {window.seconds:g} s for "
             "telemetry.")
