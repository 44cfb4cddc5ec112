"""Where each thread is, said by the code that goes there: otel_jax's own calls into JAX,
and calls into the application's code.

At the process's exit a daemon thread still inside C++ when the interpreter tears down
aborts the process (a compile, a computation, a hash of a program): Python ends such a
thread where it stands, and the unwinding that ends it cannot cross JAX's C++. What a
thread's Python stack shows cannot say whether it is there (a thread blocked in C++ has
no Python frame of JAX's; one back in otel_jax's code after the application's returned
may still be in JAX's C++ for otel_jax's own work). So every call otel_jax makes into
JAX or jaxlib goes through :func:`jax_call` (``_capture/_jax``'s entry points), and every
call into the application's code on otel_jax's threads (its span processors, exporters,
log handlers, metric readers, reached through the emitters) goes through
:data:`THEIRS`: each pushes a mark on its thread's stack of marks and pops it on its way
out, however it leaves. The exit (``_pipeline._background.end_threads_at_exit``) reads
the marks: a thread inside otel_jax's own JAX call is waited for until it returns, one
inside the application's code until that code ends, as Python waits for the
application's own threads.

Once the exit has stopped waiting (:func:`close`), a call into JAX that one of
otel_jax's own daemon threads would start then parks that thread instead, outside any
C++, where the interpreter's teardown ends it harmlessly.

A mark costs two list operations; a thread with none holds no entry.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from enum import Enum
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["JAX", "THEIRS", "Mark", "close", "jax_call", "marks"]


class Mark(str, Enum):
    """What a thread is inside of."""

    #: otel_jax's own call into JAX or jaxlib: short, waited for until it returns.
    JAX = "jax"
    #: The application's code (a processor, exporter, handler): waited for to its end.
    APPLICATION = "application"


#: Each thread's marks, outermost first, by ``threading.get_ident()``; a thread whose
#: stack of marks is empty has no entry. Read from any thread (one dict look-up, a copy).
_MARKS: dict[int, list[Mark]] = {}
#: The names of otel_jax's own threads begin so (``_background.start_thread``).
OURS_PREFIX = "otel_jax-"
#: Set once the exit has stopped waiting: see :func:`close`.
_closed = False
#: What a parked thread waits on (set by :func:`reopen`).
_gate = threading.Event()

F = TypeVar("F", bound=Callable[..., Any])


class _Bracket:
    """``with`` it: this thread is inside ``mark`` until the block leaves."""

    __slots__ = ("mark",)

    def __init__(self, mark: Mark) -> None:
        self.mark = mark

    def __enter__(self) -> None:
        if _closed and self.mark is Mark.JAX:
            _park_if_daemon()
        ident = threading.get_ident()
        stack = _MARKS.get(ident)
        if stack is None:
            _MARKS[ident] = stack = []
        stack.append(self.mark)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        ident = threading.get_ident()
        stack = _MARKS.get(ident)
        if stack:
            stack.pop()
            if not stack:
                del _MARKS[ident]


JAX = _Bracket(Mark.JAX)
THEIRS = _Bracket(Mark.APPLICATION)


def jax_call(fn: F) -> F:
    """``fn`` (an entry point of ``_capture/_jax`` that calls into JAX) inside :data:`JAX`."""
    @functools.wraps(fn)
    def bracketed(*args: Any, **kwargs: Any) -> Any:
        with JAX:
            return fn(*args, **kwargs)
    return bracketed  # type: ignore[return-value]


def marks() -> dict[int, tuple[Mark, ...]]:
    """Every thread's marks now, outermost first, by thread ident."""
    return {ident: tuple(stack) for ident, stack in list(_MARKS.items()) if stack}


def close() -> None:
    """The exit has stopped waiting for threads: from now on a daemon thread of otel_jax's
    that would start a call into JAX parks instead (it would still be inside it when the
    interpreter tears down). The exiting thread, and every other thread, go on."""
    global _closed, _gate
    _gate = threading.Event()
    _closed = True


def reopen() -> None:
    """Undo :func:`close` (a forked child, whose exit is its own; tests)."""
    global _closed
    _closed = False
    _gate.set()


def _park_if_daemon() -> None:
    # otel_jax's own threads only: another thread (the program's, the SDK's) may be
    # joined by an exit handler that runs later, which must not wait on a parked one
    thread = threading.current_thread()
    if thread.daemon and thread.name.startswith(OURS_PREFIX):
        _gate.wait()  # in C, outside JAX: the teardown ends it harmlessly


def _after_fork() -> None:
    """In a forked child only the forking thread goes on: the others' marks are gone."""
    ident = threading.get_ident()
    for other in [i for i in _MARKS if i != ident]:
        _MARKS.pop(other, None)
    reopen()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
