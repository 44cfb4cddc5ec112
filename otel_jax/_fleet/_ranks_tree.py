"""The cross-rank check as a tree: jobs of more ranks than ``FAN_IN``.

A job of ``FAN_IN`` ranks or fewer is one group, compared as ``_ranks_protocol`` says
(one comparer reads every entry). Past that, no rank reads every entry: the ranks
compare in groups of at most ``FAN_IN`` (the nodes of level 0: ranks ``0-127``,
``128-255``, ...), and each group sends one summary to its parent (level 1: nodes of
``FAN_IN`` groups), and so on up to the root, whose summary is the verdict. Each node
is what the flat protocol is for the whole job, with the same keys under
``<ordinal>/h/<level>.<node>/``: ``e/<slot>`` (a rank's entry at level 0; a child's
summary above), ``n`` (the arrival counter), ``e/all``, ``t`` (takeover). A summary is
the node's ranks grouped by program, as ranges, and the ones missing::

    {"g": [[signature fp, program fp, "0-16382"], ...], "m": "16383"}

so it stays a few hundred bytes whatever the node's size, and merging ``FAN_IN`` of them
costs the parent no more than reading ``FAN_IN`` entries. The verdict (``v``), the
named divergence (``d``), the summaries a comparer asks for (``s/<rank>``) are the flat
protocol's, at the ordinal's directory: every rank reads the verdict in one read.

Who compares a node: the first to arrive there (a rank at level 0; above, the rank
that pushed the first child summary), as in the flat protocol; it waits for ``all``
(set by the last to arrive) or its deadline, reads the node's entries once (an arrival
after that is late: the verdict names it missing, and it checks itself against the
verdict; a node's counter carries no closed mark, as the flat one's does, since its
32 bits hold the digests), pushes the summary up (created, never overwritten: the
first summary of a node stands), and only then deletes the entries. Deadlines,
from the comparer's own arrival at level 0 (``wait_s``): ``timeout_s`` at level 0 (the
flat protocol's), and at level ``L`` the moment a node below whose ranks arrived up to
``timeout_s`` later could have been taken over (``stage_s(L - 1)``), plus margins.

A comparer that dies at any level is replaced as in the flat protocol, one level at a
time: a rank waits for the verdict until ``stage_s(0)`` after it arrived (the first
two arrivals of a node; the others ``VERDICT_MARGIN_S`` longer, so that a late verdict
costs one call per node, not per rank), then takes over its level-0 node if it is
first on the node's takeover counter (a node already reported has no entries left:
nothing to do), and waits again until ``stage_s(1)`` before trying level 1, and so on:
each stage is past the latest moment that level's comparer could still be waiting.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Generator, Iterable
from typing import Any

from .._core._failopen import FailOpen
from .._core._vocab import DiffKey
from .._core._vocab import RankWire as W
from .._pipeline._record import CompileRecord, SpanLink
from . import _wire
from ._ranks_protocol import (
    KEEP,
    VERDICT_MARGIN_S,
    Compile,
    RankProtocol,
    Reporter,
    Steps,
)
from ._ranks_transport import Channel, Read, Wait
from ._wire import (
    MAX_NAMED_DIFF,
    Group,
    Program,
    Run,
    loads,
    named_text,
    pair_of,
    parse_entry,
    ranks_of,
    runs_text,
    summary,
    summary_diff,
)

#: The most entries (ranks, or child summaries) one comparer reads per compile.
FAN_IN = 128
#: A node's arrival counter: the arrivals in its low ``COUNT_BITS`` bits, above them the
#: sum of the arrivals' program digests, signed ``HASH_BITS``-bit integers (the last to
#: arrive tells the comparer whether they all compiled one program, so that it reads no
#: entry when they did). The service parses a counter as a 32-bit integer before it adds
#: (``_ranks_transport.COUNTER_MAX``): ``MAX_FAN_IN`` arrivals of the largest digests,
#: either sign, stay within it.
COUNT_BITS = 8
HASH_BITS = 17
MAX_FAN_IN = 128
#: Characters kept of the two fingerprints in a tree's entries and verdicts (hex: 36 and
#: 24 bits; every byte is paid once per rank per compile at the service).
SIGNATURE_CHARS = 9
PROGRAM_CHARS = 6
#: Pairs of signatures named on the way up that a summary carries.
MAX_NAMED = 4
#: A change of a named divergence in a tree's verdict: a list of these, in this order.
_DIFF_FIELDS = (DiffKey.PATH, DiffKey.KIND, DiffKey.BEFORE, DiffKey.AFTER)

Runs = list[Run]
#: A node's summary: its ranks grouped by program, and the ones missing.
Summary = tuple[dict[Program, Runs], Runs]
Outcome = Generator[Wait, "str | None", "tuple[dict[str, Any] | None, dict[str, Any] | None]"]


# --- the shape of the tree ----------------------------------------------------------------

class Tree:
    """Which node of each level a rank belongs to, and what a node holds."""

    def __init__(self, count: int, fan_in: int = FAN_IN) -> None:
        if not 2 <= fan_in <= MAX_FAN_IN:
            raise ValueError(f"a tree's fan-in is 2 to {MAX_FAN_IN}")
        self.count = count
        self.fan_in = fan_in
        self.widths: list[int] = []  # nodes per level, up to the root's 1
        n = count
        while True:
            n = -(-n // fan_in)
            self.widths.append(n)
            if n <= 1:
                break
        self.depth = len(self.widths)

    def path(self, rank: int) -> list[tuple[int, int]]:
        """(node, slot in it) at each level, from level 0 to the root."""
        out, index = [], rank
        for _ in range(self.depth):
            out.append((index // self.fan_in, index % self.fan_in))
            index //= self.fan_in
        return out

    def children(self, level: int, node: int) -> int:
        """Entries the node waits for: ranks at level 0, child nodes above."""
        below = self.count if level == 0 else self.widths[level - 1]
        return max(0, min(self.fan_in, below - node * self.fan_in))

    def ranks(self, level: int, node: int) -> Run:
        """The ranks under a node."""
        span = self.fan_in ** (level + 1)
        return node * span, min((node + 1) * span, self.count) - 1


# --- ranks as runs: merged without listing them -------------------------------------------

def normalized(runs: Iterable[Run]) -> Runs:
    out: Runs = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def parse_runs(text: str, lo: int, hi: int) -> Runs:
    """The runs of ``0-6,8`` within ``lo..hi`` (a summary names only its node's ranks)."""
    return normalized(_wire.parse_runs(text, lo, hi))


def missing_runs(covered: Iterable[Run], lo: int, hi: int) -> Runs:
    """The ranks of ``lo..hi`` in none of ``covered``."""
    out: Runs = []
    at = lo
    for a, b in normalized(covered):
        if a > at:
            out.append((at, min(a - 1, hi)))
        at = max(at, b + 1)
        if at > hi:
            break
    if at <= hi:
        out.append((at, hi))
    return out


def merge(summaries: Iterable[Summary], lo: int, hi: int) -> Summary:
    """One summary of several nodes' (a parent's): the ranks of each program together,
    and the ranks of ``lo..hi`` that no child reported or that a child missed."""
    programs: dict[Program, Runs] = {}
    missed: Runs = []
    for groups, missing in summaries:
        for program, runs in groups.items():
            programs.setdefault(program, []).extend(runs)
        missed.extend(missing)
    merged = {p: normalized(r) for p, r in programs.items()}
    reported = [run for runs in merged.values() for run in runs]
    return merged, normalized([*missed, *missing_runs([*reported, *missed], lo, hi)])


def summary_text(summary: Summary, named: list[list[Any]] | None = None) -> str:
    """A node's summary as its parent reads it; with the differences between two
    signatures named below it (``[signature fp, other signature fp, changes]``)."""
    groups, missing = summary
    value: dict[str, Any] = {W.GROUPS: [[p[0], p[1], runs_text(r)] for p, r in
                                        sorted(groups.items(), key=lambda i: i[1][0])]}
    if missing:
        value[W.MISSING] = runs_text(missing)
    if named:
        value[W.DIFF] = named[:MAX_NAMED]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def parse_summary(raw: str, lo: int, hi: int) -> Summary | None:
    value = loads(raw)
    if value is None:
        return None
    groups: dict[Program, Runs] = {}
    for g in value.get(W.GROUPS) or ():
        try:
            program = (str(g[0]), str(g[1]))
            runs = parse_runs(g[2], lo, hi)
        except (IndexError, TypeError):
            continue
        if runs:
            groups.setdefault(program, []).extend(runs)
    return groups, parse_runs(value.get(W.MISSING) or "", lo, hi)


# --- one rank's steps -----------------------------------------------------------------

class TreeProtocol(RankProtocol):
    """This rank's steps of the check in a job of more ranks than the fan-in."""

    def __init__(self, channel: Channel, rank: int, count: int, timeout_s: float,
                 report: Reporter, failopen: FailOpen, fan_in: int = FAN_IN) -> None:
        super().__init__(channel, rank, count, timeout_s, report, failopen)
        self.tree = Tree(count, fan_in)
        self.path = self.tree.path(rank)

    def wait_s(self, level: int) -> float:
        """How long, from its own arrival, a node's comparer waits for every child: at
        level 0 the flat protocol's ``timeout_s``; above, until a child whose ranks
        arrived up to ``timeout_s`` after it and whose comparer died could have been
        taken over (``stage_s(level - 1)``, a rank's extra margin, and one more)."""
        if level == 0:
            return self.timeout_s
        return self.timeout_s + self.stage_s(level - 1) + 2 * VERDICT_MARGIN_S

    def stage_s(self, level: int) -> float:
        """After its arrival, how long a rank waits for the verdict before it takes over
        the node of ``level`` on its path: at level 0 the flat protocol's wait; above,
        past the moment that node's comparer, whoever it is, stops waiting. That
        comparer pushed first into the node, so no later than this rank's own node of
        the level below pushed (``pushed``: its comparer's deadline, or this rank's
        taking it over), and it waits ``wait_s(level)`` from there at most. A takeover
        earlier than that would close a node its living comparer still waits for, and
        name ranks missing that compiled on time."""
        stage = 2 * self.timeout_s + VERDICT_MARGIN_S
        pushed = stage + VERDICT_MARGIN_S
        for up in range(1, level + 1):
            stage = pushed + self.wait_s(up) + VERDICT_MARGIN_S
            pushed = stage + VERDICT_MARGIN_S
        return stage

    def compile_of(self, record: CompileRecord, link: SpanLink | None) -> Compile:
        item = super().compile_of(record, link)
        fp, pf = item.program
        item.program = (fp[:SIGNATURE_CHARS], pf[:PROGRAM_CHARS])
        item.directory = ordinal_directory(item.function_dir, item.count)
        return item

    def _node(self, item: Compile, level: int) -> str:
        """The node of ``level`` on this rank's path: its entries are under ``<node>/``,
        its counters beside (``<node>n``, ``<node>t``)."""
        node, _ = self.path[level]
        return f"{item.directory}{node}" if level == 0 else f"{item.directory}{level}.{node}"

    def _arrive(self, item: Compile, directory: str, children: int,
                program_hash: int) -> int | None:
        """Count an arrival at a node (carrying a digest of what it compiled); the last
        one says whether all compiled one program. The arrival's number (whether it came
        late, after the node's comparer read it, the verdict says)."""
        value = self.channel.increment("publish", directory + W.ARRIVED,
                                       1 + (program_hash << COUNT_BITS))
        if value is None:
            return None
        arrival = value & ((1 << COUNT_BITS) - 1)
        digests = (value - arrival) >> COUNT_BITS
        before, total = arrival - 1, digests - program_hash
        if before and total % before == 0 and total // before != program_hash:
            # Every arrival before this one compiled one program, and this one another:
            # its signature's summary goes beside the entries, so that the comparer
            # (the first, on the other side) names the difference without asking.
            self._send_summary(item, directory)
        if arrival == children:
            agree = digests == children * program_hash
            self.channel.set("publish", f"{directory}/{W.NODE_ALL}",
                             W.AGREE if agree else W.DISAGREE)
        return arrival

    def publish(self, item: Compile) -> bool:
        node, slot = self.path[0]
        directory = self._node(item, 0)
        fp, pf = item.program
        if not self.channel.set("publish", f"{directory}/{slot}", f"{fp} {pf}"):
            return False
        arrival = self._arrive(item, directory, self.tree.children(0, node),
                               program_hash(item.program))
        if arrival is None:
            return False
        item.arrival, item.arrived_at = arrival, self.clock()
        return True

    def settle(self, item: Compile) -> Steps:
        verdict: dict[str, Any] | None = None
        named: dict[str, Any] | None = None
        item.stage = 0
        if item.arrival == 1:
            verdict, named = yield from self._climb(item, 0, item.arrival, wait=True)
        if verdict is None:
            verdict, named = yield from self._await(item)
        if verdict is None:
            if not self.channel.off:
                self.unresolved += 1
            return None
        if named is None and W.TEXT not in verdict and isinstance(verdict.get(W.DIFF), list):
            named = self._named(item, verdict)
        return (yield from self._conclude(item, verdict, named))

    def _named(self, item: Compile, verdict: dict[str, Any]) -> dict[str, Any] | None:
        """A divergence the verdict names by its changes only: the text, in each rank's
        words (the same as the comparer's), from the changes and the verdict's sides."""
        pair = pair_of(self._groups(item, verdict), item.program)
        if pair is None:
            return None
        diff = [dict(zip(_DIFF_FIELDS, map(str, d))) for d in verdict[W.DIFF]
                if isinstance(d, list) and len(d) == len(_DIFF_FIELDS)]
        return {W.TEXT: named_text(diff, pair[0].ranks, pair[1].ranks), W.DIFF: diff}

    def _await(self, item: Compile) -> Outcome:
        """Wait for the verdict, taking over the nodes of this rank's path whose comparer
        never answered, one level at a time."""
        shared = item.directory + W.VERDICT
        extra = 0.0 if item.arrival <= 2 else VERDICT_MARGIN_S
        for level in range(item.stage, self.tree.depth):
            raw = yield Wait(shared, item.arrived_at + self.stage_s(level) + extra,
                             Read.SHARED)
            if raw is not None:
                return loads(raw), None
            if self.channel.off:
                return None, None
            took = self.channel.increment("takeover", self._node(item, level) + W.TAKEOVER)
            if took == 1:
                verdict, named = yield from self._climb(item, level, 0, wait=False)
                if verdict is not None:
                    return verdict, named
        raw = yield Wait(shared, self.clock() + self.timeout_s + VERDICT_MARGIN_S,
                         Read.SHARED)
        return (loads(raw) if raw is not None else None), None

    def _climb(self, item: Compile, level: int, arrival: int, wait: bool) -> Outcome:
        """Compare the node of ``level`` on this rank's path and push its summary up; go
        on as the parent's comparer when this rank is the first there. At the root:
        the verdict."""
        while True:
            directory = self._node(item, level)
            found = yield from self._gather(item, level, arrival, wait)
            if found is None:
                return None, None
            item.stage = level + 1
            if level == self.tree.depth - 1:
                outcome = yield from self._verdict(item, found)
                self.channel.delete("clean-up", directory)
                if item.count > KEEP:
                    self.channel.delete("clean-up", ordinal_directory(
                        item.function_dir, item.count - KEEP).rstrip("/"))
                return outcome
            pushed = self._push(item, level + 1, found)
            # pushed first: a takeover that finds no entries knows the node reported
            self.channel.delete("clean-up", directory)
            if pushed != 1:
                return None, None
            level, arrival, wait = level + 1, 1, True

    def _gather(self, item: Compile, level: int, arrival: int, wait: bool,
                ) -> Generator[Wait, str | None, Summary | None]:
        """Wait for the node's entries (or its deadline), and read them once."""
        node, slot = self.path[level]
        directory = self._node(item, level)
        children = self.tree.children(level, node)
        lo, hi = self.tree.ranks(level, node)
        everyone = wait and arrival >= children
        if wait and not everyone:
            every = yield Wait(f"{directory}/{W.NODE_ALL}",
                               item.arrived_at + self.wait_s(level), Read.OWN)
            if every == W.AGREE:
                # every child arrived, all with this rank's program: no entry to read
                return {item.program: [(lo, hi)]}, []
            everyone = every is not None
        found = self.channel.dir_get("read", f"{directory}/")
        if found is None:
            return None
        entries: dict[int, str] = {}
        for key, value in found:
            name = key.rpartition("/")[2]
            if name == W.SUMMARIES:
                self._name(item, value)
                continue
            try:
                child = int(name)
            except ValueError:
                continue
            if 0 <= child < children:
                entries[child] = value
        if not wait and not entries:
            return None  # taken over after its comparer reported it: nothing to do
        if level == 0:
            programs: dict[Program, Runs] = {}
            entries[slot] = f"{item.program[0]} {item.program[1]}"
            for child in sorted(entries):
                rank = lo + child
                programs.setdefault(parse_entry(entries[child]), []).append((rank, rank))
            return merge([(programs, [])], lo, hi)
        parts: list[Summary] = []
        for child, raw in entries.items():
            clo, chi = self.tree.ranks(level - 1, node * self.tree.fan_in + child)
            part = parse_summary(raw, clo, chi)
            if part is not None:
                parts.append(part)
                named = (loads(raw) or {}).get(W.DIFF)
                if isinstance(named, list):
                    item.named.extend(n for n in named
                                      if isinstance(n, list) and len(n) == 3)
        # a few pairs of signatures named are enough: the verdict names one
        del item.named[MAX_NAMED:]
        return merge(parts, lo, hi)

    def _push(self, item: Compile, level: int, found: Summary) -> int | None:
        """The node's summary, into its parent (``level``): the parent's arrival count
        after it (1: this rank compares the parent), or ``None`` when the node had
        reported already or the call failed."""
        node, slot = self.path[level]
        directory = self._node(item, level)
        text = summary_text(found, item.named)
        if not self.channel.create("publish", f"{directory}/{slot}", text):
            return None
        programs, missed = found
        # a node of one program, every rank there, counts as that program; any other
        # summary as itself, which no program's digest matches
        uniform = len(programs) == 1 and not missed
        digest = program_hash(next(iter(programs)) if uniform else ("", text))
        return self._arrive(item, directory, self.tree.children(level, node), digest)

    def _send_summary(self, item: Compile, directory: str) -> None:
        """This rank's signature fingerprint (``x``) and summary (``l``), beside the node's
        entries; the first one sent stands."""
        if item.signature is None or not item.signature.captured:
            return
        self.channel.create("publish", f"{directory}/{W.SUMMARIES}", json.dumps(
            {W.TEXT: item.program[0], W.LEAVES: summary(item.signature)},
            ensure_ascii=False, separators=(",", ":")))

    def _name(self, item: Compile, raw: str) -> None:
        """The changes between this rank's signature and the summary sent unasked."""
        sent = loads(raw) or {}
        theirs, their_summary = sent.get(W.TEXT), sent.get(W.LEAVES)
        mine = item.program[0]
        if (not isinstance(theirs, str) or not isinstance(their_summary, dict) or not theirs
                or not mine or theirs == mine or item.signature is None):
            return
        diff = summary_diff(summary(item.signature), their_summary)
        item.named.append([mine, theirs, diff[:MAX_NAMED_DIFF]])

    def _known_diff(self, item: Compile, first: Group, second: Group,
                    ) -> list[dict[str, str]] | None:
        a, b = first.program[0], second.program[0]
        for x, y, diff in item.named:
            if (x, y) == (a, b):
                return list(diff)
            if (x, y) == (b, a):
                return [{**d, DiffKey.BEFORE: d.get(DiffKey.AFTER, ""),
                         DiffKey.AFTER: d.get(DiffKey.BEFORE, "")} for d in diff]
        return None

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
        return (yield from self._decide(item, groups, absent, lookup))

    def _wire_verdict(self, item: Compile, verdict: dict[str, Any]) -> dict[str, Any]:
        """When every rank that arrived compiled one program, the verdict every rank reads
        says only which ranks are missing (each knows its program): a few bytes however
        many ranks read it. The whole verdict is set first, for the late ranks."""
        groups = verdict.get(W.GROUPS) or ()
        if W.TEXT in verdict and len(groups) == 2:
            # every rank words the text itself from the changes (as lists) and the two
            # sides (with more, a rank's pair of sides might not be the comparer's)
            wire = {k: v for k, v in verdict.items() if k != W.TEXT}
            wire[W.DIFF] = [[d.get(f, "") for f in _DIFF_FIELDS] for d in verdict[W.DIFF]]
            return wire
        if len(groups) != 1 or verdict.get(W.KIND):
            return verdict
        wire = {k: verdict[k] for k in (W.MISSING,) if verdict.get(k)}
        if wire:
            self._set(item.directory + W.FULL, verdict)
        return wire

    def _groups(self, item: Compile, verdict: dict[str, Any]) -> list[Group]:
        if W.GROUPS in verdict:
            return super()._groups(item, verdict)
        last = self.count - 1
        missed = parse_runs(verdict.get(W.MISSING) or "", 0, last)
        if any(a <= self.rank <= b for a, b in missed):
            return []  # late: what the others compiled is in the whole verdict (``_late``)
        present = missing_runs(missed, 0, last)
        ranks = ranks_of(present)
        return [Group(item.program, ranks, runs_text(present))] if ranks else []

    def _late(self, item: Compile, verdict: dict[str, Any], groups: list[Group]) -> Steps:
        if W.GROUPS not in verdict:  # a short verdict: the whole one says what they compiled
            raw = yield Wait(item.directory + W.FULL, self.clock() + VERDICT_MARGIN_S)
            verdict = (loads(raw) if raw is not None else None) or {}
            groups = super()._groups(item, verdict)
        return (yield from super()._late(item, verdict, groups))

    def _late_entries(self, item: Compile) -> str:
        _, slot = self.path[0]
        return f"{self._node(item, 0)}/{slot}"


def ordinal_directory(function_dir: str, count: int) -> str:
    """The keys of one compile ordinal of one function, in a tree: a digest of both under
    ``TREE_PREFIX``, short since every key of every rank carries it."""
    digest = hashlib.blake2b(f"{function_dir}{count}".encode("utf-8", "backslashreplace"),
                             digest_size=6).digest()
    return f"{W.TREE_PREFIX}/{base64.urlsafe_b64encode(digest).decode('ascii')}/"


def program_hash(program: Program) -> int:
    """A digest of what a rank compiled, summed by the node counters: a signed
    ``HASH_BITS``-bit integer (a sum of either sign stays small)."""
    digest = hashlib.blake2b(f"{program[0]} {program[1]}".encode("utf-8", "backslashreplace"),
                             digest_size=4).digest()
    return (int.from_bytes(digest, "big") >> (32 - HASH_BITS)) - (1 << (HASH_BITS - 1))


def protocol(channel: Channel, rank: int, count: int, timeout_s: float, report: Reporter,
             failopen: FailOpen, fan_in: int = FAN_IN) -> RankProtocol:
    """The protocol of a job of ``count`` ranks: flat up to ``fan_in``, a tree past it."""
    if count <= fan_in:
        return RankProtocol(channel, rank, count, timeout_s, report, failopen)
    return TreeProtocol(channel, rank, count, timeout_s, report, failopen, fan_in)
