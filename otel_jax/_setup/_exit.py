"""The end of a ``multiprocessing`` child of a process that installed otel_jax: its last
compiles are not lost.

A child started by ``multiprocessing`` with the fork start method (``Process``, ``Pool``,
``ProcessPoolExecutor`` workers) ends through ``os._exit`` once its target returns (or by
SIGTERM, from ``terminate()``: a ``Pool`` left by its ``with`` statement):
``atexit`` never runs there, so compiles still waiting for otel_jax's background thread,
and spans or log records still in a batch processor's queue, would die with it. The one
hook that runs there is ``multiprocessing``'s own: its finalizers, run by the child's exit
path (``util._exit_function``); in a ``Pool``'s worker, also a flush after each task
that compiled, before its result is sent (see ``_flush_after_each_task``). No signal
handler is set: a child that ``terminate()`` ends dies of SIGTERM as the program left it,
and what it still held is lost. Each forked child registers them, through the after-fork
callbacks ``multiprocessing`` runs in every child it starts (after it cleared the parent's
finalizers). A spawned child exits through ``sys.exit`` (``atexit`` runs) unless
``terminate()`` ends it: its Pool worker flushes after each task too
(``watch_spawned``). A child that calls ``os._exit`` itself, or ``os.fork()`` without
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
    """Have ``flush`` run at the exit of every child ``multiprocessing`` starts from now on
    (also from children of children); never raises."""
    global _child_flush
    _child_flush = flush
    try:
        # Imported now, at install(): nothing may be imported at a child's exit (the SDK's
        # modules start thread pools as they load, refused there from Python 3.12).
        from multiprocessing import process

        from .._emit import _bounded, _export  # noqa: F401

        if getattr(process.current_process(), "_inheriting", False):
            # installed while this spawned child is being prepared (its main module
            # imported JAX): it may be about to run a Pool's worker
            watch_spawned()
        else:
            watch_forked()
    except Exception:  # no multiprocessing: no workers of its kind either
        pass


def watch_forked() -> None:
    """Have ``_in_child`` run in every child ``multiprocessing`` forks from this process
    (directly or, in a forkserver, from its server), through the after-fork callbacks it
    runs there before the child's target. ``otel-jax run`` calls this in a child just
    forked from a process that had not installed otel_jax (its workers import JAX in a
    task): ``multiprocessing`` runs those callbacks right after. Never raises."""
    global _registered
    if _registered:
        return
    try:
        from multiprocessing import util

        util.register_after_fork(_TOKEN, _in_child)
        _registered = True
    except Exception:
        pass


_watching = False
#: Puts ``SpawnProcess._after_fork`` back where ``watch_spawned`` replaced it and no
#: spawned ``Process`` came to run in this process (a forked child of a forkserver).
_restore: Callable[[], None] | None = None


def watch_spawned() -> None:
    """In a process ``multiprocessing`` spawned (a ``Process``'s, a forkserver): have
    ``_in_child`` run here, before its ``Process`` runs, and in every child forked from it
    (``watch_forked``); never raises.

    The after-fork callbacks do not run in a spawned child (``SpawnProcess._after_fork``
    does nothing): its ``_after_fork`` is replaced, once; the first call, made by
    ``BaseProcess._bootstrap`` right after the child's ``Process`` became
    ``current_process()`` and before its target runs, puts the original back, runs it,
    then ``_in_child``. ``otel-jax run`` calls this at the start of every process
    ``multiprocessing`` spawns (``_run._bootstrap``, which loads this module from its file
    under its own name, so that ``install()`` finds it later): a worker that first imports
    JAX in a task is watched too."""
    global _watching, _restore
    if _watching:
        return
    try:
        from multiprocessing import context

        watch_forked()
        spawned: Any = getattr(context, "SpawnProcess", None)
        original = vars(spawned).get("_after_fork") if spawned is not None else None
        if original is not None:

            def restore() -> None:
                global _restore
                _restore = None
                setattr(spawned, "_after_fork", original)

            def once() -> None:
                restore()
                original.__func__()
                try:
                    _in_child(_TOKEN)
                except Exception:  # the child's target must still run
                    pass

            spawned._after_fork = staticmethod(once)
            _restore = restore
        _watching = True
    except Exception:
        pass


def _in_child(_token: _Token) -> None:
    """In a child ``multiprocessing`` just forked: flush at its exit (first among the finalizers of
    priority 0 that came before it, before its queues' feeder threads end); in a ``Pool``'s
    worker also after each task, before its result is sent."""
    global _state
    _state = _NOT_YET
    if _restore is not None:
        _restore()
    try:
        from multiprocessing import util

        util.Finalize(None, _at_child_exit, exitpriority=0)
    except Exception:
        pass
    # No signal handler, here or anywhere: a child's SIGTERM (``terminate()``) keeps the
    # action the program gave it, and what it had still queued then is lost.
    _flush_after_each_task()


class _Compiles:
    """The last emitter of install()'s route: counts the compiles emitted (on the
    background thread), so that a worker's task that compiled nothing costs no export."""

    def __init__(self) -> None:
        self.count = 0

    def compile(self, record: Any, link: Any) -> None:
        self.count += 1

    def storm(self, storm: Any) -> None:
        pass

    def divergence(self, divergence: Any) -> None:
        pass


COMPILES = _Compiles()
#: How long a Pool worker's flush after a task that compiled waits, at most.
TASK_FLUSH_S = 2.0
_task_flush: Callable[[bool], bool] | None = None
_flushed_at = 0  # COMPILES.count at the worker's last flush
_exports_answer = True  # a flush that timed out: the next tasks do not wait for exports


def flush_after_tasks(flush: Callable[[bool], bool]) -> None:
    """What a Pool worker runs after each task that compiled: ``flush(exports)`` (with
    ``exports``, the providers' too), whether all of it was done in time (see
    ``_flush_after_each_task``)."""
    global _task_flush
    _task_flush = flush


def _flush_after_each_task() -> bool:
    """In a ``multiprocessing.Pool`` worker: flush after each task, before its result goes
    to the parent; whether this process is one.

    The parent may end its workers as soon as it has their results (``terminate()``, from
    a ``Pool``'s ``with`` statement): SIGTERM, whose default action runs nothing. No
    handler is set for it (one written in Python runs only when the main thread comes
    back to the interpreter, which a worker waiting on the pool's queue lock that a
    terminated worker held never does: the pool's ``join`` would wait forever); the
    worker's ``outqueue.put``, which ``multiprocessing.pool.worker`` reads once it
    starts (after this runs), flushes first instead. A task that compiled nothing costs
    one look at a counter."""
    try:
        from multiprocessing import current_process, pool

        process, worker = current_process(), getattr(pool, "worker", None)
        if worker is None or getattr(process, "_target", None) is not worker:
            return False
        outqueue = process._args[1]  # type: ignore[attr-defined]
        put = outqueue.put
    except Exception:
        return False

    def flushed_put(obj: Any) -> None:
        _after_task()
        put(obj)

    try:
        outqueue.put = flushed_put
    except Exception:
        return False
    return True


def _after_task() -> None:
    global _flushed_at, _exports_answer
    flush = _task_flush
    if flush is None:
        return
    try:
        from .._pipeline._background import WORKER
        from .._pipeline._engine import ENGINE

        if (COMPILES.count == _flushed_at and not WORKER.pending
                and not ENGINE._pending and not ENGINE._made):
            return
        done = flush(_exports_answer)
        _flushed_at = COMPILES.count
        _exports_answer = _exports_answer and done
    except Exception:  # the worker's task result must still go
        pass


#: Where the child's exit flush is: not yet, running, done.
_NOT_YET, _RUNNING, _DONE = 0, 1, 2
_state = _NOT_YET


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
