"""Record -> one JSON log line (written off the compiling thread) and one OpenTelemetry log record.

otel_jax never calls ``structlog.configure`` nor touches the ``logging``
module's handlers: the application's own logging stays exactly as it set it
up. Applications that want their own structlog events correlated with traces
add ``add_otel_context`` to their processor chain.

Logging never blocks the user's call. The compiling thread only hands each
line's level and fields to a bounded queue; one daemon thread renders and
writes them. A stream that does not keep up (stderr piped to a process that
stopped reading) fills the queue, and further lines are dropped and counted:
one warning says so, and the count is repeated at exit. Exit waits for the
queue at most ``EXIT_FLUSH_S`` and ``uninstall()`` at most ``UNINSTALL_FLUSH_S``,
never for the stream itself.
"""

from __future__ import annotations

import atexit
import functools
import io
import json
import os
import select
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, MutableMapping
from datetime import datetime, timezone
from typing import IO, Any

from opentelemetry import trace
from opentelemetry._logs import Logger as OtelLogger
from opentelemetry._logs import LogRecord, SeverityNumber

from ._failopen import FailOpen
from ._record import (
    CompileRecord,
    Divergence,
    SpanLink,
    divergence_attributes,
    divergence_fields,
    log_fields,
    span_attributes,
)
from ._spans import link_context
from ._vocab import EVENT_COMPILE, EVENT_DIVERGENCE, EVENT_STORM, LOGGER_NAME, Attr, Field

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_LEVEL_NAMES = {v: k for k, v in _LEVELS.items()}
#: Lines waiting for the writer thread; past this, lines are dropped and counted.
QUEUE_SIZE = 1024
#: How often the writer thread looks for queued lines (it is not woken per line).
_WRITER_POLL_S = 0.05
#: How long the process's exit waits, at most, for queued lines to be written.
EXIT_FLUSH_S = 1.0
#: How long ``uninstall()`` waits, at most.
UNINSTALL_FLUSH_S = 2.0

#: A line's fields, or what builds them on the writer thread (from a frozen record).
_Fields = dict[str, Any] | Callable[[], dict[str, Any]]
_Line = tuple[float, int, str, _Fields]  # (time, level, event, fields)


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


def render(stamp: float, level: int, event: str, fields: dict[str, Any]) -> str:
    """One JSON line, the envelope first so that it reads left to right."""
    timestamp = datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    line = {Field.TIMESTAMP: timestamp, Field.LEVEL: _LEVEL_NAMES.get(level, "info"),
            Field.EVENT: event, Field.LOGGER: LOGGER_NAME, **fields}
    return json.dumps(line, default=str, ensure_ascii=False) + "\n"


def _process_fd(stream: Any) -> int | None:
    """The descriptor of the process's own stderr/stdout, or ``None`` for any other stream.

    Those two are written with ``os.write``: a write blocked on a full pipe
    then holds no lock of Python's stream objects, which the interpreter
    takes to flush them at exit.
    """
    if stream is None or (stream is not sys.__stderr__ and stream is not sys.__stdout__):
        return None
    assert stream is not None
    try:
        return int(stream.fileno())
    except Exception:
        return None


def writable_now(stream: Any) -> bool:
    """Whether a short text (under a pipe's atomic size) can be written without blocking."""
    try:
        fd = stream.fileno()
    except Exception:
        return True  # in memory (StringIO, pytest's capture): never blocks
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except Exception:
        return False


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a descriptor someone made non-blocking: wait here
            select.select([], [fd], [], 1.0)
            continue
        view = view[written:]


_live: weakref.WeakSet[JsonLogEmitter] = weakref.WeakSet()


class JsonLogEmitter:
    """One ``jax.compile`` JSON line per compile on a stream (stderr by default).

    Eager op-by-op compiles are logged at DEBUG, so that the default INFO
    output shows the user's own functions; spans and metrics carry them all.

    Lines are written by a daemon thread, never on the compiling thread, so a
    stream that blocks cannot stop the training loop (see the module doc). An
    in-memory ``io.StringIO`` cannot block and is written at once.
    ``flush(timeout)`` waits, boundedly, until queued lines are written.
    """

    def __init__(self, stream: IO[str] | None = None, level: str = "info", *,
                 failopen: FailOpen | None = None, queue_size: int | None = None) -> None:
        self._stream = stream  # None: sys.stderr, resolved at write time
        self._min_level = _LEVELS.get(level, 20)
        self._immediate = isinstance(stream, io.StringIO)
        self._failopen = failopen if failopen is not None else FailOpen()
        self._queue_size = max(1, int(QUEUE_SIZE if queue_size is None else queue_size))
        self._reset()
        _live.add(self)

    def _reset(self) -> None:
        """A fresh queue, lock and (not yet started) thread: at creation and in a forked child."""
        self._queue: deque[_Line] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._pending = 0  # lines queued or being written
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()
        #: Lines dropped: the queue was full (the stream did not keep up) or the write failed.
        self.dropped = 0

    # --- the compiling thread's side -------------------------------------------------

    def __call__(self, record: CompileRecord, link: SpanLink | None) -> None:
        level = 10 if record.eager_op else 20
        if level >= self._min_level:
            # The record is frozen: its fields are built on the writer thread.
            self._emit(level, EVENT_COMPILE, functools.partial(log_fields, record, link))

    def storm(self, event: dict[str, Any]) -> None:
        """The recompile-storm WARNING: function, recompile count, causes so far."""
        if 30 >= self._min_level:
            self._emit(30, EVENT_STORM, dict(event))

    def divergence(self, div: Divergence) -> None:
        """The WARNING of a divergence between ranks."""
        if 30 >= self._min_level:
            self._emit(30, EVENT_DIVERGENCE, divergence_fields(div))

    def _emit(self, level: int, event: str, fields: _Fields) -> None:
        line = (time.time(), level, event, fields)
        if self._immediate:
            self._write([line])
            return
        dropped = 0
        with self._cond:
            if self._closed or len(self._queue) >= self._queue_size:
                self.dropped += 1
                dropped = self.dropped
            else:
                self._queue.append(line)
                self._pending += 1
                # The writer wakes up on its own every _WRITER_POLL_S: waking it
                # here would hand it the GIL inside the user's jit call. Only a
                # queue filling up is worth an early wake-up.
                if len(self._queue) * 2 >= self._queue_size:
                    self._cond.notify()
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="otel_jax-json-log", daemon=True)
                    self._thread.start()
        if dropped:
            self._warn_dropped(dropped)

    def _warn_dropped(self, dropped: int) -> None:
        # Python's warnings go to stderr, which may be the very stream that is
        # full: warn only when that cannot block (else at a later drop).
        if writable_now(sys.stderr):
            self._failopen.warn_once(
                "json-log-dropped",
                "otel_jax: the JSON log stream is not keeping up (a full pipe nobody reads?): "
                f"{dropped} compile log line(s) dropped so far, and lines are dropped while it "
                "stays full; the jit calls are unaffected. The final count is given at exit.",
                stacklevel=2)

    # --- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait(_WRITER_POLL_S)
                if not self._queue:
                    self._thread = None
                    return  # closed, and everything written
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), 64))]
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[_Line]) -> None:
        try:
            text = "".join(map(self._render, batch))
            stream = self._stream if self._stream is not None else sys.stderr
            fd = _process_fd(stream)
            if fd is not None:
                encoding = getattr(stream, "encoding", None) or "utf-8"
                _write_fd(fd, text.encode(encoding, "backslashreplace"))
            else:
                stream.write(text)
                flush = getattr(stream, "flush", None)
                if flush is not None:
                    flush()
        except Exception as exc:  # a closed or broken stream: count the lines, warn once
            with self._cond:
                self.dropped += len(batch)
            if writable_now(sys.stderr):
                self._failopen.warn_once(
                    f"json-log-write:{type(exc).__name__}",
                    f"otel_jax: writing the JSON log failed ({type(exc).__name__}); "
                    f"{len(batch)} line(s) dropped; the jit calls are unaffected.")

    def _render(self, line: _Line) -> str:
        stamp, level, event, fields = line
        if callable(fields):
            built = self._failopen.call("JSON log fields", fields, None)
            if built is None:  # an internal error, counted and warned about once
                return ""
            fields = built
        return render(stamp, level, event, fields)

    # --- flushing ------------------------------------------------------------------------

    def flush(self, timeout: float = UNINSTALL_FLUSH_S) -> bool:
        """Wait until every queued line is written, for at most ``timeout`` seconds.

        Returns whether everything was written; never raises, never waits longer.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            if self._pid != os.getpid():
                return not self._queue
            self._cond.notify_all()  # the writer need not wait for its next poll
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = UNINSTALL_FLUSH_S) -> bool:
        """Flush (boundedly), then let the writer thread end; later lines are dropped."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        return done


def flush_all(timeout: float = UNINSTALL_FLUSH_S) -> bool:
    """Flush every live JSON emitter, all of them within ``timeout`` seconds together."""
    deadline = time.monotonic() + timeout
    done = True
    for emitter in list(_live):
        done = emitter.flush(max(0.0, deadline - time.monotonic())) and done
    return done


def _at_exit() -> None:
    """Bounded: wait a moment for queued lines, then say how many were dropped."""
    try:
        flush_all(EXIT_FLUSH_S)
        dropped = sum(e.dropped for e in list(_live) if e._pid == os.getpid())
        stream = sys.stderr
        if dropped and stream is not None and writable_now(stream):
            message = (f"otel_jax: {dropped} JSON compile log line(s) were dropped in this "
                       "process: the log stream did not keep up or failed.\n")
            fd = _process_fd(stream)
            if fd is not None:
                os.write(fd, message.encode("utf-8", "backslashreplace"))
            else:
                stream.write(message)
    except Exception:  # exit must never fail or hang because of otel_jax
        pass


def _after_fork_in_child() -> None:
    """The parent's writer thread is not in the child, and its lock may be held: start afresh
    (lines the parent had queued are the parent's to write)."""
    for emitter in list(_live):
        emitter._reset()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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

    def divergence(self, div: Divergence) -> None:
        """A divergence between ranks as a WARNING log record, in the compile span's trace."""
        self._logger.emit(LogRecord(
            timestamp=int(div.detected * 1e9),
            context=link_context(div.link),
            severity_number=SeverityNumber.WARN,
            severity_text=SeverityNumber.WARN.name,
            body=f"{EVENT_DIVERGENCE} {div.function}: {div.kind.value}: {div.text}",
            attributes={Attr.EVENT_NAME: EVENT_DIVERGENCE, **divergence_attributes(div)},
        ))
