"""The log output ``install(log_output="structlog")``: otel_jax's events through the
application's own structlog configuration, each inside the compiling thread's
``contextvars`` context (the JSON output and the writer thread: :mod:`._logs`)."""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
from collections import OrderedDict

from .._core._failopen import FailOpen, Topic, WarnKey, their_frame, writable_now
from .._core._text import safe_repr
from .._core._vocab import EVENT_COMPILE, EVENT_DIVERGENCE, EVENT_STORM, LOGGER_NAME, Field
from .._pipeline._record import (
    CompileRecord,
    Divergence,
    SpanLink,
    Storm,
    divergence_fields,
    log_fields,
    storm_fields,
)
from ._logs import _KEPT_CONTEXTS, _LEVEL_NAMES, LogEmitter, _Line


class StructlogEmitter(LogEmitter):
    """The same events through the application's own structlog configuration.

    Each event is one call of ``structlog.get_logger("otel_jax")`` at its level
    (``info("jax.compile", function=..., ...)``), made on the writer thread inside
    a copy of the compiling thread's ``contextvars`` context taken at the compile:
    the application's ``merge_contextvars`` (and any processor reading context
    variables) sees what that thread had bound, not the writer thread's nothing.
    Copying the context is O(1) on the compiling thread; the application's
    processors, renderer and handlers all run on the writer thread.

    A divergence between ranks is detected later, on another thread: it is
    rendered in the context of the compile it is about (kept for the last
    ``_KEPT_CONTEXTS`` compiles of user functions).

    An application processor or handler that raises costs one warning and that
    line; never the user's call.
    """

    #: The user's code this emitter calls: its exceptions are named as theirs.
    reaches = "structlog processor"

    _output_name = "application's structlog output"
    _thread_name = "otel_jax-structlog"

    def __init__(self, level: str = "info", *, failopen: FailOpen | None = None,
                 queue_size: int | None = None) -> None:
        import structlog

        # A lazy proxy: the configuration is read when a line is logged, so an
        # application may configure structlog after install().
        self._logger = structlog.get_logger(LOGGER_NAME)
        self._contexts: OrderedDict[tuple[str, int, str | None], contextvars.Context] = \
            OrderedDict()
        super().__init__(level, failopen=failopen, queue_size=queue_size)

    def _reset(self) -> None:
        super()._reset()
        # In a forked child the lock may have been held by a thread that is not there.
        self._contexts_lock = threading.RLock()

    @staticmethod
    def _key(function: str, count: int, link: SpanLink | None) -> tuple[str, int, str | None]:
        return (function, count, link.span_id if link is not None else None)

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        context = contextvars.copy_context()
        if not record.eager_op:  # only user functions are compared across ranks
            with self._contexts_lock:
                contexts = self._contexts
                contexts[self._key(record.function.qualname, record.count, link)] = context
                if len(contexts) > _KEPT_CONTEXTS:
                    contexts.popitem(last=False)
        level = 10 if record.eager_op else 20
        if level >= self._min_level:
            self._emit(level, EVENT_COMPILE, functools.partial(log_fields, record, link),
                       context)
        self._hazards(record, link, context)

    def storm(self, storm: Storm) -> None:
        if 30 >= self._min_level:
            self._emit(30, EVENT_STORM, storm_fields(storm), contextvars.copy_context())

    def divergence(self, div: Divergence) -> None:
        if 30 >= self._min_level:
            with self._contexts_lock:
                context = self._contexts.get(self._key(div.function, div.count, div.link))
            self._emit(30, EVENT_DIVERGENCE, divergence_fields(div),
                       context if context is not None else contextvars.copy_context())

    def _step_context(self) -> contextvars.Context | None:
        return contextvars.copy_context()

    def _write(self, batch: list[_Line]) -> None:
        for line in batch:
            try:
                self._send(line)
            except Exception as exc:  # the application's processors or handlers
                self._count_dropped([line], f"your structlog configuration raised "
                                            f"{type(exc).__name__}")
                if writable_now(sys.stderr):
                    self._failopen.warn_once(
                        WarnKey(Topic.STRUCTLOG_LINE, type(exc).__name__),
                        f"otel_jax: your structlog configuration raised {type(exc).__name__} "
                        f"({safe_repr(str(exc), 200)}) in a processor or handler, on a {line[2]} "
                        "line; that line is dropped, later lines are still sent, and the "
                        "jit calls are unaffected.", at=their_frame(exc))

    def _send(self, line: _Line) -> None:
        _, level, event, fields, context = line
        built = self._fields(fields)
        if built is None:
            return
        method = getattr(self._logger, _LEVEL_NAMES.get(level, "info"))
        # ``logger`` names otel_jax where the application's chain does not add the
        # logger's name itself (structlog.stdlib.add_logger_name writes the same).
        kwargs = {Field.LOGGER: LOGGER_NAME, **built}
        # Run in a copy: what the application's processors bind while it runs stays
        # with this line, and a kept context also serves a later divergence line.
        (context.copy() if context is not None else contextvars.Context()).run(
            method, event, **kwargs)
