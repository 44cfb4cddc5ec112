"""Multi-process jobs: tell when ranks compile different programs for the same call.

Each compile of a user function in a job of several processes is compared across
ranks over JAX's own coordination service (the key-value store of the distributed
runtime client ``jax.distributed.initialize`` started; no new server, no new
dependency). The service runs inside rank 0's process and also carries the job's
heartbeats and barriers, so what each compile costs it is linear in the rank count
and small: keys live under ``otel_jax/compiles/<function digest>/<ordinal>/``
(the digest of ``_fingerprint.function_identity``, the same on every host; the
ordinal is ``record.count``), with the names of ``_vocab.RankWire``::

    e/<rank>  "<signature fingerprint> <program fingerprint>"  (about 100 bytes)
    n         the arrival counter (key_value_increment; ``CLOSED`` added once compared)
    e/all     set by the rank whose arrival makes the count complete
    v         the verdict: the ranks grouped by program, the missing ones, the kind
    d         a signature divergence named with paths and both values
    s/<rank>  a signature summary, published only when a comparer asks for it

Per compile, each rank sets its entry, increments the counter and makes one blocking
read of the verdict, however long it waits (a straggler, a dead rank): three calls,
about 300 bytes, whatever the wait. The service answers every rank's read when the
verdict is set, so nobody polls and no one delivers to each rank. The rank whose
increment returned 1, the first to arrive (alive, and compiled this ordinal by
definition), is the comparer: one blocking read of ``all`` (or until ``timeout_s``
after it arrived), one directory read of the N entries, one verdict. A comparer that
stops waiting before every rank arrived first adds ``CLOSED`` to the counter, before
it reads the entries: a rank whose increment returns more is late (it has no entry in
the verdict) and reads the verdict as the others do. When the fingerprints differ in
signature, the verdict asks one rank of each side for its summary (bounded:
``MAX_LEAVES`` leaves), and the comparer publishes the difference, named from the two
summaries, for every rank to read (a fourth call each):
``batch['x']: f32[12,8] (ranks 0-6) vs f32[112,8] (rank 7)``. No rank reads N entries
more than once.

A rank that arrives after the verdict was written (later than ``timeout_s``) finds
itself among the missing ranks; it compares its own fingerprints with the groups
of the verdict, and names a difference from the comparer's summary (published when
ranks were missing). A comparer that never answers (it ended, or died after it
arrived) is replaced: the first rank whose wait for the verdict ran out
(``key_value_increment`` of ``t`` returned 1) compares in its place.

A rank that compiles one program more than the others (a partial batch on one
rank) is reported where it happened and at the next ordinal; once two ordinals in a
row show the same programs one ordinal apart, the following ones are not reported
again (``_ordinals``: each rank keeps the verdicts' groups of the last few ordinals of
each function, as ranges of ranks).

Nothing here blocks the user's call (unless ``on_divergence="raise"``): the
compiling thread appends the record to a bounded queue; one daemon thread publishes
entries (it never waits, so no rank's entry waits behind another compile's
verdict) and a second one waits for verdicts, one compile after the other in the
order this rank arrived. Waits end at deadlines, so none outlives ``timeout_s``
by more than a bounded margin. No thread of ours is inside a call of JAX's client when
the interpreter finalizes: exit (registered after ``jax.distributed.initialize``, so
run before JAX's shutdown) stops new calls, ends each read in flight at once and joins
the threads. A key only this process waits for (``all`` for a comparer, a summary it
asked for) is set to ``WAKE``; a key every rank reads (the verdict, a named divergence)
is created as ``WAKE`` only if it is not set (``key_value_set`` without overwrite: if
it is set, the read is ending anyway). A peer that reads that ``WAKE`` without closing
reads the key's next generation (``v~1``), and the writer, whose creation of ``v``
failed, writes there: a rank that exits early costs each peer one read more, once. A
thread still inside the client's C++ when finalization starts would take the GIL
back after it and be ended by the interpreter mid-call, which aborts the process
(``terminate called`` ... ``FATAL: exception not rethrown``) when the peer's exit
ends the read. The comparer deletes the entries it read, and the keys of the ordinal
``KEEP`` compiles back (the verdict and the counters: a few hundred bytes per ordinal
whatever the rank count, and the summaries asked for); what stays at exit goes with the
job's coordination service.

With ``on_divergence="raise"`` the compiling thread publishes and waits itself, at
most about ``timeout_s``, and raises :class:`DivergenceError` from the diverging
jit call, on every rank that sees the divergence.

A coordination service that fails (a dead coordinator, a JAX without the client
methods) costs one warning, and the check is off for the rest of the run.

The protocol's steps are generators that yield the key they wait for and its
deadline: the threads drive them with the client's blocking reads, and
``benchmarks/fleet_scale.py`` drives the same code for 1,024 simulated ranks.
"""

from __future__ import annotations

import atexit
import enum
import fnmatch
import functools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from .._capture import _fingerprint, _jax_read
from .._capture._signature import Signature
from .._core._failopen import FailOpen, Topic
from .._core._text import safe_repr
from .._core._vocab import DivergenceKind
from .._core._vocab import RankWire as W
from .._pipeline._background import WORKER
from .._pipeline._record import CompileRecord, Divergence, SpanLink
from ._ordinals import Ordinals
from ._wire import (
    MAX_NAMED_DIFF,
    Group,
    Program,
    decode_ranks,
    differ,
    encode_ranks,
    function_key,
    generation,
    kind_of,
    loads,
    missing,
    named_text,
    pair_of,
    parse_entry,
    program_text,
    ranks_text,
    summary,
    summary_diff,
)

PREFIX = W.PREFIX
#: Compiles waiting to be published or settled; past this they are not compared (and
#: counted in ``dropped``).
QUEUE_SIZE = 1024
#: Ordinals of a function whose keys stay on the service (late ranks read the verdict).
KEEP = 64
#: Beyond the comparer's own deadline, how long a rank waits for the verdict before
#: another rank compares in its place (the comparer may have verdicts queued before).
VERDICT_MARGIN_S = 5.0
#: The longest one read of a ``Read.SLICED`` wait lasts: a longer wait is several reads.
#: What a thread inside such a read adds to exit at most (closing cannot end it: a late
#: rank's read of the comparer's summary, set before the verdict, so rarely a wait).
WAIT_SLICE_S = 1.0
#: Generations of a shared key (one more each time a rank closes while reading it) after
#: which the readers and the writer give up on it.
MAX_GENERATIONS = 8
#: Added to the arrival counter by a comparer that stops waiting for the others: a rank
#: whose arrival returns more came after the comparer read the entries (it is late).
CLOSED = 1 << 40
#: What this process sets a key only it waits for to, to end its own read at once (exit).
WAKE = "-"
#: Consecutive failures of the coordination service after which the check stops.
MAX_FAILURES = 3
DEFAULT_TIMEOUT_S = 30.0
ON_DIVERGENCE = ("log", "raise", "off")

Reporter = Callable[[Divergence], None]


class DivergenceError(RuntimeError):
    """Ranks compiled different programs for the same call (``on_divergence="raise"``)."""

    def __init__(self, divergence: Divergence) -> None:
        self.divergence = divergence
        super().__init__(
            f"{divergence.function}: the ranks of this job diverge at compile "
            f"#{divergence.count} ({divergence.kind.value}): {divergence.text}. Every rank "
            "must compile the same program for the same call, or the next collective hangs.")


# --- the checker ----------------------------------------------------------------------

class Read(enum.Enum):
    """How a wait reads its key, so that closing can end the read at once."""

    #: No other process reads the key: one read, however long; closing sets the key to
    #: ``WAKE``.
    OWN = "own"
    #: Every rank reads the key (a verdict): one read, however long; closing creates the
    #: key as ``WAKE`` if it is not set, and a rank that reads a ``WAKE`` it did not set
    #: reads the key's next generation, which the writer then uses (``_publish_shared``).
    SHARED = "shared"
    #: Reads of ``WAIT_SLICE_S`` at most (a short wait of a key another process writes
    #: first, such as a summary published before the verdict).
    SLICED = "sliced"


class Wait(NamedTuple):
    """A step of the protocol waits for ``key`` until ``deadline`` (the checker's clock):
    it is sent the key's value, or ``None`` when the deadline passed first."""

    key: str
    deadline: float
    read: Read = Read.SLICED


Steps = Generator[Wait, "str | None", "Divergence | None"]


class Compile:
    """One compile of this rank, from its publication to its verdict."""

    __slots__ = ("function", "count", "function_dir", "directory", "program", "signature",
                 "link", "arrival", "arrived_at")

    def __init__(self, function: str, count: int, function_key: str, program: Program,
                 signature: Signature | None, link: SpanLink | None) -> None:
        self.function = function
        self.count = count
        self.function_dir = f"{PREFIX}/{function_key}/"
        self.directory = f"{self.function_dir}{count}/"
        self.program = program
        self.signature = signature  # kept until settled: its summary is made on request
        self.link = link
        self.arrival = 0  # what the arrival counter returned (1: this rank compares)
        self.arrived_at = 0.0


class Checker:
    """Publishes this rank's compiles and settles them with its peers (one per process).

    ``clock`` is the time the deadlines of waits are measured in (``time.monotonic``;
    the fleet simulation passes its own).
    """

    def __init__(self, coordination: _jax_read.Coordination, timeout_s: float,
                 report: Reporter, failopen: FailOpen,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = coordination.client
        self.rank = coordination.process_index
        self.count = coordination.process_count
        self.timeout_s = timeout_s
        self.clock = clock
        self._report = report
        self._failopen = failopen
        self._cond = threading.Condition(threading.RLock())
        self._queue: deque[Compile] = deque()  # to publish
        self._waiting: deque[Compile] = deque()  # published, to settle
        self._reading: list[tuple[str, Read]] = []  # the reads in flight (closing ends them)
        self._busy = 0  # taken off a queue, not done yet
        self._publisher: threading.Thread | None = None
        self._settler: threading.Thread | None = None
        self._closed = False
        #: After this (``time.monotonic``), no new call of the client is made: closing.
        self._calls_until = float("inf")
        self._failures = 0
        self.dropped = 0
        self.unresolved = 0  # compiles no verdict came for (no comparer, even a second)
        self.off = False
        #: The verdicts seen of each function, to tell a shifted ordinal (``_ordinals``).
        self._ordinals = Ordinals(self.rank, self.count)

    # --- the compiling thread ------------------------------------------------------

    def compile_of(self, record: CompileRecord, link: SpanLink | None) -> Compile:
        identity = _fingerprint.function_identity(record.function)
        return Compile(record.function.qualname, record.count, function_key(identity),
                       (record.fingerprint, record.program_fingerprint), record.signature,
                       link)

    def submit(self, record: CompileRecord, link: SpanLink | None) -> None:
        """Queue a compile for comparison; never blocks."""
        item = self.compile_of(record, link)
        with self._cond:
            if self._closed or self.off:
                return
            if len(self._queue) + len(self._waiting) >= QUEUE_SIZE:
                self.dropped += 1
                return
            self._queue.append(item)
            self._cond.notify_all()
            if self._publisher is None:
                self._publisher = threading.Thread(target=self._publish_loop,
                                                   name="otel_jax-ranks", daemon=True)
                self._settler = threading.Thread(target=self._settle_loop,
                                                 name="otel_jax-ranks", daemon=True)
                self._publisher.start()
                self._settler.start()

    def check_now(self, record: CompileRecord, link: SpanLink | None) -> Divergence | None:
        """Publish and wait, about ``timeout_s`` at most, for the verdict: the divergence
        found (reported), or ``None``. For ``on_divergence="raise"``."""
        if self.off:
            return None
        item = self.compile_of(record, link)
        if not self.publish(item):
            return None
        return self._drive(self.settle(item))

    # --- the protocol ------------------------------------------------------------------

    def publish(self, item: Compile) -> bool:
        """Set this rank's entry and count its arrival (never waits)."""
        fp, pf = item.program
        client = self.client
        if not self._call("publish", lambda: _jax_read.kv_set(
                client, f"{item.directory}{W.ENTRIES}/{self.rank}", f"{fp} {pf}")):
            return False
        arrival: list[int] = []
        if not self._call("publish", lambda: arrival.append(
                _jax_read.kv_increment(client, item.directory + W.ARRIVED))):
            return False
        item.arrival, item.arrived_at = arrival[0], self.clock()
        if item.arrival == self.count:  # the last to arrive: the comparer's wait ends
            self._call("publish", lambda: _jax_read.kv_set(client, self._all_key(item), "1"))
        return True

    @staticmethod
    def _all_key(item: Compile) -> str:
        # beside the entries: deleted with them once read
        return f"{item.directory}{W.ENTRIES}/{W.ALL}"

    def settle(self, item: Compile) -> Steps:
        """The verdict of a published compile: compare (the first to arrive) or read it,
        then report what this rank sees. Returns the first divergence reported."""
        named: dict[str, Any] | None = None
        verdict: dict[str, Any] | None = None
        if item.arrival == 1:
            verdict, named = yield from self._compare(item, wait=True)
        else:
            # One read of the verdict, however long the wait (a straggler, a dead rank):
            # every rank reads the same key, the service answers them all when it is set.
            # A late rank (after the comparer stopped waiting) reads it too.
            final = item.arrived_at + 2 * self.timeout_s + VERDICT_MARGIN_S
            shared = item.directory + W.VERDICT
            raw = yield Wait(shared, final, Read.SHARED)
            if raw is None and not self.off:
                # No verdict: the comparer ended or died after it arrived. The first
                # rank here compares in its place; the others wait for that verdict.
                took: list[int] = []
                self._call("takeover", lambda: took.append(_jax_read.kv_increment(
                    self.client, item.directory + W.TAKEOVER)))
                if took and took[0] == 1:
                    verdict, named = yield from self._compare(item, wait=False)
                elif took:
                    again = self.clock() + self.timeout_s + VERDICT_MARGIN_S
                    raw = yield Wait(shared, again, Read.SHARED)
            if verdict is None and raw is not None:
                verdict = loads(raw)
        if verdict is None:
            if not self.off:
                self.unresolved += 1
            return None
        return (yield from self._conclude(item, verdict, named))

    def _compare(self, item: Compile, wait: bool,
                 ) -> Generator[Wait, str | None, tuple[dict[str, Any] | None,
                                                          dict[str, Any] | None]]:
        """The comparer: wait for every rank (or the deadline), read the entries once,
        and write the verdict (and the named divergence, from the two sides' summaries).
        ``wait=False``: it takes over from a comparer that never answered."""
        everyone = wait and item.arrival >= self.count
        if wait and not everyone:
            everyone = (yield Wait(self._all_key(item), item.arrived_at + self.timeout_s,
                                   Read.OWN)) is not None
        if not everyone:
            # Closed before the entries are read: a rank whose arrival comes after this
            # is late, and reads the shared verdict (no delivery is made for it).
            self._call("close", lambda: _jax_read.kv_increment(
                self.client, item.directory + W.ARRIVED, CLOSED))
        found: list[tuple[str, str]] = []
        if not self._call("read", lambda: found.extend(
                _jax_read.kv_dir_get(self.client, f"{item.directory}{W.ENTRIES}/"))):
            return None, None
        entries: dict[int, Program] = {}
        for key, value in found:
            try:
                rank = int(key.rpartition("/")[2])
            except ValueError:
                continue
            if 0 <= rank < self.count:
                entries[rank] = parse_entry(value)
        entries[self.rank] = item.program
        # Read once: the entries are not needed any more; the keys of an ordinal long
        # past go too (late ranks read the verdict of the recent ones).
        self._call("clean-up", lambda: _jax_read.kv_delete(
            self.client, f"{item.directory}{W.ENTRIES}"))
        if item.count > KEEP:
            self._call("clean-up", lambda: _jax_read.kv_delete(
                self.client, f"{item.function_dir}{item.count - KEEP}"))
        by_program: dict[Program, list[int]] = {}
        for rank in sorted(entries):
            by_program.setdefault(entries[rank], []).append(rank)
        groups = sorted((Group(p, tuple(r)) for p, r in by_program.items()),
                        key=lambda g: g.ranks[0])
        absent = [r for r in range(self.count) if r not in entries]
        if absent:
            shifted = self._ordinals.shifted(item.function_dir, item.count, absent,
                                             entries)
            absent = [r for r in absent if r not in shifted]
        verdict: dict[str, Any] = {
            W.GROUPS: [[g.program[0], g.program[1], encode_ranks(g.ranks)] for g in groups],
            W.COMPARER: self.rank}
        if absent:
            verdict[W.MISSING] = encode_ranks(absent)
        pair = pair_of(groups, item.program)
        if pair is not None:
            others = [r for g in groups if g.program != item.program for r in g.ranks]
            if len(self._ordinals.shifted(item.function_dir, item.count, others,
                                          entries)) == len(others):
                pair = None  # the same programs as the other ranks, one ordinal off
        signature = item.signature
        mine = summary(signature) if signature is not None and (
            absent or pair is not None) else {}
        if pair is not None:
            kind = kind_of(*pair)
            verdict[W.KIND] = kind.value
            if kind is DivergenceKind.SIGNATURE:
                verdict[W.WANTED] = [g.ranks[0] for g in pair if self.rank not in g.ranks]
        if absent and mine:
            # A rank that arrives later compares itself with this summary.
            self._set(f"{item.directory}{W.SUMMARIES}/{self.rank}", mine)
        if not self._publish_shared(item.directory + W.VERDICT, verdict):
            return None, None
        named: dict[str, Any] | None = None
        if pair is not None and verdict[W.KIND] == DivergenceKind.SIGNATURE.value:
            sides: list[dict[str, Any] | None] = []
            for group in pair:
                if self.rank in group.ranks:
                    sides.append(mine)
                    continue
                # only the comparer reads a summary it asked for
                raw = yield Wait(f"{item.directory}{W.SUMMARIES}/{group.ranks[0]}",
                                 self.clock() + self.timeout_s, Read.OWN)
                sides.append(loads(raw) if raw is not None else None)
            first, second = pair
            if sides[0] is not None and sides[1] is not None:
                diff = summary_diff(sides[0], sides[1])
                text = named_text(diff, first.ranks, second.ranks)
            else:
                diff = []
                text = (f"different signatures ({ranks_text(first.ranks)} vs "
                        f"{ranks_text(second.ranks)}); the summary of one side did not "
                        f"arrive within {self.timeout_s:g} s")
            named = {W.TEXT: text, W.DIFF: diff}
            self._publish_shared(item.directory + W.NAMED,
                                 {W.TEXT: text, W.DIFF: diff[:MAX_NAMED_DIFF]})
        return verdict, named

    def _conclude(self, item: Compile, verdict: dict[str, Any],
                  named: dict[str, Any] | None) -> Steps:
        """Report what the verdict says, from this rank's side."""
        groups: list[Group] = []
        for g in verdict.get(W.GROUPS) or ():
            try:
                groups.append(Group((str(g[0]), str(g[1])), decode_ranks(g[2], self.count),
                                    str(g[2])))
            except (IndexError, TypeError):
                continue
        groups = [g for g in groups if g.ranks]
        self._ordinals.remember(item.function_dir, item.count, groups, item.program)
        absent = decode_ranks(verdict.get(W.MISSING) or "", self.count)
        if not any(self.rank in g.ranks for g in groups):
            return (yield from self._late(item, verdict, groups))
        if self.rank in (verdict.get(W.WANTED) or ()) and item.signature is not None:
            self._set(f"{item.directory}{W.SUMMARIES}/{self.rank}", summary(item.signature))
        reported: Divergence | None = None
        kind = verdict.get(W.KIND)
        pair = pair_of(groups, item.program) if kind else None
        if pair is not None:
            first, second = pair
            sides = tuple(g.ranks for g in groups)
            if kind == DivergenceKind.SIGNATURE.value:
                if named is None:
                    raw = yield Wait(item.directory + W.NAMED,
                                     self.clock() + self.timeout_s + VERDICT_MARGIN_S,
                                     Read.SHARED)
                    named = loads(raw) if raw is not None else None
                text = str((named or {}).get(W.TEXT) or (
                    f"different signatures ({ranks_text(first.ranks)} vs "
                    f"{ranks_text(second.ranks)}); the comparing rank named no paths"))
                diff = tuple(d for d in (named or {}).get(W.DIFF) or ()
                             if isinstance(d, dict))
                div = Divergence(item.function, item.count, DivergenceKind.SIGNATURE, text,
                                 sides, (), diff, self.rank, time.time())
            else:
                div = Divergence(item.function, item.count, DivergenceKind.PROGRAM,
                                 program_text(first.ranks, second.ranks), sides, (), (),
                                 self.rank, time.time())
            reported = self._emit(item, div)
        if absent:
            present = sorted(r for g in groups for r in g.ranks)
            gone = self._emit(item, missing(item.function, item.count, present, absent,
                                            self.rank, self.timeout_s))
            reported = reported or gone
        return reported

    def _late(self, item: Compile, verdict: dict[str, Any], groups: list[Group]) -> Steps:
        """This rank arrived after the verdict: it was reported missing. Its entry goes;
        it names a difference with the others itself, from the comparer's summary."""
        # The comparer deleted the entries before this one came (and the others as late).
        self._call("clean-up", lambda: _jax_read.kv_delete(
            self.client, f"{item.directory}{W.ENTRIES}"))
        if not groups or any(not differ(g.program, item.program) for g in groups):
            return None  # the others' program: late, and reported missing, only
        comparer = verdict.get(W.COMPARER)
        theirs = next((g for g in groups if comparer in g.ranks), groups[0])
        me = (self.rank,)
        if kind_of(theirs, Group(item.program, me)) is DivergenceKind.PROGRAM:
            div = Divergence(item.function, item.count, DivergenceKind.PROGRAM,
                             program_text(theirs.ranks, me), (theirs.ranks, me), (), (),
                             self.rank, time.time())
            return self._emit(item, div)
        raw = yield Wait(f"{item.directory}{W.SUMMARIES}/{comparer}",
                         self.clock() + min(self.timeout_s, VERDICT_MARGIN_S))
        other = loads(raw) if raw is not None else None
        mine = summary(item.signature) if item.signature is not None else {}
        diff = summary_diff(other, mine) if other is not None else []
        div = Divergence(item.function, item.count, DivergenceKind.SIGNATURE,
                         named_text(diff, theirs.ranks, me), (theirs.ranks, me), (),
                         tuple(diff), self.rank, time.time())
        return self._emit(item, div)

    # --- reports and calls ----------------------------------------------------------------

    def _emit(self, item: Compile, div: Divergence) -> Divergence:
        self._ordinals.diverged(item.function_dir, item.count)
        div = Divergence(div.function, div.count, div.kind, div.text, div.ranks,
                         div.missing_ranks, div.diff, div.process_index, div.detected,
                         item.link)
        with self._failopen.guard("divergence report"):
            self._report(div)
        return div

    def _publish_shared(self, key: str, value: dict[str, Any]) -> bool:
        """Writes a key every rank reads (``Read.SHARED``), into its first generation that
        is not ``WAKE`` (set by a rank that closed while reading it: its peers moved to
        the next). A generation already set otherwise (a comparer that took over wrote
        it too) stands: the first writer wins, so every rank reads one verdict."""
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        client = self.client
        out: list[Any] = []

        def create(target: str) -> None:
            out.append(_jax_read.kv_create(client, target, text))

        def read(target: str) -> None:
            out.append(_jax_read.kv_wait(client, target, 1))

        for n in range(MAX_GENERATIONS):
            target = generation(key, n)
            out.clear()
            if not self._call("publish", functools.partial(create, target)):
                return False
            if out[0]:
                return True
            out.clear()
            if not self._call("publish", functools.partial(read, target)):
                return False
            if out[0] != WAKE:
                return True
        return False

    def _set(self, key: str, value: dict[str, Any]) -> bool:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return self._call("publish", lambda: _jax_read.kv_set(self.client, key, text))

    def _call(self, what: str, fn: Callable[[], Any]) -> bool:
        if self.off or time.monotonic() > self._calls_until:
            return False
        try:
            fn()
        except Exception as exc:
            self._failed(what, exc)
            return False
        self._failures = 0
        return True

    def _failed(self, what: str, exc: BaseException) -> None:
        self._failures += 1
        if self._failures >= MAX_FAILURES:
            self.off = True
            self._failopen.warn_once(
                Topic.RANKS_OFF,
                "otel_jax: the coordination service of this multi-process job failed "
                f"{self._failures} times ({what}: {type(exc).__name__}: "
                f"{safe_repr(str(exc), 160)}); ranks are no longer compared in this "
                "process. The jit calls are unaffected.")

    def _wait(self, wait: Wait) -> str | None:
        """The key's value, or ``None`` at the deadline; none once closing. An ``OWN`` or
        ``SHARED`` key is one read, which closing ends by setting the key to ``WAKE``
        (a shared one only if it is not set: then the read is ending anyway). A
        ``SLICED`` key is read in slices of at most ``WAIT_SLICE_S`` (at least 1 ms), so
        that closing finds the thread out of the client within one slice. The main
        thread (``"raise"``) cannot be inside a read at finalization: one read."""
        sliced = (wait.read is Read.SLICED
                  and threading.current_thread() is not threading.main_thread())
        key, generations = wait.key, 0
        while True:
            reading = (key, wait.read)
            with self._cond:
                if self.off or self._closed:
                    return None
                self._reading.append(reading)
            left = wait.deadline - self.clock()
            # rounded up: a read that ends just short of the deadline is not read again
            timeout_ms = max(1, math.ceil((min(left, WAIT_SLICE_S) if sliced else left)
                                          * 1000))
            try:
                value = _jax_read.kv_wait(self.client, key, timeout_ms)
            except Exception as exc:
                self._failed("wait", exc)
                return None
            finally:
                with self._cond:
                    self._reading.remove(reading)
            self._failures = 0
            if value == WAKE and wait.read is not Read.SLICED:
                with self._cond:
                    if self._closed or wait.read is Read.OWN:
                        return None  # this process ended its own read (closing)
                # A peer closed while reading this key: its writer uses the next one.
                generations += 1
                if generations >= MAX_GENERATIONS:
                    return None
                key = generation(wait.key, generations)
                continue
            if value is not None or wait.deadline - self.clock() <= 0:
                return value

    def _drive(self, steps: Steps) -> Divergence | None:
        """Run the protocol's steps with the client's blocking reads."""
        try:
            wait = steps.send(None)
            while True:
                value = self._wait(wait)
                if self._closed:
                    # Uninstalled or exiting: what is not settled is left to the peers,
                    # and the client is not called again.
                    steps.close()
                    return None
                wait = steps.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    # --- the daemon threads -------------------------------------------------------------

    def _publish_loop(self) -> None:
        """Publishes entries as they come: never waits for a verdict, so that no peer's
        verdict waits for an entry queued behind one. Closing (uninstall, exit) still
        publishes what is queued: the peers are waiting for those entries."""
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closed and not self.off:
                        self._cond.wait(1.0)
                    if (self.off or not self._queue
                            or time.monotonic() > self._calls_until):
                        return
                    item = self._queue.popleft()
                    self._busy += 1
                published = False
                try:
                    published = self.publish(item)
                finally:
                    with self._cond:
                        self._busy -= 1
                        if published and not self._closed:
                            self._waiting.append(item)
                        self._cond.notify_all()
        except Exception as exc:  # never let the thread die loudly
            self._failopen.failed("rank comparison", exc)

    def _settle_loop(self) -> None:
        """Settles the published compiles one after the other, in the order this rank
        arrived: a comparer's duty never waits behind a verdict of a compile that arrived
        after it, so no two ranks wait on each other."""
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._closed and not self.off:
                        self._cond.wait(1.0)
                    if self.off or self._closed:
                        return
                    item = self._waiting.popleft()
                    self._busy += 1
                try:
                    self._drive(self.settle(item))
                finally:
                    item.signature = None
                    with self._cond:
                        self._busy -= 1
                        self._cond.notify_all()
        except Exception as exc:
            self._failopen.failed("rank comparison", exc)

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
            self._closed = True
            self._waiting.clear()
            start = time.monotonic()
            self._calls_until = min(self._calls_until, start + timeout)
            self._cond.notify_all()
            threads = [t for t in (self._publisher, self._settler)
                       if t is not None and t is not threading.current_thread()]
            reading = list(self._reading)
        for key, read in reading:
            try:
                if read is Read.OWN:
                    _jax_read.kv_set(self.client, key, WAKE)
                elif read is Read.SHARED:
                    _jax_read.kv_create(self.client, key, WAKE)
            except Exception:
                pass  # the read ends at its deadline, or with the service
        end = start + timeout + WAIT_SLICE_S
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in threads)


# --- the engine's side ----------------------------------------------------------------

class CrossRank:
    """The engine's handle: off for single-process programs (one attribute read per compile)."""

    def __init__(self, failopen: FailOpen) -> None:
        self._failopen = failopen
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
        coordination = _jax_read.coordination()
        if coordination is None:
            return None
        with self._lock:
            if self.checker is not None:
                return self.checker
            lacking = _jax_read.coordination_missing(coordination.client)
            report = self.report
            checker = Checker(coordination, self.timeout_s,
                              report if report is not None else (lambda d: None),
                              self._failopen)
            if lacking:
                checker.off = True
                self._failopen.warn_once(
                    Topic.RANKS_METHODS,
                    "otel_jax: this JAX's distributed runtime client lacks "
                    f"{', '.join(lacking)}; ranks of this multi-process job are not "
                    "compared. The jit calls are unaffected.")
            self.checker = checker
            if not _live:
                # Registered now, after jax.distributed.initialize registered its own
                # shutdown: exit runs this first, while the service is still there.
                atexit.register(_at_exit)
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


def _at_exit() -> None:
    try:
        # Compiles still on the emitting thread reach the check first: the peers wait
        # for their entries (exit flushes that thread too, but maybe after this).
        WORKER.flush(EXIT_PUBLISH_S)
    except Exception:
        pass
    for checker in list(_live):
        try:
            checker.close(EXIT_PUBLISH_S)
        except Exception:
            pass
