"""The cross-rank check's protocol: who compares, what a verdict is, and what each rank
reports from it.

Each compile of a user function in a job of several processes is compared across
ranks over JAX's own coordination service (the key-value store of the distributed
runtime client ``jax.distributed.initialize`` started; no new server, no new
dependency). The service runs inside rank 0's process and also carries the job's
heartbeats and barriers, so what each compile costs it is linear in the rank count
and small: keys live under ``otel_jax/compiles/<function digest>/<ordinal>/``
(the digest of ``_portable.function_identity`` and the line, the same on every
host; the ordinal is ``record.count``), with the names of ``_vocab.RankWire``::

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

The comparer deletes the entries it read, and the keys of the ordinal ``KEEP``
compiles back (the verdict and the counters: a few hundred bytes per ordinal whatever
the rank count, and the summaries asked for); what stays at exit goes with the job's
coordination service.

The protocol's steps are generators that yield the key they wait for and its
deadline (a ``_ranks_transport.Wait``); every other call goes through the
``_ranks_transport.Channel`` over a ``Store``. The checker's threads (``_ranks``)
drive them with the client's blocking reads, and ``benchmarks/fleet_scale.py`` drives
the same code for 1,024 simulated ranks, over its in-process store.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Generator
from typing import Any

from .._capture._signature import Signature
from .._core._failopen import FailOpen
from .._core._portable import function_identity
from .._core._vocab import DivergenceKind
from .._core._vocab import RankWire as W
from .._pipeline._record import CompileRecord, Divergence, SpanLink
from ._ordinals import Ordinals
from ._ranks_transport import Channel, Read, Wait
from ._wire import (
    MAX_NAMED_DIFF,
    Group,
    Program,
    decode_ranks,
    differ,
    encode_ranks,
    function_key,
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
#: Ordinals of a function whose keys stay on the service (late ranks read the verdict).
KEEP = 64
#: Beyond the comparer's own deadline, how long a rank waits for the verdict before
#: another rank compares in its place (the comparer may have verdicts queued before).
VERDICT_MARGIN_S = 5.0
#: Added to the arrival counter by a comparer that stops waiting for the others: a rank
#: whose arrival returns more came after the comparer read the entries (it is late).
#: Above any rank count, and twice (a comparer's, a takeover's) plus the ranks still a
#: 32-bit integer: the service parses a counter as one (``COUNTER_MAX``).
CLOSED = 1 << 24

Reporter = Callable[[Divergence], None]
Steps = Generator[Wait, "str | None", "Divergence | None"]


class Compile:
    """One compile of this rank, from its publication to its verdict."""

    __slots__ = ("function", "count", "function_dir", "directory", "program", "signature",
                 "link", "arrival", "arrived_at", "stage", "named")

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
        self.stage = 0  # the tree (``_ranks_tree``): the first level whose verdict it awaits
        #: the tree: [signature fp, other signature fp, changes] named on the way up
        self.named: list[list[Any]] = []


class RankProtocol:
    """This rank's steps of the check: publish a compile, then settle it with its peers
    (compare, or read the verdict), over ``channel`` (one per process)."""

    def __init__(self, channel: Channel, rank: int, count: int, timeout_s: float,
                 report: Reporter, failopen: FailOpen) -> None:
        self.channel = channel
        self.rank = rank
        self.count = count
        self.timeout_s = timeout_s
        self.clock = channel.clock
        self._report = report
        self._failopen = failopen
        self.unresolved = 0  # compiles no verdict came for (no comparer, even a second)
        #: The verdicts seen of each function, to tell a shifted ordinal (``_ordinals``).
        self._ordinals = Ordinals(self.rank, self.count)

    def compile_of(self, record: CompileRecord, link: SpanLink | None) -> Compile:
        # The function as its compiles are counted (``record.count``): two functions of
        # one name in one file (two ``jax.jit(lambda ...)``) are counted apart, so their
        # ordinals must not share keys. The line, not the directory: hosts differ there.
        identity = f"{function_identity(record.function)}:{record.function.line}"
        return Compile(record.function.qualname, record.count, function_key(identity),
                       (record.fingerprint, record.program_fingerprint), record.signature,
                       link)

    def publish(self, item: Compile) -> bool:
        """Set this rank's entry and count its arrival (never waits)."""
        fp, pf = item.program
        channel = self.channel
        if not channel.set("publish", f"{item.directory}{W.ENTRIES}/{self.rank}", f"{fp} {pf}"):
            return False
        arrival = channel.increment("publish", item.directory + W.ARRIVED)
        if arrival is None:
            return False
        item.arrival, item.arrived_at = arrival, self.clock()
        if item.arrival == self.count:  # the last to arrive: the comparer's wait ends
            channel.set("publish", self._all_key(item), "1")
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
            if raw is None and not self.channel.off:
                # No verdict: the comparer ended or died after it arrived. The first
                # rank here compares in its place; the others wait for that verdict.
                took = self.channel.increment("takeover", item.directory + W.TAKEOVER)
                if took == 1:
                    verdict, named = yield from self._compare(item, wait=False)
                elif took is not None:
                    again = self.clock() + self.timeout_s + VERDICT_MARGIN_S
                    raw = yield Wait(shared, again, Read.SHARED)
            if verdict is None and raw is not None:
                verdict = loads(raw)
        if verdict is None:
            if not self.channel.off:
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
            self.channel.increment("close", item.directory + W.ARRIVED, CLOSED)
        found = self.channel.dir_get("read", f"{item.directory}{W.ENTRIES}/")
        if found is None:
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
        self.channel.delete("clean-up", f"{item.directory}{W.ENTRIES}")
        if item.count > KEEP:
            self.channel.delete("clean-up", f"{item.function_dir}{item.count - KEEP}")
        by_program: dict[Program, list[int]] = {}
        for rank in sorted(entries):
            by_program.setdefault(entries[rank], []).append(rank)
        groups = sorted((Group(p, tuple(r)) for p, r in by_program.items()),
                        key=lambda g: g.ranks[0])
        absent = [r for r in range(self.count) if r not in entries]
        return (yield from self._decide(item, groups, absent, entries))

    def _decide(self, item: Compile, groups: list[Group], absent: list[int],
                entries: dict[int, Program],
                ) -> Generator[Wait, str | None, tuple[dict[str, Any] | None,
                                                         dict[str, Any] | None]]:
        """The verdict of the compared ranks (``groups``: every rank that arrived, by
        program; ``absent``: the others), published for every rank to read, and the
        divergence named from the two sides' summaries. ``entries``: the programs of at
        least this rank, the ranks of the groups that differ from it and ``absent``."""
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
            known = (self._known_diff(item, *pair) if kind is DivergenceKind.SIGNATURE
                     else None)
            if known is not None:
                # named already, from two summaries the ranks sent unasked: in the verdict
                verdict[W.TEXT] = named_text(known, pair[0].ranks, pair[1].ranks)
                verdict[W.DIFF] = known[:MAX_NAMED_DIFF]
            elif kind is DivergenceKind.SIGNATURE:
                verdict[W.WANTED] = [g.ranks[0] for g in pair if self.rank not in g.ranks]
        if absent and mine:
            # A rank that arrives later compares itself with this summary.
            self._set(f"{item.directory}{W.SUMMARIES}/{self.rank}", mine)
        if not self._publish_shared(item.directory + W.VERDICT,
                                    self._wire_verdict(item, verdict)):
            return None, None
        named: dict[str, Any] | None = None
        if W.TEXT in verdict:
            named = {W.TEXT: verdict[W.TEXT], W.DIFF: verdict[W.DIFF]}
        elif pair is not None and verdict[W.KIND] == DivergenceKind.SIGNATURE.value:
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
        groups = self._groups(item, verdict)
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
                if named is None and W.TEXT in verdict:
                    named = {W.TEXT: verdict[W.TEXT], W.DIFF: verdict.get(W.DIFF)}
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
                                 program_text(first, second), sides, (), (),
                                 self.rank, time.time())
            reported = self._emit(item, div)
        if absent:
            present = (groups[0].ranks if len(groups) == 1
                       else tuple(sorted(itertools.chain.from_iterable(g.ranks for g in groups))))
            gone = self._emit(item, missing(item.function, item.count, present, absent,
                                            self.rank, self.timeout_s))
            reported = reported or gone
        return reported

    def _groups(self, item: Compile, verdict: dict[str, Any]) -> list[Group]:
        """The verdict's groups: the ranks of each program."""
        groups: list[Group] = []
        for g in verdict.get(W.GROUPS) or ():
            try:
                groups.append(Group((str(g[0]), str(g[1])), decode_ranks(g[2], self.count),
                                    str(g[2])))
            except (IndexError, TypeError):
                continue
        return [g for g in groups if g.ranks]

    def _known_diff(self, item: Compile, first: Group, second: Group,
                    ) -> list[dict[str, str]] | None:
        """The changes from ``first``'s signature to ``second``'s, when this rank has
        both sides' summaries without asking (the tree's); ``None`` to ask for them."""
        return None

    def _wire_verdict(self, item: Compile, verdict: dict[str, Any],
                      ) -> dict[str, Any] | str:
        """The verdict as every rank reads it (JSON, or text already in its wire form)."""
        return verdict

    def _late(self, item: Compile, verdict: dict[str, Any], groups: list[Group]) -> Steps:
        """This rank arrived after the verdict: it was reported missing. Its entry goes;
        it names a difference with the others itself, from the comparer's summary."""
        # The comparer deleted the entries before this one came (and the others as late).
        late_entries = self._late_entries(item)
        if late_entries:
            self.channel.delete("clean-up", late_entries)
        if not groups or any(not differ(g.program, item.program) for g in groups):
            return None  # the others' program: late, and reported missing, only
        comparer = verdict.get(W.COMPARER)
        theirs = next((g for g in groups if comparer in g.ranks), groups[0])
        me = (self.rank,)
        ours = Group(item.program, me)
        if kind_of(theirs, ours) is DivergenceKind.PROGRAM:
            div = Divergence(item.function, item.count, DivergenceKind.PROGRAM,
                             program_text(theirs, ours), (theirs.ranks, me), (), (),
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

    def _late_entries(self, item: Compile) -> str:
        """The key a late rank deletes: its entry, written after the comparer read them."""
        return f"{item.directory}{W.ENTRIES}"

    # --- reports -----------------------------------------------------------------------

    def _emit(self, item: Compile, div: Divergence) -> Divergence:
        self._ordinals.diverged(item.function_dir, item.count)
        div = Divergence(div.function, div.count, div.kind, div.text, div.ranks,
                         div.missing_ranks, div.diff, div.process_index, div.detected,
                         item.link)
        with self._failopen.guard("divergence report"):
            self._report(div)
        return div

    def _publish_shared(self, key: str, value: dict[str, Any] | str) -> bool:
        """Writes a key every rank reads (``Read.SHARED``): the first writer wins, so every
        rank reads one verdict (``Channel.publish_shared``)."""
        return self.channel.publish_shared(key, _text(value))

    def _set(self, key: str, value: dict[str, Any]) -> bool:
        return self.channel.set("publish", key, _text(value))


def _text(value: dict[str, Any] | str) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
