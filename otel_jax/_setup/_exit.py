"""The end of a process forked after ``install()``: its last compiles are not lost.

A child started by ``multiprocessing`` with the fork start method (``Process``, ``Pool``,
``ProcessPoolExecutor`` workers) ends through ``os._exit`` once its target returns (or by
SIGTERM, from ``terminate()``: a ``Pool`` left by its ``with`` statement):
``atexit`` never runs there, so compiles still waiting for otel_jax's background thread,
and spans or log records still in a batch processor's queue, would die with it. The one
hook that runs there is ``multiprocessing``'s own: its finalizers, run by the child's exit
path (``util._exit_function``), and a SIGTERM handler where the signal had its default
action. Each forked child registers them, through the after-fork
callbacks ``multiprocessing`` runs in every child it starts (after it cleared the parent's
finalizers). A child that calls ``os._exit`` itself, or ``os.fork()`` without
``multiprocessing``, may still lose what was queued: nothing runs at such an exit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The longest a forked child's exit waits for its providers to export, all side by side.
CHILD_EXPORT_S = 3.0


class _Token:
    """What ``multiprocessing``'s after-fork registry holds (weakly) for otel_jax."""


_TOKEN = _Token()
_child_flush: Callable[[], None] | None = None
_registered = False


def flush_in_forked_children(flush: Callable[[], None]) -> None:
    """Have ``flush`` run at the exit of every child ``multiprocessing`` forks from now on
    (also from children of children); never raises."""
    global _child_flush, _registered
    _child_flush = flush
    if _registered:
        return
    try:
        # Imported now, at install(): nothing may be imported at a child's exit (the SDK's
        # modules start thread pools as they load, refused there from Python 3.12).
        from multiprocessing import util

        from .._emit import _bounded, _export  # noqa: F401

        util.register_after_fork(_TOKEN, _in_child)
        _registered = True
    except Exception:  # no multiprocessing: no forked workers of its kind either
        pass


def _in_child(_token: _Token) -> None:
    """In a child ``multiprocessing`` just forked: flush at its exit (first among the
    finalizers of priority 0 that came before it, before its queues' feeder threads end),
    and when ``terminate()`` ends it (SIGTERM: a ``Pool`` left by its ``with`` statement)."""
    global _state
    _state = _NOT_YET
    try:
        from multiprocessing import util

        util.Finalize(None, _at_child_exit, exitpriority=0)
    except Exception:
        pass
    _flush_on_sigterm()


#: Where the child's exit flush is: not yet, running, done; and whether SIGTERM came
#: while it ran (then the child dies of it once the flush ended).
_NOT_YET, _RUNNING, _DONE = 0, 1, 2
_state = _NOT_YET
_terminate_after = False


def _at_child_exit() -> None:
    global _state
    flush = _child_flush
    if flush is None or _state != _NOT_YET:
        return
    _state = _RUNNING
    try:
        flush()
    except Exception:  # the child's exit must go on
        pass
    finally:
        _state = _DONE
        if _terminate_after:
            _die_of_sigterm()


def _flush_on_sigterm() -> None:
    """Where the child's SIGTERM has its default action (nothing runs, the child dies):
    flush first, boundedly, then die of the signal as before. A handler the program sets
    in the child replaces this one."""
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (AttributeError, OSError, ValueError):  # not the main thread, no SIGTERM
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminate_after
    if _state == _RUNNING:
        # The exit's own flush was under way (a Pool's workers end as terminate() comes):
        # it ends first, within its bound, then the child dies of the signal.
        _terminate_after = True
        return
    try:
        _at_child_exit()
    finally:
        _die_of_sigterm()


def _die_of_sigterm() -> None:
    import os
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def flush_providers(*providers: Any, seconds: float = CHILD_EXPORT_S) -> None:
    """``force_flush`` each provider, side by side, within ``seconds`` in all: what their
    batch processors and readers hold is exported before the process ends."""
    # imported at install(): see flush_in_forked_children
    from .._emit._bounded import run_all_bounded

    calls = [(f, (max(1, int(seconds * 1000)),)) for f in
             (getattr(p, "force_flush", None) for p in providers if p is not None)
             if f is not None]
    if not calls:
        return
    run_all_bounded(calls, time.monotonic() + seconds, name="otel_jax-child-flush")
