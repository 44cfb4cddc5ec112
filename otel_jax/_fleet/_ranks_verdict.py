"""The cross-rank check's third stage, the verdict: what the comparer decides from what it
gathered, the verdict's wire format, the takeover of a comparer that never answered, and
what each rank reports from the verdict it reads.

The verdict (``v``) groups the ranks by program (``_vocab.RankWire``); a rank's memory of
earlier verdicts (``Ordinals``) tells a shifted ordinal from a divergence. In a tree the
verdict is as short as each rank can make the whole one from (``TreeVerdict._wire_verdict``);
the whole one is set beside it (``f``) for the ranks that need it. How a rank one compile
ahead is told apart: docs/fleet.md.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from .._core._vocab import CauseKind, DiffKey, DivergenceKind
from .._core._vocab import RankWire as W
from .._pipeline._record import Divergence
from . import _ranks_name as words
from ._ranks_arrive import VERDICT_MARGIN_S, Compile
from ._ranks_gather import Gather, Summary, TreeGather, missing_runs, runs_within
from ._ranks_name import DIFF_FIELDS, MAX_NAMED_DIFF, Group, Program
from ._ranks_transport import Read, Run, Wait, as_runs, dumps, loads, parse_runs, runs_text

Reporter = Callable[[Divergence], None]
Steps = Generator[Wait, "str | None", "Divergence | None"]
Outcome = Generator[Wait, "str | None", "tuple[dict[str, Any] | None, words.Named]"]


# --- ranks as ranges, programs told apart, the two sides a divergence names ---------------

def ranks_of(runs: Iterable[Run]) -> tuple[int, ...]:
    return tuple(itertools.chain.from_iterable(range(a, b + 1) for a, b in runs))


def encode_ranks(ranks: Iterable[int]) -> str:
    """``0-6,8``: ranks as ranges (a job's 1,024 ranks in 6 bytes when they agree)."""
    return runs_text(as_runs(ranks))


def decode_ranks(text: str, limit: int) -> tuple[int, ...]:
    """The ranks ``encode_ranks`` wrote, those below ``limit`` (the job's rank count)."""
    return ranks_of(parse_runs(text, 0, limit - 1))


def same_program(a: Program | None, b: Program | None) -> bool:
    """Two compiles known to be of one program (signature fingerprints set and equal)."""
    return a is not None and b is not None and bool(a[0]) and a[0] == b[0] and not differ(a, b)


def differ(a: Program, b: Program) -> bool:
    if a[0] and b[0] and a[0] != b[0]:
        return True
    return bool(a[1] and b[1] and a[1] != b[1])


def pair_of(groups: Sequence[Group], mine: Program) -> tuple[Group, Group] | None:
    """The two groups a divergence names, lowest rank first: the largest group and the
    first one that differs from it (by lowest rank), if this rank's program differs
    from some group. Entries that cannot be told apart (a fingerprint left empty on one
    side) are not a divergence: only a difference both sides measured is."""
    if not any(differ(mine, g.program) for g in groups):
        return None
    ref = max(groups, key=lambda g: (len(g.ranks), -g.ranks[0]))
    other = next((g for g in groups if g is not ref and differ(ref.program, g.program)),
                 None)
    if other is None:  # this rank's group differs from a group that does not differ from ref
        mine_group = next(g for g in groups if g.program == mine)
        ref, other = mine_group, next(g for g in groups if differ(mine, g.program))
    first, second = sorted((ref, other), key=lambda g: g.ranks[0])
    return first, second


def kind_of(first: Group, second: Group) -> DivergenceKind:
    a, b = first.program[0], second.program[0]
    return DivergenceKind.SIGNATURE if a and b and a != b else DivergenceKind.PROGRAM


# --- what one rank remembers of each function's verdicts --------------------------------

#: Ordinals remembered per function, and functions remembered.
MAX_ORDINALS = 64
MAX_FUNCTIONS = 1024


class _Seen:
    __slots__ = ("groups", "diverged")

    def __init__(self) -> None:
        self.groups: dict[int, list[tuple[Program, str]]] = {}
        self.diverged: int | None = None


class Ordinals:
    """One rank's memory of the verdicts of each function (keyed by its directory on the
    coordination service); safe to use from several threads."""

    def __init__(self, rank: int, count: int) -> None:
        self.rank = rank
        self.count = count
        self._lock = threading.RLock()
        self._functions: dict[str, _Seen] = {}

    def _seen(self, function: str) -> _Seen:
        """Under ``_lock``: what was seen of a function, made the most recent one."""
        seen = self._functions.pop(function, None) or _Seen()
        self._functions[function] = seen
        while len(self._functions) > MAX_FUNCTIONS:
            del self._functions[next(iter(self._functions))]
        return seen

    def remember(self, function: str, count: int, groups: Sequence[Group],
                 mine: Program) -> None:
        """The groups of the verdict of ``function``'s ordinal ``count`` (with this rank's
        own program when it is in none: it came late)."""
        kept = [(g.program, g.text or encode_ranks(g.ranks)) for g in groups]
        if not any(self.rank in g.ranks for g in groups):
            kept.append((mine, str(self.rank)))
        with self._lock:
            seen = self._seen(function)
            seen.groups[count] = kept
            while len(seen.groups) > MAX_ORDINALS:
                del seen.groups[min(seen.groups)]

    def diverged(self, function: str, count: int) -> None:
        """A divergence of ``function`` was reported at ordinal ``count``."""
        with self._lock:
            seen = self._seen(function)
            if seen.diverged is None or count < seen.diverged:
                seen.diverged = count

    def _programs_at(self, seen: _Seen, count: int) -> dict[int, Program]:
        out: dict[int, Program] = {}
        for program, ranks in seen.groups.get(count, ()):
            for r in decode_ranks(ranks, self.count):
                out[r] = program
        return out

    def shifted(self, function: str, count: int, ranks: Sequence[int],
                current: dict[int, Program]) -> set[int]:
        """Those of ``ranks`` that have been compiling this rank's programs one ordinal
        apart, at ``count`` (``current``: the entries there) and at the ordinal before,
        after a divergence of the function was reported: one rank compiled one program
        more (reported where it happened), and the ordinals are off by one since. Two
        ordinals in a row, both known: a program only one rank compiled breaks the
        pattern and is reported."""
        m = count
        with self._lock:
            seen = self._seen(function)
            if not ranks or seen.diverged is None or seen.diverged >= m:
                return set()  # no earlier divergence put the ordinals off
            known = {k: self._programs_at(seen, k) for k in (m - 1, m - 2)}
        known[m] = current
        mine = {k: known[k].get(self.rank) for k in known}
        shifted = set()
        for rank in ranks:
            # Their ordinal k is my ordinal k - d: the last two pairs known now. They
            # are ahead (d = 1) only if they have an entry here.
            shifts = [(-1, (m - 1, m - 2))]
            if rank in current:
                shifts.append((1, (m, m - 1)))
            if any(all(same_program(known[k].get(rank), mine.get(k - d)) for k in pairs)
                   for d, pairs in shifts):
                shifted.add(rank)
        return shifted


# --- the verdict ------------------------------------------------------------------------

class Verdict(Gather):
    """The verdict of a job of ``FAN_IN`` ranks or fewer, and what this rank reports."""

    _report: Reporter
    #: The verdicts seen of each function, to tell a shifted ordinal (``Ordinals``).
    _ordinals: Ordinals
    unresolved: int

    def _decide(self, item: Compile, groups: list[Group], absent: list[int],
                entries: dict[int, Program], mine: words.Side) -> Outcome:
        """The verdict of the compared ranks (``groups``: every rank that arrived, by
        program; ``absent``: the others), published for every rank to read, and the two
        sides of a divergence to name (``mine``: this rank's signature, summarised already
        when ranks are absent, who compare themselves with it once they come).
        ``entries``: the programs of at least this rank, the ranks of the groups that
        differ from it and ``absent``."""
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
        if pair is not None:
            kind = kind_of(*pair)
            verdict[W.KIND] = kind.value
            known = (words.known_diff(item.named, *pair)
                     if kind is DivergenceKind.SIGNATURE and item.named else None)
            if known is not None:
                # named already, from two summaries the ranks sent unasked: in the verdict
                verdict[W.TEXT] = words.named_text(known, pair[0].ranks, pair[1].ranks)
                verdict[W.DIFF] = known[:MAX_NAMED_DIFF]
            elif kind is DivergenceKind.SIGNATURE:
                verdict[W.WANTED] = [g.ranks[0] for g in pair if self.rank not in g.ranks]
        if absent and isinstance(mine, dict) and mine:
            self._set(f"{item.directory}{W.SUMMARIES}/{self.rank}", mine)
        if not self._publish_shared(item.directory + W.VERDICT,
                                    self._wire_verdict(item, verdict)):
            return None, None
        if W.TEXT in verdict:
            return verdict, {W.TEXT: verdict[W.TEXT], W.DIFF: verdict[W.DIFF]}
        sides: list[words.Side] = []
        if pair is not None and verdict[W.KIND] == DivergenceKind.SIGNATURE.value:
            for group in pair:
                # only the comparer reads a summary it asked for
                sides.append(mine if self.rank in group.ranks else (yield Wait(
                    f"{item.directory}{W.SUMMARIES}/{group.ranks[0]}",
                    self.clock() + self.timeout_s, Read.OWN)))
        return verdict, sides or None

    def _conclude(self, item: Compile, verdict: dict[str, Any], named: words.Named) -> Steps:
        """Report what the verdict says, from this rank's side, named in one call."""
        groups = self._groups(item, verdict)
        self._ordinals.remember(item.function_dir, item.count, groups, item.program)
        absent = decode_ranks(verdict.get(W.MISSING) or "", self.count)
        if not any(self.rank in g.ranks for g in groups):
            return (yield from self._late(item, verdict, groups))
        kind = verdict.get(W.KIND)
        pair = pair_of(groups, item.program) if kind else None
        if pair is not None and kind == DivergenceKind.SIGNATURE.value:
            if named is None and (W.TEXT in verdict or isinstance(verdict.get(W.DIFF), list)):
                # named in the verdict: by its changes only in a tree's (``say`` words them)
                named = {k: verdict.get(k) for k in (W.TEXT, W.DIFF) if k in verdict}
            if named is None:
                named = loads((yield Wait(item.directory + W.NAMED,
                                          self.clock() + self.timeout_s + VERDICT_MARGIN_S,
                                          Read.SHARED)))
        mine, said = words.say(words.Said(item.function, item.count, self.rank,
                                          self.timeout_s, groups, pair, kind, named, absent))
        if mine is not None:  # the comparer named the two sides: every rank reads it
            self._publish_shared(item.directory + W.NAMED,
                                 {W.TEXT: mine[W.TEXT], W.DIFF: mine[W.DIFF][:MAX_NAMED_DIFF]})
        reported: Divergence | None = None
        for div in said:
            div = self._emit(item, div)
            reported = reported or div
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
                             words.program_text(theirs, ours), (theirs.ranks, me), (), (),
                             self.rank, time.time())
            return self._emit(item, div)
        raw = yield Wait(f"{item.directory}{W.SUMMARIES}/{comparer}",
                         self.clock() + min(self.timeout_s, VERDICT_MARGIN_S))
        other = loads(raw)
        mine = words.summary(item.signature) if item.signature is not None else {}
        diff = words.summary_diff(other, mine) if other is not None else []
        div = Divergence(item.function, item.count, DivergenceKind.SIGNATURE,
                         words.named_text(diff, theirs.ranks, me), (theirs.ranks, me), (),
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
        return self.channel.publish_shared(key, dumps(value))

    def _set(self, key: str, value: dict[str, Any]) -> bool:
        return self.channel.set("publish", key, dumps(value))


class TreeVerdict(TreeGather, Verdict):
    """The verdict of a tree's root, worded short for every rank, and the takeover of the
    nodes whose comparer never answered."""

    def _judge_tree(self, item: Compile, level: int, arrival: int, wait: bool) -> Outcome:
        """Climb from the node of ``level`` (``TreeGather._climb``); at the root, decide
        the verdict, then clean the root's keys."""
        found = yield from self._climb(item, level, arrival, wait)
        if found is None:
            return None, None
        outcome = yield from self._verdict(item, found)
        self._clean_root(item)
        return outcome

    def _relative(self, item: Compile, wire: list[Any]) -> Outcome:
        """A verdict worded against the larger side's own signature (``_relative_wire``):
        a rank of that side makes the whole one from its leaves; a rank of the other
        side, or a missing one, reads the whole one (``f``)."""
        last = self.count - 1
        whole = len(wire) >= 3 and all(isinstance(v, str) for v in wire[:3])
        others = runs_within(wire[0], 0, last) if whole else []
        missed = runs_within(wire[1], 0, last) if whole else []
        diff = words.worded(item.signature, wire[3:]) if whole else None
        if diff is None or any(a <= self.rank <= b for a, b in [*others, *missed]):
            raw = yield Wait(item.directory + W.FULL, self.clock() + VERDICT_MARGIN_S)
            return loads(raw), None
        mine = missing_runs([*others, *missed], 0, last)
        ours = Group(item.program, ranks_of(mine), runs_text(mine))
        theirs = Group((str(wire[2]), ""), ranks_of(others), runs_text(others))
        first, second = sorted((ours, theirs), key=lambda g: g.ranks[0])
        if first is theirs:  # the changes are from the first side's values to the second's
            diff = [{**d, DiffKey.BEFORE: d[DiffKey.AFTER], DiffKey.AFTER: d[DiffKey.BEFORE]}
                    for d in diff]
        named = {W.TEXT: words.named_text(diff, first.ranks, second.ranks), W.DIFF: diff}
        verdict: dict[str, Any] = {
            W.GROUPS: [[g.program[0], g.program[1], g.text] for g in (first, second)],
            W.KIND: DivergenceKind.SIGNATURE.value, **named}
        if missed:
            verdict[W.MISSING] = runs_text(missed)
        return verdict, named

    def _await(self, item: Compile) -> Outcome:
        """Wait for the verdict, taking over the nodes of this rank's path whose comparer
        never answered, one level at a time."""
        shared = item.directory + W.VERDICT
        extra = 0.0 if item.arrival <= 2 else VERDICT_MARGIN_S
        # a group (level 0) is taken over by its parent's comparer (``_gather``)
        for level in range(max(1, item.stage), self.tree.depth):
            raw = yield Wait(shared, item.arrived_at + self.stage_s(level) + extra,
                             Read.SHARED)
            if raw is not None:
                return _verdict_of(raw), None
            if self.channel.off:
                return None, None
            took = self.channel.increment("takeover", self._takeover(item, level))
            if took == 1:
                verdict, named = yield from self._judge_tree(item, level, 0, wait=False)
                if verdict is not None:
                    return verdict, named
        raw = yield Wait(shared, self.clock() + self.timeout_s + VERDICT_MARGIN_S,
                         Read.SHARED)
        return (_verdict_of(raw) if raw is not None else None), None

    def _verdict(self, item: Compile, found: Summary) -> Outcome:
        """The root's summary as the flat protocol's verdict."""
        programs, missed = found
        groups = sorted((Group(p, ranks_of(runs), runs_text(runs))
                         for p, runs in programs.items()), key=lambda g: g.ranks[0])
        absent = list(ranks_of(missed))
        # the programs of the ranks the ordinal memory is asked about, not of them all
        lookup: dict[int, Program] = {self.rank: item.program}
        for g in groups:
            if g.program != item.program:
                lookup.update((r, g.program) for r in g.ranks)
        own = item.signature  # this rank's side (``_decide``)
        mine = (own if not absent else words.summary(own)) if own is not None else {}
        return (yield from self._decide(item, groups, absent, lookup, mine))

    def _wire_verdict(self, item: Compile, verdict: dict[str, Any],
                      ) -> dict[str, Any] | str:
        """The verdict every rank reads, as short as each rank can make the whole one
        from: when every rank that arrived compiled one program, which ranks are missing
        (each knows its program); when two signatures differ in the type of a few leaves,
        those changes against the larger side's own leaves (``_relative_wire``). The whole
        verdict is set first, for the ranks that need it."""
        groups = verdict.get(W.GROUPS) or ()
        if W.TEXT in verdict and len(groups) == 2:
            self._set(item.directory + W.FULL, verdict)
            relative = self._relative_wire(item, verdict)
            if relative is not None:
                return relative_text(relative)
            # every rank words the text itself from the changes (as lists) and the two
            # sides (with more, a rank's pair of sides might not be the comparer's)
            wire = {k: v for k, v in verdict.items() if k != W.TEXT}
            wire[W.DIFF] = [[d.get(f, "") for f in DIFF_FIELDS] for d in verdict[W.DIFF]]
            return wire
        if len(groups) != 1 or verdict.get(W.KIND):
            return verdict
        wire = {k: verdict[k] for k in (W.MISSING,) if verdict.get(k)}
        if wire:
            self._set(item.directory + W.FULL, verdict)
        return wire

    def _relative_wire(self, item: Compile, verdict: dict[str, Any]) -> list[Any] | None:
        """``[the other side's ranks, the missing ones, its signature fp, leaf, its type,
        ...]``: each change as the index of a leaf of this rank's signature and the other
        side's type there, when this rank is on the larger side and every change is a
        leaf's shape, dtype or weak type (what a rank of this side can word the same
        way, from its own signature). ``None`` otherwise."""
        groups = super()._groups(item, verdict)
        signature = item.signature
        ours = next((g for g in groups if self.rank in g.ranks), None)
        if (ours is None or len(groups) != 2 or signature is None
                or not signature.captured):
            return None
        theirs = groups[1] if groups[0] is ours else groups[0]
        if len(ours.ranks) < len(theirs.ranks):
            return None
        leaves = words.leaf_texts(signature)
        index = {path: i for i, (path, _) in enumerate(leaves)}
        mine = dict(leaves)
        wire: list[Any] = [theirs.text, verdict.get(W.MISSING) or "", theirs.program[0]]
        for d in verdict.get(W.DIFF) or ():
            path, kind = d.get(DiffKey.PATH), d.get(DiffKey.KIND)
            own, other = ((d.get(DiffKey.BEFORE), d.get(DiffKey.AFTER)) if groups[0] is ours
                          else (d.get(DiffKey.AFTER), d.get(DiffKey.BEFORE)))
            if kind not in _LEAF_KINDS or path not in index or mine[path] != own:
                return None
            wire += [index[path], other]
        return wire

    def _groups(self, item: Compile, verdict: dict[str, Any]) -> list[Group]:
        if W.GROUPS in verdict:
            return super()._groups(item, verdict)
        last = self.count - 1
        missed = runs_within(verdict.get(W.MISSING) or "", 0, last)
        if any(a <= self.rank <= b for a, b in missed):
            return []  # late: what the others compiled is in the whole verdict (``_late``)
        present = missing_runs(missed, 0, last)
        ranks = ranks_of(present)
        return [Group(item.program, ranks, runs_text(present))] if ranks else []

    def _late(self, item: Compile, verdict: dict[str, Any], groups: list[Group]) -> Steps:
        if W.GROUPS not in verdict:  # a short verdict: the whole one says what they compiled
            raw = yield Wait(item.directory + W.FULL, self.clock() + VERDICT_MARGIN_S)
            verdict = loads(raw) or {}
            groups = super()._groups(item, verdict)
        return (yield from super()._late(item, verdict, groups))

    def _late_entries(self, item: Compile) -> str:
        return ""  # a late rank wrote no entry (its increment said it was late)


#: Starts each field of a relative verdict (``relative_text``).
RELATIVE_MARK = "|"
#: Wrapped around a verdict that came as a list (``TreeVerdict._relative_wire``).
_RELATIVE = "relative"
_LEAF_KINDS = frozenset(k.value for k in (CauseKind.SHAPE, CauseKind.DTYPE,
                                          CauseKind.WEAK_TYPE))


def relative_text(wire: list[Any]) -> str:
    """A relative verdict (``_relative_wire``) as every rank reads it: its fields after a
    ``RELATIVE_MARK`` each (no JSON quotes: each byte is read by every rank), or as a
    JSON list when a field holds the mark."""
    fields = [str(f) for f in wire]
    if any(RELATIVE_MARK in f for f in fields):
        return json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
    return "".join(RELATIVE_MARK + f for f in fields)


def _verdict_of(raw: str) -> dict[str, Any] | None:
    if raw.startswith(RELATIVE_MARK):
        # [the other side's ranks, the missing ones, its signature fp, leaf, type, ...]
        fields: list[Any] = raw[len(RELATIVE_MARK):].split(RELATIVE_MARK)
        fields[3::2] = [int(f) if f.isdigit() else f for f in fields[3::2]]
        return {_RELATIVE: fields}
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if isinstance(value, list):
        return {_RELATIVE: value}
    return value if isinstance(value, dict) else None
