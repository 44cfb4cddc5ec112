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

At the process's exit the thread runs what was handed over, boundedly, and ends
(:meth:`Worker.stop`, :func:`end_threads_at_exit`) before the interpreter tears down:
what comes later is emitted on the exiting thread.
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

from .._core import _exitwrite, _threads, _where
from .._core._failopen import FailOpen, Topic, at_site, emit

__all__ = ["EXIT_END_S", "QUEUE_CAPACITY", "WORKER", "Ends", "Waker", "Worker",
           "end_threads_at_exit", "ends_at_exit", "start_thread"]

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


# --- otel_jax's threads at the interpreter's exit ----------------------------------------

# CPython's collector runs on whichever thread allocates past its threshold, and with it the
# finalizers (``__del__``, weakref callbacks) of what it frees: on otel_jax's threads too,
# as on any other. The collector is the program's (its own ``gc.disable()`` and thresholds
# hold): otel_jax never switches it. A finalizer that calls a jitted function there
# compiles there, captured like any compile made inside otel_jax's work (the engine never
# waits for a lock its own thread holds), as a span processor's or log handler's compile
# is. What must not happen is one of these threads inside the program's code, or inside
# XLA, while the interpreter tears down: Python then ends daemon threads where they stand,
# and one inside C++ (a compile) aborts the process. So at exit each of otel_jax's
# long-lived threads is asked to end (:func:`end_threads_at_exit`, the last of otel_jax's
# exit handlers): it runs what it was handed, boundedly, and returns; the exit waits for
# it, boundedly, before the interpreter goes on. One that does not come back in time (an
# exporter that blocks) is named in one warning, and the exit goes on.

#: How long the exit waits, at most, for otel_jax's threads to end once asked to (after
#: the exit's flushes, which have bounds of their own).
EXIT_END_S = 1.0
#: How long, past that, the exit waits at most for a thread that is inside otel_jax's own
#: call into JAX, or inside the application's code (a span processor that compiles and
#: runs its program, an exporter), said by the marks of ``_core._where``: long enough for
#: the compiles such code makes on a loaded machine, and never for good (one that never
#: returns would hold the process; the interpreter then tears down under it, said in one
#: line).
EXIT_THEIRS_S = 60.0
#: Once otel_jax's thread has ended, how long a compile's job run on the exiting thread may
#: go on running what its own emission handed over (the compile of a span processor's that
#: compiles at every span, the compile its span makes, and so on): past it that chain's
#: records are dropped and counted, as on the thread past its bound. The job itself (the
#: caller's own compile) always runs.
EXIT_CHAIN_S = 1.0


class Ends(Protocol):
    """A holder of one of otel_jax's long-lived threads that can be asked to end it."""

    def end_by(self, deadline: float) -> threading.Thread | None:
        """Have the thread run what it was handed until ``deadline`` (``time.monotonic()``)
        and then end; it takes nothing new. The thread to wait for, or ``None``."""


#: Every holder of such a thread, asked at exit.
_ENDING: weakref.WeakSet[Ends] = weakref.WeakSet()


def ends_at_exit(holder: Ends) -> None:
    """Have ``holder``'s thread ended at the process's exit (:func:`end_threads_at_exit`)."""
    _ENDING.add(holder)


def end_threads_at_exit(seconds: float = EXIT_END_S) -> list[threading.Thread]:
    """Ask each of otel_jax's long-lived threads to end, wait for them at most ``seconds``
    in all, and say in one warning which did not end and what code they were running.
    A thread of otel_jax's, or of the OpenTelemetry SDK's (its batch processors', its
    metric reader's), that is inside otel_jax's own call into JAX, or inside the
    application's code, is waited for until it is out of it (``EXIT_THEIRS_S`` at most):
    a daemon thread inside C++ when the interpreter tears down aborts the process. The
    threads still running."""
    deadline = time.monotonic() + max(0.0, seconds)
    threads = []
    for holder in list(_ENDING):
        try:
            thread = holder.end_by(deadline)
        except Exception:  # exit must go on
            continue
        if thread is not None and thread is not threading.current_thread():
            threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    # Known, not guessed: each call into JAX that otel_jax makes, and each call into the
    # application's code on these threads, marks its thread while it runs (``_where``).
    # The application's code is waited for to its end, as Python waits for the
    # application's own threads, and said once; otel_jax's own JAX call until it returns.
    announced: set[threading.Thread] = set()
    marked: dict[threading.Thread, tuple[_where.Mark, ...]] = {}
    while True:
        marked = _marked(threads)
        for thread, marks in marked.items():
            if _where.Mark.APPLICATION in marks and thread not in announced:
                announced.add(thread)
                emit(f"otel_jax: at exit, waiting for the application's code that runs on "
                     f"{thread.name} to end ({_running(thread)}): a daemon thread inside "
                     "JAX when the interpreter tears down would abort the process.")
        if not marked or time.monotonic() >= deadline + EXIT_THEIRS_S:
            break
        time.sleep(0.005)
    if _exitwrite.exiting():
        # From here on a call into JAX that one of these threads would start parks it:
        # nothing is torn down inside C++ (a compile's record, queued by code that ended).
        _where.close()
    stuck = [t for t in threads if t.is_alive()]
    stuck += [t for t in marked if t not in stuck and t.is_alive()]
    # said within a bound at exit (``emit``): a stderr pipe nobody reads (the stuck
    # thread may be a log writer blocked on it) must not hold the process
    if stuck:
        running = "; ".join(f"{t.name} in {_running(t)}" for t in stuck)
        emit(f"otel_jax: at exit, a thread of otel_jax's or of its exporters still ran code "
             f"it had called after the exit's bound ({running}): the process exits without "
             "waiting for it, and what that thread had still to emit is lost. A span "
             "processor, exporter or log handler that blocks at exit, or a finalizer or "
             "processor that compiles there, keeps it there.")
    return stuck


#: The names of the threads, besides those :func:`ends_at_exit` ends, that the exit waits
#: for while they are marked: otel_jax's (its bounded exports) and the OpenTelemetry
#: SDK's (``OtelBatchSpanRecordProcessor``, ``OtelPeriodicExportingMetricReader``: a
#: gauge of otel_jax's that reads JAX there).
_WATCHED = ("otel_jax-", "Otel")


def _marked(ended: list[threading.Thread]) -> dict[threading.Thread, tuple[_where.Mark, ...]]:
    """The threads of otel_jax's, or of the SDK's, other than this one, that are inside
    otel_jax's own JAX call or the application's code now, with their marks."""
    try:
        marks = _where.marks()
        if not marks:
            return {}
        here = threading.current_thread()
        return {t: marks[t.ident] for t in threading.enumerate()
                if t.ident in marks and t is not here and t.is_alive()
                and (t in ended or t.name.startswith(_WATCHED))}
    except Exception:  # the exit must go on
        return {}


def _running(thread: threading.Thread) -> str:
    """What ``thread`` runs, for the reader of the line that names it (never to decide
    anything): its innermost frame that is neither otel_jax's nor the standard library's
    (the program's, or a library's it called), as ``name (file:line)``."""
    frame = sys._current_frames().get(thread.ident or -1)
    found = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_OURS):
            if found is None:
                found = frame  # the innermost of any other code, where only that is found
            if not filename.startswith(_STDLIB) or "-packages" in filename:
                found = frame
                break
        frame = frame.f_back
    if found is None:
        return "otel_jax's own code"
    code = found.f_code
    return f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}:{found.f_lineno})"


#: otel_jax's own source files, and the standard library's (a frame in either is not the
#: code that holds a thread up).
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.__file__) + os.sep
# Registered when the module is imported, before the exit handlers of the parts whose
# threads it ends (atexit runs the latest first): it runs after all of them.
atexit.register(end_threads_at_exit)


class Waker:
    """A thread's wait until :meth:`wake` or a timeout; a wake while nobody waits is kept
    for the next wait (at most one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # released by a wake, taken back by the wait

    def wait(self, timeout: float | None, held: threading.Condition | None = None) -> None:
        """Wait; with ``held`` (taken once by this thread) let go meanwhile."""
        if held is not None:
            held.release()
        try:
            self._lock.acquire(True, -1 if timeout is None else max(0.0, timeout))
        finally:
            if held is not None:
                held.acquire()

    def wake(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # woken already, not yet taken back
            pass


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """Start one of otel_jax's daemon threads running ``target()``. Raises what
    ``Thread.start`` raises (``RuntimeError`` at interpreter shutdown)."""
    thread = _threads.daemon(target, name)
    thread.start()
    return thread


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
        #: Once stopped: when the thread ends, whatever is still queued then.
        self._end_deadline = 0.0
        self._reset_locked()
        ends_at_exit(self)

    def submit(self, job: Job, *, counted: bool = True) -> bool:
        """Queue ``job``; never blocks. ``False`` when it was dropped (the queue is full) or
        run at once (no thread can be started: the interpreter is shutting down); a job
        handed over by such a job runs right after it (:meth:`_run_inline`).
        ``counted=False``: a job whose drop loses nothing (it does what a later one does),
        not counted or warned about."""
        with self._cond:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self._reset_locked()
            dropped = self._unfinished >= self.capacity
            if not dropped:
                started = self._start_locked()
                if started:
                    self._jobs.append(job)
                    self._unfinished += 1
                    if self._sleeping:
                        self._waker.wake()
        if dropped:
            if counted:
                self.count_dropped()
            return False
        if not started:
            return self._run_inline(job, counted)
        return True

    def _run_inline(self, job: Job, counted: bool) -> bool:
        """Run ``job`` on this thread (the process is exiting and the thread ended). A job
        handed over by a job running so (its emission's compile, a finalizer) runs after
        it, on the same thread, never inside it: ``True`` for such a job, queued here."""
        later = getattr(self._inline, "jobs", None)
        if later is not None:
            if len(later) >= self.capacity:
                if counted:
                    self.count_dropped()
                return False
            later.append(job)
            return True
        self._inline.jobs = later = collections.deque([job])
        try:
            self._emit(later.popleft())
            # What its emission compiled, and theirs, runs within a bound: a processor that
            # compiles at every span would hand over a job at every job, and the caller
            # (the exiting thread) would never come back (:meth:`overdue`).
            self._inline.chain_deadline = time.monotonic() + EXIT_CHAIN_S
            while later:
                self._emit(later.popleft())
        finally:
            self._inline.jobs = None
            self._inline.chain_deadline = None
        return False

    def _reset_locked(self) -> None:
        """A fresh start (a forked child's: the parent's thread is not here), ``_cond`` kept."""
        self._jobs.clear()
        self._unfinished = 0  # queued or running
        self._thread: threading.Thread | None = None
        self._sleeping = False  # waiting without a timeout: a submit must wake it
        self._waker = Waker()  # the thread's wait
        self._stopped = False  # the process is exiting: jobs run on the caller's thread
        self._inline = threading.local()  # jobs run on the caller's thread, one after another
        self._pid = os.getpid()

    def _start_locked(self) -> bool:
        if self._stopped:
            # A job made by the thread's own job (a span processor's compile) joins the
            # queue the thread still runs until its end; any other runs on its caller.
            thread = self._thread
            return thread is not None and thread is threading.current_thread()
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

    def _serve(self) -> None:
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
                        self._waker.wait(None, self._cond)
                        self._sleeping = False
                        idle_since = time.monotonic()
                    else:
                        self._waker.wait(POLL_S, self._cond)
                job = self._jobs.popleft()
            try:
                self._emit(job)
            finally:
                idle_since = time.monotonic()
                with self._cond:
                    self._unfinished -= 1
                    if not self._unfinished:
                        self._cond.notify_all()

    def overdue(self) -> bool:
        """At the process's exit, on the thread: the bound it had to end by has passed; on
        a thread that runs jobs itself once the thread stopped (:meth:`_run_inline`): the
        jobs handed over by its own have run ``EXIT_CHAIN_S``. A job then drops what it
        still had to emit (:meth:`drop_at_end`)."""
        if not self._stopped:
            return False
        if threading.current_thread() is self._thread:
            return time.monotonic() >= self._end_deadline
        chain_deadline = getattr(self._inline, "chain_deadline", None)
        return chain_deadline is not None and time.monotonic() >= chain_deadline

    def drop_at_end(self, lost: int) -> None:
        """``lost`` compiles not emitted because the exit's bound passed: counted, said once."""
        with self._cond:
            self.dropped += lost
        with at_site(None):
            self.failopen.warn_once(Topic.EMIT_DROPPED, (
                f"otel_jax: exit dropped {lost} compile(s) still waiting to be emitted "
                "(their spans, metrics and log lines): emitting was still busy when the "
                "exit's bound passed (a span processor, exporter or log handler that "
                "blocks, or that compiles at every span?)."))

    def stop(self, timeout: float) -> bool:
        """At the process's exit: end the thread once the jobs handed over so far ran; past
        ``timeout`` seconds from now a job drops what it still has to emit (:meth:`overdue`).
        Later jobs run on the caller's thread. Whether it ended within ``timeout``."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            thread = self.end_by(deadline)
            if thread is None or threading.current_thread() is thread:
                return thread is None
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
                self._waker.wake()

    def end_by(self, deadline: float) -> threading.Thread | None:
        """:class:`Ends`: stop (once; a later call keeps the first deadline) and return the
        thread still to end."""
        with self._cond:
            if self._pid != os.getpid():
                return None
            if not self._stopped:
                self._stopped = True
                self._end_deadline = deadline
            thread = self._thread
            if thread is None or not thread.is_alive():
                return None
            self._waker.wake()
            return thread

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
                self._waker.wake()  # the thread need not wait for its next poll
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
