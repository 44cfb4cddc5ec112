"""Only otel_jax's own code on otel_jax's threads: the garbage collector kept off them.

CPython's collector runs on whichever thread allocates past its threshold, and with it the
finalizers (``__del__``, weakref callbacks) of every object it frees. On one of otel_jax's
threads (the background emission, the log writer) a finalizer of the user's that calls a
jitted function would compile there: telemetry waits for that compile, its work re-enters
otel_jax's, and at the interpreter's exit a daemon thread inside XLA when Python ends it
aborts the process. So such a thread keeps the collector off while it works
(:class:`Collector`) and turns it on only while it waits with the interpreter let go
(:class:`Waker`): a collection that comes due meanwhile falls to a thread of the
program's. Nothing is allocated between turning it on and the wait, nor between the end
of the wait and turning it off again, so a collection owed cannot start on the thread
there either.

The collector's switch is the process's: the program's own ``gc.disable()`` is respected
(a thread that finds it off leaves it off), and a thread turns it on again only where it
turned it off. While otel_jax's thread works (a fraction of a millisecond per compile),
a collection the program's threads would have started waits for that work's end.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable


#: How many of otel_jax's threads hold the collector off now, and whether the first of them
#: turned it off (then the last turns it on again). Changed under ``_lock``, and nothing is
#: allocated there: a collection cannot start on the thread that turns it on.
_holders = 0
_turned_off = False
_lock = threading.Lock()


class Collector:
    """One thread's hold on the garbage collector (the threads' holds are counted)."""

    def __init__(self) -> None:
        self._held = False

    def hold(self) -> None:
        """Off while any of otel_jax's threads holds it, unless the program has it off (then
        it is left as it is)."""
        global _holders, _turned_off
        if self._held:
            return
        _lock.acquire()
        if not _holders:
            _turned_off = gc.isenabled()
            if _turned_off:
                gc.disable()
        _holders += 1
        self._held = True
        _lock.release()

    def allow(self) -> None:
        """Let go: on again when this was the last hold and a hold turned it off."""
        global _holders, _turned_off
        if not self._held:
            return
        _lock.acquire()
        self._held = False
        _holders -= 1
        if not _holders and _turned_off:
            _turned_off = False
            gc.enable()
        _lock.release()


def after_fork() -> None:
    """In a forked child: only the forking thread is there (it holds nothing of ours)."""
    global _holders, _turned_off, _lock
    if _turned_off:
        gc.enable()
    _holders, _turned_off, _lock = 0, False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=after_fork)


class Waker:
    """A thread's wait that allocates nothing around it: the collector is on only then.

    ``wait`` blocks until :meth:`wake` or a timeout; a wake while nobody waits is kept
    for the next wait (at most one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # released by a wake, taken back by the wait

    def wait(self, collector: Collector, timeout: float | None) -> None:
        # The arguments made beforehand: a call that builds its argument tuple would
        # allocate between turning the collector on and letting the interpreter go.
        acquire = self._lock.acquire
        args = (True, -1 if timeout is None else max(0.0, timeout))
        collector.allow()
        acquire(*args)
        collector.hold()

    def wake(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # woken already, not yet taken back
            pass


def start_thread(target: Callable[[Collector], None], name: str) -> threading.Thread:
    """Start a daemon thread that runs ``target(collector)``, the collector held off from
    before it starts (the thread's own start-up allocates too) until ``target`` lets it
    run (at its first wait) or returns. Raises what ``Thread.start`` raises (``RuntimeError``
    at interpreter shutdown), the collector left as it was."""
    collector = Collector()
    collector.hold()
    thread = threading.Thread(target=_run, args=(target, collector), name=name, daemon=True)
    try:
        thread.start()
    except BaseException:
        collector.allow()
        raise
    return thread


def _run(target: Callable[[Collector], None], collector: Collector) -> None:
    try:
        target(collector)
    finally:
        collector.allow()
