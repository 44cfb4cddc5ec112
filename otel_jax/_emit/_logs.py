"""Record -> one log line, rendered off the compiling thread (the OpenTelemetry log record:
:mod:`._otel_logs`).

otel_jax never calls ``structlog.configure`` nor touches the ``logging``
module's handlers: the application's own logging stays exactly as it set it
up. Applications that want their own structlog events correlated with traces
add ``add_otel_context`` to their processor chain.

Two outputs: by default a JSON line per event, rendered by a private structlog
processor chain (level, timestamp, ``JSONRenderer``) and written to a stream;
with ``log_output="structlog"`` the events go through the application's own
structlog configuration (``structlog.get_logger("otel_jax")``: its processors,
its renderer, its ``logging`` handlers when it bridges to ``structlog.stdlib``),
inside the ``contextvars`` context of the thread that compiled.

Logging never blocks the user's call. The compiling thread only hands each
line's level and fields to a bounded queue; one daemon thread renders and
writes them. A stream that does not keep up (stderr piped to a process that
stopped reading) fills the queue, and further lines are dropped and counted:
one warning says so, and the count is repeated at exit. The queue has the bound of
the compiles waiting for the emitting thread, its own count: a stream that blocks costs
log lines, never a compile's spans or metrics. At exit the writers end by one deadline,
``EXIT_FLUSH_S`` away, what is left then said with the rest; ``uninstall()`` waits at
most ``UNINSTALL_FLUSH_S``, never for the stream itself.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import io
import math
import os
import select
import stat
import sys
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, MutableMapping
from datetime import datetime, timezone
from typing import IO, Any, Final, Literal, get_args

from opentelemetry import trace

from .._core import _vocab
from .._core._exitwrite import exiting, write_fd_within, write_within
from .._core._failopen import FailOpen, Topic, WarnKey, writable_now
from .._core._terminal import json_printable
from .._core._vocab import (
    EVENT_COMPILE,
    EVENT_DIVERGENCE,
    EVENT_HAZARD,
    EVENT_STORM,
    LOGGER_NAME,
    Field,
)
from .._pipeline._background import QUEUE_CAPACITY, Waker, ends_at_exit, start_thread
from .._pipeline._record import (
    CompileRecord,
    Divergence,
    SpanLink,
    Storm,
    divergence_fields,
    hazard_fields,
    log_fields,
    storm_fields,
)
from ._console import LogFormat, is_terminal, render_console, wants_colors, wants_console

#: ``install(log_output=...)``'s named outputs (any other value is a text stream or None):
#: ``"stderr"`` the JSON lines on the process's stderr, ``"structlog"`` the application's
#: own structlog configuration.
LogOutput = Literal["stderr", "structlog"]
LOG_OUTPUTS: Final[tuple[str, ...]] = get_args(LogOutput)
STDERR: Final = "stderr"
STRUCTLOG: Final = "structlog"

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_LEVEL_NAMES = {v: k for k, v in _LEVELS.items()}
#: Lines waiting for the writer thread; past this, lines are dropped and counted.
QUEUE_SIZE = QUEUE_CAPACITY
#: How often the writer thread looks for queued lines (it is not woken per line).
_WRITER_POLL_S = 0.05
#: After this long without a line the writer sleeps until the next line wakes it.
_WRITER_IDLE_S = 30.0
#: How long the process's exit lets the writers write queued lines, at most.
EXIT_FLUSH_S = 1.0
#: How long ``uninstall()`` waits, at most.
UNINSTALL_FLUSH_S = 2.0
#: What a dropped line was, by its event, for the words that say so (else ``warning``).
_WHAT = {EVENT_COMPILE: "compile", EVENT_HAZARD: "hazard", _vocab.EVENT_STEP: "step"}
#: Why lines were dropped, in those words.
_FULL = "the log output did not keep up: its queue was full"
_CLOSED = "they came after uninstall() closed the log output"
_WRITER_ENDED = "the writer thread ended with them"
_NO_WRITER = "no thread could be started to write them"
_UNREAD = "at exit, the output took nothing more within the exit's bound"
_LATE = "at exit, the exit's bound passed before they were written"
#: Compiles whose ``contextvars`` context is kept for a later divergence report of the
#: same compile (reported within ``divergence_timeout_s``, from another thread).
_KEPT_CONTEXTS = 1024

#: A line's fields, or what builds them on the writer thread (from a frozen record).
_Fields = dict[str, Any] | Callable[[], dict[str, Any]]
#: (time, level, event, fields, the compiling thread's context or None)
_Line = tuple[float, int, str, _Fields, contextvars.Context | None]


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


def format_event_time(logger: Any, method_name: str,
                      event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: the event's own time (epoch seconds under ``timestamp``) as
    ISO-8601 UTC with microseconds.

    structlog's ``TimeStamper`` stamps the moment of rendering; otel_jax renders on
    its writer thread, later than the compile, so the compiling thread's time
    travels with the line and is formatted here.
    """
    stamp = event_dict.get(Field.TIMESTAMP)
    if isinstance(stamp, float):
        event_dict[Field.TIMESTAMP] = datetime.fromtimestamp(stamp, timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ")
    return event_dict


_Processor = Callable[[Any, str, MutableMapping[str, Any]], Any]


@functools.cache
def _json_chain() -> tuple[_Processor, ...]:
    """The default lines' processor chain, private to otel_jax (built on first use, so
    that ``import otel_jax`` does not import structlog)."""
    import structlog

    return (structlog.processors.add_log_level, format_event_time,
            structlog.processors.JSONRenderer(default=str, ensure_ascii=False))


def render(stamp: float, level: int, event: str, fields: dict[str, Any]) -> str:
    """One JSON line, the envelope first so that it reads left to right.

    The envelope's keys are placed first (the level empty, the time as a number)
    and the processors fill them in place: a dict keeps a key's position when its
    value is replaced.
    """
    event_dict: Any = {Field.TIMESTAMP: float(stamp), Field.LEVEL: "", Field.EVENT: event,
                       Field.LOGGER: LOGGER_NAME, **fields}
    method = _LEVEL_NAMES.get(level, "info")
    for processor in _json_chain():
        event_dict = processor(None, method, event_dict)
    return json_printable(str(event_dict)) + "\n"


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


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a descriptor someone made non-blocking: wait here
            select.select([], [fd], [], 1.0)
            continue
        view = view[written:]


_live: weakref.WeakSet[LogEmitter] = weakref.WeakSet()


class LogEmitter:
    """Compile, storm and divergence events as log lines, written off the compiling thread.

    Eager op-by-op compiles are logged at DEBUG, so that the default INFO
    output shows the user's own functions; spans and metrics carry them all.

    Lines are handed to a daemon thread, never written on the compiling thread,
    so an output that blocks cannot stop the training loop (see the module doc).
    ``flush(timeout)`` waits, boundedly, until queued lines are written.
    Subclasses say how a batch of lines is written (``_write``).
    """

    #: How the warnings name the output, and the writer thread's name.
    _output_name = "log output"
    _thread_name = "otel_jax-log"
    _immediate = False

    def __init__(self, level: str = "info", *, failopen: FailOpen | None = None,
                 queue_size: int | None = None) -> None:
        self._min_level = _LEVELS.get(level, 20)
        self._failopen = failopen if failopen is not None else FailOpen()
        self._queue_size = max(1, int(QUEUE_SIZE if queue_size is None else queue_size))
        self._reset()
        _live.add(self)
        if not self._immediate:
            # Started now, at install(), not at the first line: a line first written once
            # the main thread has finished (a worker thread of the program's that compiles
            # while the main thread exits) would find threads refused (Python 3.12.0-1),
            # and the exit would find no writer for it.
            with self._cond:
                self._writer_locked(idle=True)

    def _reset(self) -> None:
        """A fresh queue, lock and (not yet started) thread: at creation and in a forked child."""
        self._queue: deque[_Line] = deque()
        self._cond = threading.Condition(threading.RLock())
        self._waker = Waker()  # the writer's wait
        self._pending = 0  # lines queued or being written
        self._thread: threading.Thread | None = None
        self._sleeping = False  # the writer waits without a timeout: a line must wake it
        self._closed = False
        #: The process is exiting: the writer ends by this time (``end_by``) and no new
        #: one starts.
        self._end_deadline: float | None = None
        self._pid = os.getpid()
        ends_at_exit(self)
        #: Lines dropped: the queue was full (the output did not keep up) or writing failed.
        self.dropped = 0
        #: The same lines by (what: ``compile``, ``hazard``…, why), for the exit's words.
        self.drops: Counter[tuple[str, str]] = Counter()

    # --- the compiling thread's side -------------------------------------------------

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        level = 10 if record.eager_op else 20
        if level >= self._min_level:
            # The record is frozen: its fields are built on the writer thread.
            self._emit(level, EVENT_COMPILE, functools.partial(log_fields, record, link))
        self._hazards(record, link, None)

    def _hazards(self, record: CompileRecord, link: SpanLink | None,
                 context: contextvars.Context | None) -> None:
        """A ``jax.compile.hazard`` line per hazard: a WARNING, or INFO for a note."""
        for hazard in record.hazards:
            level = 30 if hazard.warn else 20
            if level >= self._min_level:
                self._emit(level, EVENT_HAZARD,
                           functools.partial(hazard_fields, record, hazard, link), context)

    def storm(self, storm: Storm) -> None:
        """The recompile-storm WARNING: function, recompile count, causes so far."""
        if 30 >= self._min_level:
            self._emit(30, EVENT_STORM, storm_fields(storm))

    def divergence(self, div: Divergence) -> None:
        """The WARNING of a divergence between ranks."""
        if 30 >= self._min_level:
            self._emit(30, EVENT_DIVERGENCE, divergence_fields(div))

    def step(self, fields: dict[str, Any]) -> None:
        """One ``jax.step`` INFO line (a step that compiled, or a sampled one: the
        choice is ``otel_jax._pipeline._steps.StepLog``'s), written like the others."""
        if 20 >= self._min_level:
            self._emit(20, _vocab.EVENT_STEP, fields, self._step_context())

    def on_stderr(self, level: int) -> bool:
        """Whether a line of ``level`` goes to ``sys.stderr`` now (``_emitter.StderrLines``):
        not for an output of the application's own."""
        return False

    def on_terminal(self) -> bool:
        """Whether the lines go to a terminal (``_emitter.StderrLines``)."""
        return False

    def _step_context(self) -> contextvars.Context | None:
        """The context a step line is written in (only the structlog output uses one)."""
        return None

    def _emit(self, level: int, event: str, fields: _Fields,
              context: contextvars.Context | None = None) -> None:
        line = (time.time(), level, event, fields, context)
        if self._immediate:
            self._write([line])
            return
        dropped = 0
        closed = False
        with self._cond:
            thread = self._thread
            late = (self._end_deadline is not None and self._pid == os.getpid()
                    and (thread is None or not thread.is_alive()))
        if late:
            # A compile made at exit once the writer ended (an exit handler of the
            # program's that ran after otel_jax's): written here, within the exit's bound.
            self._write([line])
            return
        with self._cond:
            if self._closed or len(self._queue) >= self._queue_size:
                closed = self._closed
                self._drop_locked([line], _CLOSED if closed else _FULL)
                dropped = self.dropped
            else:
                self._queue.append(line)
                self._pending += 1
                # The writer wakes up on its own every _WRITER_POLL_S: waking it
                # here would hand it the GIL inside the user's jit call. Only a
                # queue filling up is worth an early wake-up.
                if len(self._queue) * 2 >= self._queue_size or self._sleeping:
                    self._waker.wake()
                if self._thread is None:  # a writer that ends says so (``_serve``)
                    self._writer_locked()
        if closed:
            self._warn_closed()
        elif dropped:
            self._warn_dropped(dropped)

    def _warn_closed(self) -> None:
        """A line that came after ``uninstall()`` closed this output (a compile emitted
        late, on the background thread): not a sign of a slow output."""
        if writable_now(sys.stderr):
            self._failopen.warn_once(
                Topic.LOG_CLOSED,
                f"otel_jax: a compile log line came after uninstall() closed the "
                f"{self._output_name}; it is dropped (lines of compiles made before "
                "uninstall() still being emitted then are dropped the same way); the jit "
                "calls are unaffected.")

    def _warn_dropped(self, dropped: int) -> None:
        # Python's warnings go to stderr, which may be the very stream that is
        # full: warn only when that cannot block (else at a later drop).
        if writable_now(sys.stderr):
            self._failopen.warn_once(
                Topic.LOG_DROPPED,
                f"otel_jax: {self._queue_size} log lines were waiting to be written to the "
                f"{self._output_name}{self._described()} when another came: "
                f"{dropped} log line(s) dropped so far, and lines are dropped "
                "while the queue stays full; the jit calls are unaffected. The count of "
                "dropped lines is said again when the process exits.")

    def _described(self) -> str:
        """What the output is, as far as can be told (``, a pipe``), for the warning."""
        return ""

    # --- the writer thread ----------------------------------------------------------

    def _writer_locked(self, idle: bool = False) -> bool:
        """Whether a writer thread of this process's serves the queue, started when none
        does (under ``_cond``; with ``idle``, also with nothing queued). A writer that is
        gone (its thread ended by an error, or never started: threads refused) took its
        batch with it: those lines are counted as dropped, so that what is waited for is
        only what can still be written."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            return True
        lost = self._pending - len(self._queue)  # taken by a writer that is not there
        if lost > 0:
            self._pending -= lost
            self.dropped += lost
            self.drops["log", _WRITER_ENDED] += lost
        self._thread = None
        if (not self._queue and not idle) or self._end_deadline is not None:
            return False
        try:
            self._thread = start_thread(self._serve, self._thread_name)
        except Exception:  # no thread now (resources, shutdown): a later line tries again
            return False
        return True

    def _serve(self) -> None:
        """The writer thread. Ended by an error as well as by close(): no writer any more,
        which a flush or the next line sees (``_writer_locked``)."""
        try:
            idle_since = time.monotonic()
            while True:
                with self._cond:
                    while not self._queue and not self._closed and self._end_deadline is None:
                        if time.monotonic() - idle_since >= _WRITER_IDLE_S:
                            # No line for a while: asleep until the next one wakes it (one
                            # wake-up per burst of lines), so an idle process has no
                            # thread waking up.
                            self._sleeping = True
                            self._waker.wait(None, self._cond)
                            self._sleeping = False
                            idle_since = time.monotonic()
                        else:
                            self._waker.wait(_WRITER_POLL_S, self._cond)
                    if self._queue and self._end_deadline is not None \
                            and time.monotonic() >= self._end_deadline:
                        # The exit's bound passed: what is left is dropped, counted (an output
                        # that blocks, or lines that keep coming).
                        self._drop_queued_locked()
                    if not self._queue:
                        return  # closed or ending, and everything written
                    batch = [self._queue.popleft() for _ in range(min(len(self._queue), 64))]
                written = False
                try:
                    self._write(batch)
                    written = True
                finally:
                    idle_since = time.monotonic()
                    with self._cond:
                        self._pending -= len(batch)
                        if not written:  # the writer ends with them (below)
                            self._drop_locked(batch, _WRITER_ENDED)
                        self._cond.notify_all()
        finally:
            with self._cond:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _write(self, batch: list[_Line]) -> None:
        raise NotImplementedError

    def _fields(self, fields: _Fields) -> dict[str, Any] | None:
        """A line's fields, built now when the compiling thread left them to build."""
        if callable(fields):
            # None: an internal error, counted and warned about once
            return self._failopen.call(f"{self._output_name} fields", fields, None)
        return fields

    def _count_dropped(self, lines: list[_Line], why: str) -> None:
        with self._cond:
            self._drop_locked(lines, why)

    def _drop_locked(self, lines: list[_Line], why: str) -> None:
        self.dropped += len(lines)
        for line in lines:
            self.drops[_WHAT.get(line[2], "warning"), why] += 1

    def _drop_queued_locked(self) -> None:
        """The exit's bound passed: the lines still queued are dropped, counted."""
        self._pending -= len(self._queue)
        self._drop_locked(list(self._queue), _LATE)
        self._queue.clear()
        self._cond.notify_all()

    # --- flushing ------------------------------------------------------------------------

    def flush(self, timeout: float = UNINSTALL_FLUSH_S) -> bool:
        """Wait until every queued line is written, for at most ``timeout`` seconds.

        Returns whether everything was written; never raises, never waits longer. Returns
        at once when no writer can write what is left (none is there, as in a forked
        child whose writer could not be started, and none can be started now): nothing
        more can arrive.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            if self._pid != os.getpid():
                return not self._queue
            if self._thread is threading.current_thread():
                return not self._pending  # the writer cannot wait for itself (a compile
                # in a handler it called)
            self._waker.wake()  # the writer need not wait for its next poll
            while self._pending:
                if not self._writer_locked():
                    return not self._pending
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def unwritable(self) -> int:
        """Lines queued that no writer is there to write (none could be started)."""
        with self._cond:
            thread = self._thread
            return 0 if thread is not None and thread.is_alive() else len(self._queue)

    def end_by(self, deadline: float) -> threading.Thread | None:
        """At the process's exit (``_background.Ends``): the writer writes what is queued
        until ``deadline`` and ends; no new one starts after this one, which is started
        when none serves the lines queued. The writer to wait for."""
        with self._cond:
            if self._pid != os.getpid():
                return None
            if self._end_deadline is None:
                if self._pending:
                    self._writer_locked()
                self._end_deadline = deadline
            self._waker.wake()
            thread = self._thread
            return thread if thread is not None and thread.is_alive() else None

    def close(self, timeout: float = UNINSTALL_FLUSH_S) -> bool:
        """Flush (boundedly), then let the writer thread end; later lines are dropped."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._waker.wake()
        return done


class JsonLogEmitter(LogEmitter):
    """One ``jax.compile`` JSON line per compile on a stream (stderr by default), or a
    console line (:mod:`._console`) where ``log_format`` says so for that stream.

    Rendered by otel_jax's own structlog processor chain (see ``render``), whatever
    the application configured. An in-memory ``io.StringIO`` cannot block and is
    written at once.
    """

    _output_name = "JSON log stream"
    _thread_name = "otel_jax-json-log"

    def __init__(self, stream: IO[str] | None = None, level: str = "info", *,
                 failopen: FailOpen | None = None, queue_size: int | None = None,
                 log_format: LogFormat = "json") -> None:
        # Its modules imported now, at install(): a line first written at exit would
        # import them during interpreter shutdown (which also turns an interrupted
        # program's exit status from the SIGINT it died of into 1).
        _json_chain()
        self._stream = stream  # None: sys.stderr, resolved at write time
        # Decided once, at install(): a person at a terminal reads console lines.
        shown = stream if stream is not None else sys.stderr
        self._console = wants_console(log_format, shown)
        self._colors = self._console and wants_colors(shown)
        self._terminal = is_terminal(shown)
        self._immediate = isinstance(stream, io.StringIO)
        super().__init__(level, failopen=failopen, queue_size=queue_size)

    def on_stderr(self, level: int) -> bool:
        return (level >= self._min_level and not self._closed
                and (self._stream if self._stream is not None else sys.stderr) is sys.stderr)

    def on_terminal(self) -> bool:
        return self._terminal

    def _described(self) -> str:
        stream = self._stream if self._stream is not None else sys.stderr
        name = "stderr" if stream is sys.stderr else None
        try:
            mode = os.fstat(stream.fileno()).st_mode
        except Exception:
            return f" ({name})" if name else ""
        kind = ("a pipe (is its reader keeping up?)" if stat.S_ISFIFO(mode)
                else "a file (a slow or full disk?)" if stat.S_ISREG(mode)
                else "a terminal" if stat.S_ISCHR(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a stream")
        return f" ({name}, {kind})" if name else f" ({kind})"

    def _write(self, batch: list[_Line]) -> None:
        try:
            text = "".join(map(self._render, batch))
            stream = self._stream if self._stream is not None else sys.stderr
            fd = _process_fd(stream)
            end = self._end_deadline
            if fd is not None and end is not None:
                # at exit: written within the exit's bound, whatever the reader does
                if not write_within(stream, text, end - time.monotonic()):
                    self._count_dropped(batch, _UNREAD)
            elif fd is not None:
                encoding = getattr(stream, "encoding", None) or "utf-8"
                data = text.encode(encoding, "backslashreplace")
                # Waits for a reader as long as it takes, until the process exits: then
                # within the exit's one deadline (a pipe nobody reads any more).
                written = write_fd_within(fd, data, math.inf, exit_only=True)
                if written is None:
                    _write_fd(fd, data)
                elif not written:
                    if not exiting():
                        raise BrokenPipeError  # not a wait: the reader is gone
                    self._count_dropped(batch, _UNREAD)
            else:
                stream.write(text)
                flush = getattr(stream, "flush", None)
                if flush is not None:
                    flush()
        except Exception as exc:  # a closed or broken stream: count the lines, warn once
            self._count_dropped(batch, f"writing them failed ({type(exc).__name__})")
            if writable_now(sys.stderr):
                self._failopen.warn_once(
                    WarnKey(Topic.LOG_WRITE, type(exc).__name__),
                    f"otel_jax: writing the JSON log failed ({type(exc).__name__}); "
                    f"{len(batch)} line(s) dropped; the jit calls are unaffected.")

    def _render(self, line: _Line) -> str:
        stamp, level, event, fields, _ = line
        built = self._fields(fields)
        if built is None:
            return ""
        if self._console:
            return render_console(stamp, _LEVEL_NAMES.get(level, "info"), event, built,
                                  colors=self._colors)
        return render(stamp, level, event, built)


def flush_all(timeout: float = UNINSTALL_FLUSH_S) -> bool:
    """Flush every live log emitter, all of them within ``timeout`` seconds together."""
    deadline = time.monotonic() + timeout
    done = True
    for emitter in list(_live):
        done = emitter.flush(max(0.0, deadline - time.monotonic())) and done
    return done


def _at_exit() -> None:
    """Bounded: the writers write what is queued until one deadline and end (what is left
    then is dropped), then the words say what was dropped and why."""
    try:
        deadline = time.monotonic() + EXIT_FLUSH_S
        writers = [writer for emitter in list(_live)
                   if (writer := emitter.end_by(deadline)) is not None]
        for writer in writers:
            writer.join(max(0.0, deadline - time.monotonic()))
        drops: Counter[tuple[str, str]] = Counter()
        for emitter in list(_live):
            if emitter._pid == os.getpid():
                with emitter._cond:
                    if not (unwritable := emitter.unwritable()):
                        emitter._drop_queued_locked()  # a writer past the bound, in a write
                    drops.update(emitter.drops)
                drops["log", _NO_WRITER] += unwritable
        said = dropped_words(drops)
        if said:  # bounded: stderr may be a pipe nobody reads any more
            write_within(sys.stderr, f"otel_jax: log lines were dropped in this process: "
                                     f"{said}.\n")
    except Exception:  # exit must never fail or hang because of otel_jax
        pass


def dropped_words(drops: Counter[tuple[str, str]]) -> str:
    """``2 hazard lines (your structlog configuration raised ValueError); 1 compile line
    (the log output did not keep up)``: what was dropped and why, or ``""`` for nothing."""
    by_why: dict[str, list[str]] = {}
    for (what, why), count in sorted(drops.items()):
        if count > 0:
            by_why.setdefault(why, []).append(f"{count} {what} line{'' if count == 1 else 's'}")
    return "; ".join(f"{' and '.join(lines)} ({why})" for why, lines in by_why.items())


def _after_fork_in_child() -> None:
    """The parent's writer thread is not in the child, and its lock may be held: start afresh
    (lines the parent had queued are the parent's to write)."""
    for emitter in list(_live):
        emitter._reset()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
