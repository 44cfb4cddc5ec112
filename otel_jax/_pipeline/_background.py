"""The one thread that finishes compiles off the compiling thread: records, spans, metrics,
log lines.

What dies with a jit call is read inside it, on the compiling thread; what needs a
compile's record before the call returns (the testing kit, ``on_recompile="warn"`` /
``"raise"``) gets it made there. The rest is a job for this worker: making the record
(the cause and its text, fingerprints, the history entry) and what only reports it (the
span emitter, the metrics, the log lines, the cross-rank check's hand-off). One daemon
thread, a bounded queue, jobs run in the order given. The user's call never waits for
it: when the queue is full a compile's telemetry is dropped and counted (``dropped``,
the ``jax.compile.dropped`` counter), with one warning; the engine makes records on the
compiling thread again well before that. :meth:`Worker.flush` waits, boundedly, until
what was handed over has run.

Only otel_jax's work runs on the thread, as far as it can see to it: it keeps the garbage
collector off while it works, so that no finalizer of the user's runs (and compiles) there
(:class:`Collector`, below; the log writer's thread does the same). At the process's exit
the thread is stopped (:meth:`Worker.stop`) once what was handed over ran: what comes later
is emitted on the exiting thread.
"""

from __future__ import annotations

import collections
import gc
import os
import threading
import time
from collections.abc import Callable

from .._core import _threads
from .._core._failopen import FailOpen, Topic, at_site

__all__ = ["QUEUE_CAPACITY", "WORKER", "Collector", "Waker", "Worker", "start_thread"]

#: Compiles waiting to be emitted; past this, a compile's telemetry is dropped and counted.
#: A compile takes milliseconds and its emission a fraction of one, so only an exporter
#: that blocks the thread for long fills it.
QUEUE_CAPACITY = 1024

#: How often the thread looks for work while compiles keep coming. A submit does not wake
#: it: waking a thread costs the compiling thread a context switch on a busy machine
#: (about 0.5 ms measured, half of what emitting costs), so it collects what came in.
POLL_S = 0.1
#: After this long without work it sleeps until the next submit wakes it (once per burst
#: of compiles), so an idle process has no thread waking up.
IDLE_S = 30.0

Job = Callable[[], None]


# --- the garbage collector kept off otel_jax's threads ------------------------------

# CPython's collector runs on whichever thread allocates past its threshold, and with it the
# finalizers (``__del__``, weakref callbacks) of every object it frees. On one of otel_jax's
# threads (the background emission, the log writer) a finalizer of the user's that calls a
# jitted function would compile there: telemetry waits for that compile, its work re-enters
# otel_jax's, and at the interpreter's exit a daemon thread inside XLA when Python ends it
# aborts the process. So such a thread keeps the collector off while it works
# (:class:`Collector`) and turns it on only while it waits with the interpreter let go
# (:class:`Waker`): a collection that comes due meanwhile falls to a thread of the
# program's. Nothing is allocated between turning it on and the wait, nor between the end
# of the wait and turning it off again, so a collection owed cannot start on the thread
# there either.
#
# The collector's switch is the process's: the program's own ``gc.disable()`` is respected
# (a thread that finds it off leaves it off), and a thread turns it on again only where it
# turned it off. While otel_jax's thread works (a fraction of a millisecond per compile),
# a collection the program's threads would have started waits for that work's end.

#: How many of otel_jax's threads hold the collector off now, and whether the first of them
#: turned it off (then the last turns it on again). Changed under ``_lock``, and nothing is
#: allocated there: a collection cannot start on the thread that turns it on.
_holders = 0
_turned_off = False
_lock = threading.Lock()
#: When the collector was turned off by the first hold (``time.monotonic()``).
_off_since = 0.0
#: The longest the collector stays off for otel_jax's threads: a job held up longer (an
#: exporter that blocks on a collector that does not answer) would keep the program's
#: garbage from being collected; past this, the compiling thread, or another of otel_jax's
#: threads as it waits, turns it on again (:func:`give_up_overdue`), and the hold is given
#: up until the threads all let go.
MAX_HOLD_S = 1.0
#: How long a hold taken on the program's thread (starting one of otel_jax's) waits for the
#: lock. A signal handler runs on the main thread between any two of its bytecodes, inside
#: otel_jax's too: where its compile needs the lock the interrupted code holds, it must not
#: wait for it (that never comes back). Past this, the new thread starts without the hold.
START_HOLD_WAIT_S = 0.05


class Collector:
    """One thread's hold on the garbage collector (the threads' holds are counted)."""

    def __init__(self) -> None:
        self._held = False

    def hold(self, wait: float = -1) -> None:
        """Off while any of otel_jax's threads holds it, unless the program has it off (then
        it is left as it is). ``wait``: at most this long for the lock (``-1``: as long as
        it takes), else no hold."""
        global _holders, _turned_off
        if self._held:
            return
        global _off_since
        if not _lock.acquire(True, wait):
            return
        if not _holders:
            _turned_off = gc.isenabled()
            if _turned_off:
                _off_since = time.monotonic()
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


def give_up_overdue(limit: float = MAX_HOLD_S) -> None:
    """Turn the collector on again when otel_jax's threads have held it off for over
    ``limit`` seconds (called on the compiling thread, at each compile handed over, and by
    otel_jax's threads as they wait). Where the lock is taken (by a signal handler's
    compile on the code it interrupted, say), the next compile looks again."""
    global _turned_off
    if not _turned_off or time.monotonic() - _off_since <= limit:
        return
    if not _lock.acquire(False):
        return
    try:
        if _turned_off:
            _turned_off = False
            gc.enable()
    finally:
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
        # Another of otel_jax's threads blocked while it holds the collector off (a stream
        # or an exporter that does not return) is found here too, not only at a compile.
        give_up_overdue()
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
    collector.hold(START_HOLD_WAIT_S)
    thread = _threads.daemon(_run, name, (target, collector))
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


class Worker:
    """A daemon thread running jobs in order from a bounded queue (started on first use)."""

    def __init__(self, capacity: int = QUEUE_CAPACITY, failopen: FailOpen | None = None,
                 ) -> None:
        self.capacity = capacity
        self.failopen = failopen or FailOpen()
        #: Jobs dropped because the queue was full, since the process (or fork) began.
        self.dropped = 0
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._jobs: collections.deque[Job] = collections.deque()
        self._unfinished = 0  # queued or running
        self._thread: threading.Thread | None = None
        self._sleeping = False  # waiting without a timeout: a submit must wake it
        self._waker = Waker()  # the thread's wait (the collector may run then)
        self._stopped = False  # the process is exiting: jobs run on the caller's thread
        self._pid = os.getpid()

    def submit(self, job: Job, *, counted: bool = True) -> bool:
        """Queue ``job``; never blocks. ``False`` when it was dropped (the queue is full) or
        run at once (no thread can be started: the interpreter is shutting down).
        ``counted=False``: a job whose drop loses nothing (it does what a later one does),
        not counted or warned about."""
        with self._cond:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._reset_locked()
            if self._unfinished >= self.capacity:
                if not counted:
                    return False
                self.dropped += 1
                dropped = self.dropped
            else:
                dropped = 0
                started = self._start_locked()
                if started:
                    self._jobs.append(job)
                    self._unfinished += 1
                    if self._sleeping:
                        self._wake_locked()
        give_up_overdue()
        if dropped:
            self._warn_dropped(dropped)
            return False
        if not started:
            self._run_job(job)
            return False
        return True

    def _reset_locked(self) -> None:
        self._jobs.clear()
        self._unfinished = 0
        self._thread = None
        self._sleeping = False
        self._waker = Waker()
        self._stopped = False
        self._pid = os.getpid()

    def _start_locked(self) -> bool:
        if self._stopped:
            return False
        if self._thread is not None and self._thread.is_alive():
            return True
        try:
            thread = start_thread(self._serve, "otel_jax-emit")
        except RuntimeError:  # at interpreter shutdown: the job runs on the caller's thread
            return False
        self._thread = thread
        self._sleeping = False  # it polls first: the job just queued is found without a wake
        return True

    def count_dropped(self) -> None:
        """One compile's telemetry dropped elsewhere (records made but past the capacity)."""
        with self._cond:
            self.dropped += 1
            dropped = self.dropped
        self._warn_dropped(dropped)

    def _warn_dropped(self, dropped: int) -> None:
        self.failopen.warn_once(Topic.EMIT_DROPPED, (
            f"otel_jax: {self.capacity} compiles are waiting to be emitted (an exporter or "
            f"log stream that blocks?): {dropped} compile(s) dropped so far, and their "
            "spans, metrics and log lines are dropped while the queue is full (counted "
            "in jax.compile.dropped); the jit calls are unaffected."))

    def _wake_locked(self) -> None:
        """End the thread's wait (with ``_cond`` held)."""
        self._waker.wake()

    def _serve(self, collector: Collector) -> None:
        idle_since = time.monotonic()
        while True:
            with self._cond:
                while not self._jobs:
                    if self._stopped:
                        self._thread = None
                        self._cond.notify_all()
                        return
                    if time.monotonic() - idle_since >= IDLE_S:
                        self._sleeping = True
                        self._idle(collector, None)
                        self._sleeping = False
                        idle_since = time.monotonic()
                    else:
                        self._idle(collector, POLL_S)
                job = self._jobs.popleft()
            try:
                self._run_job(job)
            finally:
                idle_since = time.monotonic()
                with self._cond:
                    self._unfinished -= 1
                    if not self._unfinished:
                        self._cond.notify_all()
            # Between jobs the compiling thread may take the interpreter back, and a
            # collection owed falls to it.
            collector.allow()
            time.sleep(0)
            collector.hold()

    def _idle(self, collector: Collector, timeout: float | None) -> None:
        """Wait, with ``_cond`` held (once), until woken or ``timeout``; the collector may
        run meanwhile, on another thread."""
        self._cond.release()
        try:
            self._waker.wait(collector, timeout)
        finally:
            self._cond.acquire()

    def stop(self, timeout: float) -> bool:
        """At the process's exit: end the thread once the jobs handed over so far ran (at
        most ``timeout`` seconds); later jobs run on the caller's thread. Whether it
        ended."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            if self._pid != os.getpid():
                return True
            self._stopped = True
            thread = self._thread
            if thread is None or threading.current_thread() is thread:
                return thread is None
            self._wake_locked()
            while self._thread is thread and thread.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def wake(self) -> None:
        """End the thread's wait now rather than at its next poll: for a job worth its
        context switch (a function's first compile, whose hazards are to be said before
        the recompile they predict)."""
        with self._cond:
            if self._thread is not None and self._unfinished:
                self._wake_locked()

    def _run_job(self, job: Job) -> None:
        self._emit(job)

    def _emit(self, job: Job) -> None:
        # A warning given here with no site of its own points at no line: this thread's
        # stack holds none of the user's code (the engine names a compile's call site).
        with at_site(None), self.failopen.guard("background emitter"):
            job()

    def flush(self, timeout: float | None) -> bool:
        """Wait until every job handed over so far has run, at most ``timeout`` seconds
        (``None``: as long as it takes); whether they all have. From a job itself (an
        exporter that flushes otel_jax) it cannot wait for itself: ``False`` at once."""
        with self._cond:
            if self._pid != os.getpid():
                return True  # nothing of the parent's is ever emitted here
            if threading.current_thread() is self._thread:
                return not self._unfinished
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            if self._unfinished:
                self._wake_locked()  # the thread need not wait for its next poll
            while self._unfinished:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        return self._unfinished


WORKER = Worker()
if hasattr(os, "register_at_fork"):
    # The parent's thread and its lock's state do not carry over to a child.
    os.register_at_fork(after_in_child=WORKER._reset)
