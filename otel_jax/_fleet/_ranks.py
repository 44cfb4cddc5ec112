"""Multi-process jobs: tell when ranks compile different programs for the same call.

Each compile of a user function in a job of several processes is compared across
ranks over JAX's own coordination service: the protocol's steps (who compares, what a
verdict is) are ``_ranks_protocol``'s, its calls and waits on the service
``_ranks_transport``'s. This module runs them: the engine's handle, and the threads.

Nothing here blocks the user's call (unless ``on_divergence="raise"``): the
compiling thread appends the record to a bounded queue; one daemon thread publishes
entries (it never waits, so no rank's entry waits behind another compile's
verdict) and a second one waits for verdicts, one compile after the other in the
order this rank arrived. Waits end at deadlines, so none outlives ``timeout_s``
by more than a bounded margin. No thread of ours is inside a call of JAX's client when
the interpreter finalizes: exit (registered after ``jax.distributed.initialize``, so
run before JAX's shutdown) stops new calls, ends each read in flight at once (a
``WAKE``, ``_ranks_transport``) and joins the threads.

With ``on_divergence="raise"`` the compiling thread publishes and waits itself, about
``timeout_s`` at most while the comparers live (longer when one died: the takeover's
stages, ``_ranks_gather.TreeGather.stage_s``); the engine then raises ``DivergenceError``
from the diverging jit call, on every rank that sees the divergence.
"""

from __future__ import annotations

import atexit
import fnmatch
import threading
import time
from collections import deque
from collections.abc import Callable

from .._capture._jax import _coordination
from .._core import _threads
from .._core._failopen import FailOpen, Topic
from .._pipeline._record import CompileRecord, Divergence, SpanLink
from ._ranks_arrive import FAN_IN, Compile
from ._ranks_protocol import protocol
from ._ranks_transport import WAIT_SLICE_S, Channel, ClientStore
from ._ranks_verdict import Reporter

#: Compiles waiting to be published or settled; past this they are not compared (and
#: counted in ``dropped``).
QUEUE_SIZE = 1024
DEFAULT_TIMEOUT_S = 30.0
ON_DIVERGENCE = ("log", "raise", "off")


# --- the checker ----------------------------------------------------------------------

class Checker:
    """Publishes this rank's compiles and settles them with its peers (one per process),
    on its threads: the protocol (``RankProtocol``, or ``TreeProtocol`` past its fan-in)
    over the job's client (``Channel`` over ``ClientStore``).

    ``clock`` is the time the deadlines of waits are measured in (``time.monotonic``);
    ``fan_in``: the most ranks compared as one group (a tree past it, ``_ranks_gather``).
    """

    def __init__(self, coordination: _coordination.Coordination, timeout_s: float,
                 report: Reporter, failopen: FailOpen,
                 clock: Callable[[], float] = time.monotonic, fan_in: int | None = None,
                 ) -> None:
        self.channel = Channel(ClientStore(coordination.client), clock, failopen)
        # FAN_IN read here, not bound at definition: a test of real processes sets it
        # lower to run the tree with a few ranks
        self.protocol = protocol(self.channel, coordination.process_index,
                                 coordination.process_count, timeout_s, report, failopen,
                                 FAN_IN if fan_in is None else fan_in)
        self._failopen = failopen
        self._cond = threading.Condition(threading.RLock())
        self._queue: deque[Compile] = deque()  # to publish
        self._waiting: deque[Compile] = deque()  # published, to settle
        self._busy = 0  # taken off a queue, not done yet
        self._publisher: threading.Thread | None = None
        self._settler: threading.Thread | None = None
        self.dropped = 0

    @property
    def off(self) -> bool:
        """The check is off in this process (the service failed, or lacks methods)."""
        return self.channel.off

    # --- the compiling thread ------------------------------------------------------

    def submit(self, record: CompileRecord, link: SpanLink | None) -> None:
        """Queue a compile for comparison; never blocks."""
        item = self.protocol.compile_of(record, link)
        with self._cond:
            if self.channel.closed or self.off:
                return
            if len(self._queue) + len(self._waiting) >= QUEUE_SIZE:
                self.dropped += 1
                return
            self._queue.append(item)
            self._cond.notify_all()
            if self._publisher is None:
                self._publisher = _threads.daemon(self._publish_loop, "otel_jax-ranks")
                self._settler = _threads.daemon(self._settle_loop, "otel_jax-ranks")
                self._publisher.start()
                self._settler.start()

    def check_now(self, record: CompileRecord, link: SpanLink | None) -> Divergence | None:
        """Publish and wait for the verdict (about ``timeout_s`` at most while the
        comparers live; see the module's docstring): the divergence found (reported),
        or ``None``. For ``on_divergence="raise"``."""
        if self.off:
            return None
        item = self.protocol.compile_of(record, link)
        if not self.protocol.publish(item):
            return None
        return self.channel.drive(self.protocol.settle(item))

    # --- the daemon threads -------------------------------------------------------------

    def _publish_loop(self) -> None:
        """Publishes entries as they come: never waits for a verdict, so that no peer's
        verdict waits for an entry queued behind one. Closing (uninstall, exit) still
        publishes what is queued: the peers are waiting for those entries. An error on
        one compile costs that compile's comparison (and one warning), not the thread:
        the peers would take every later compile of this rank for missing."""
        while True:
            with self._cond:
                while not self._queue and not self.channel.closed and not self.off:
                    self._cond.wait(1.0)
                if (self.off or not self._queue
                        or time.monotonic() > self.channel.calls_until):
                    return
                item = self._queue.popleft()
                self._busy += 1
            published = False
            try:
                published = self.protocol.publish(item)
            except Exception as exc:
                self._failopen.failed("rank comparison", exc)
            finally:
                with self._cond:
                    self._busy -= 1
                    if published and not self.channel.closed:
                        self._waiting.append(item)
                    self._cond.notify_all()

    def _settle_loop(self) -> None:
        """Settles the published compiles one after the other, in the order this rank
        arrived: a comparer's duty never waits behind a verdict of a compile that arrived
        after it, so no two ranks wait on each other (an error on one compile, as in
        ``_publish_loop``, costs that compile only)."""
        while True:
            with self._cond:
                while not self._waiting and not self.channel.closed and not self.off:
                    self._cond.wait(1.0)
                if self.off or self.channel.closed:
                    return
                item = self._waiting.popleft()
                self._busy += 1
            try:
                self.channel.drive(self.protocol.settle(item))
            except Exception as exc:
                self._failopen.failed("rank comparison", exc)
            finally:
                item.signature = None
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def settled(self) -> bool:
        """Nothing queued, and every published compile has its verdict (or gave up)."""
        with self._cond:
            return not (self._queue or self._waiting or self._busy)

    def close(self, timeout: float = 1.0) -> bool:
        """Stop the threads: what is queued is still published for ``timeout`` seconds
        (the peers wait for those entries), then no new call is made; the read in flight
        ends at once (its key is set to ``WAKE``, or created as ``WAKE`` if every rank
        reads it) or within ``WAIT_SLICE_S`` (a sliced read), so this returns within
        ``timeout + WAIT_SLICE_S`` and, unless a call of the client outlasted that, with
        no thread of ours inside the client. Returns whether the threads ended."""
        with self._cond:
            start = time.monotonic()
            self.channel.close(start + timeout)
            self._waiting.clear()
            self._cond.notify_all()
            threads = [t for t in (self._publisher, self._settler)
                       if t is not None and t is not threading.current_thread()]
        self.channel.wake()
        end = start + timeout + WAIT_SLICE_S
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in threads)


# --- the engine's side ----------------------------------------------------------------

class CrossRank:
    """The engine's handle: off for single-process programs (one attribute read per compile).

    ``flush_first(seconds)``: at exit, hands the compiles still on otel_jax's emitting
    thread to the check before it closes (the peers wait for their entries)."""

    def __init__(self, failopen: FailOpen,
                 flush_first: Callable[[float], object] = lambda seconds: None) -> None:
        self._failopen = failopen
        self._flush_first = flush_first
        self.timeout_s = DEFAULT_TIMEOUT_S
        self.on_divergence = "off"
        #: Patterns (fnmatch) of qualified names compiled on purpose by some ranks only.
        self.rank_local: tuple[str, ...] = ()
        self.report: Reporter | None = None
        self.checker: Checker | None = None
        self._lock = threading.RLock()

    def configure(self, on_divergence: str, timeout_s: float, report: Reporter | None) -> None:
        with self._lock:
            self.on_divergence = on_divergence
            self.timeout_s = timeout_s
            self.report = report
            checker, self.checker = self.checker, None
        if checker is not None:
            checker.close()

    def _checker(self) -> Checker | None:
        checker = self.checker
        if checker is not None:
            return None if checker.off else checker
        coordination = _coordination.coordination()
        if coordination is None:
            return None
        with self._lock:
            if self.checker is not None:
                return self.checker
            lacking = _coordination.coordination_missing(coordination.client)
            report = self.report
            checker = Checker(coordination, self.timeout_s,
                              report if report is not None else (lambda d: None),
                              self._failopen)
            if lacking:
                checker.channel.off = True
                self._failopen.warn_once(
                    Topic.RANKS_METHODS,
                    "otel_jax: this JAX's distributed runtime client lacks "
                    f"{', '.join(lacking)}; ranks of this multi-process job are not "
                    "compared. The jit calls are unaffected.")
            self.checker = checker
            if not _live:
                # Registered now, after jax.distributed.initialize registered its own
                # shutdown: exit runs this first, while the service is still there.
                atexit.register(_at_exit, self._flush_first)
            _live.append(checker)
            return None if checker.off else checker

    def on_compile(self, record: CompileRecord, link: SpanLink | None) -> Divergence | None:
        """Compare this compile across ranks; with ``"raise"``, the divergence to raise."""
        if self.on_divergence == "off" or record.eager_op:
            return None
        if self.rank_local and any(fnmatch.fnmatchcase(record.function.qualname, pattern)
                                   for pattern in self.rank_local):
            return None
        checker = self._checker()
        if checker is None:
            return None
        if self.on_divergence == "raise":
            return checker.check_now(record, link)
        checker.submit(record, link)
        return None


_live: list[Checker] = []


#: At exit, how long queued entries are still published (the threads are then out of the
#: client within ``WAIT_SLICE_S`` more): before JAX's own shutdown, which follows.
EXIT_PUBLISH_S = 0.25


def _at_exit(flush_first: Callable[[float], object]) -> None:
    try:
        # Compiles still on the emitting thread reach the check first: the peers wait
        # for their entries (exit flushes that thread too, but maybe after this).
        flush_first(EXIT_PUBLISH_S)
    except Exception:
        pass
    for checker in list(_live):
        try:
            checker.close(EXIT_PUBLISH_S)
        except Exception:
            pass
