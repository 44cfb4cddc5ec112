"""The cross-rank check as a tree: jobs of more ranks than ``FAN_IN``.

A job of ``FAN_IN`` ranks or fewer is one group, compared as ``_ranks_protocol`` says
(one comparer reads every entry). Past that, no rank reads every entry: the ranks
compare in groups of at most ``GROUP`` (the nodes of level 0: ranks ``0-7``, ``8-15``,
...), each group sends one summary to its parent (level 1: nodes of ``FAN_IN``
groups), and so on up to the root, whose summary is the verdict.

**A group (level 0) costs each rank two calls**: one increment of the group's counter
(``<ordinal>/<node>``), which carries the rank's presence (bit ``slot``) and a digest of
what it compiled (summed above ``SUM_SHIFT``), and one read of the verdict. From the
value the increment returns, each rank knows whether every arrival so far compiled its
program (the sum is its digest times the arrivals): only a rank that sees otherwise
writes an entry, ``e<node>/<arrival number>`` (``"<slot> <signature fp> <program fp>
<sum of the digests before it>"``). The last to arrive (all presence bits set) sets
``e<node>/a``: ``a`` when the sum says one program, else the counter's value. The
group's comparer, the first to arrive, waits for ``a`` or its deadline (then it closes
the group, ``GROUP_CLOSED``: a later arrival is late, is reported missing and checks
itself against the verdict). When it must read entries, the counter tells it who
arrived: the ranks without an entry compiled its own program (each was alike with
every arrival before it, the comparer among them), and an entry not written yet (its
increment came first) is waited for by its key; the first unlike rank's sum of the
digests before it says whether one before it is still being written.

**Above level 0** each node is what the flat protocol is for the whole job, with keys
under ``<ordinal>/<level>.<node>``: ``/<slot>`` (a child's summary), ``n`` (the arrival
counter: arrivals and the sum of their digests), ``/a``, ``t`` (takeover). A summary is
the node's ranks grouped by program, as ranges, and the ones missing::

    {"g": [[signature fp, program fp, "0-16382"], ...], "m": "16383"}

or, when every rank of the node compiled one program, its two fingerprints alone
(``"<signature fp> <program fp>"``), so it stays a few hundred bytes whatever the node's
size, and merging ``FAN_IN`` of them costs the parent no more than reading ``FAN_IN``
entries. The verdict (``v``), the named divergence (``d``), the summaries a comparer
asks for (``s/<rank>``) are the flat protocol's, at the ordinal's directory: every rank
reads the verdict in one read.

Who compares a node: the first to arrive there (a rank at level 0; above, the rank
that pushed the first child summary); it waits for ``a`` or its deadline, reads what it
must, pushes the summary up (created, never overwritten: the first summary of a node
stands), and only then deletes the node's entries. A group (level 0) is closed first
(``GROUP_CLOSED``: an arrival after that is late); above, an arrival after the comparer
read the node is late, and the verdict tells it so (those counters carry no closed mark:
their 32 bits hold the digests). Deadlines,
from the comparer's own arrival at level 0 (``wait_s``): ``timeout_s`` at level 0 (the
flat protocol's), and at level ``L`` the moment a node below whose ranks arrived up to
``timeout_s`` later could have been taken over (``stage_s(L - 1)``), plus margins.

A group whose comparer died is reported by its parent's comparer, once that one's
deadline passed (``wait_s(1)``: past the group's own deadline and the margins): it
closes the group and reads its counter (and its entries, when the counter says some
rank compiled another program than its own), one rank for every such group of its node.
A rank that reads no entry of a group's first arrival, and compiled another program,
names that program by its digest (``placeholder``), and a parent that knows a program
with that digest puts it back. A comparer above level 0 that dies is replaced as in the
flat protocol, one level at a time: a rank waits for the verdict until ``stage_s(1)``
after it arrived (the first two arrivals of its group; the others ``VERDICT_MARGIN_S``
longer, so that a late verdict costs one call per node, not per rank), then takes over
its level-1 node if it is first on the node's takeover counter (a node already reported
has no entries left: nothing to do; one no group reached, their comparers dead, it
reports as that node's comparer would), and waits again until ``stage_s(2)`` before trying
level 2, and so on: each stage is past the latest moment that level's comparer could
still be waiting.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from .._core._failopen import FailOpen
from .._core._vocab import CauseKind, DiffKey, DivergenceKind
from .._core._vocab import RankWire as W
from .._pipeline._record import CompileRecord, SpanLink
from ._ranks_nodes import (
    COUNT_BITS,
    FAN_IN,
    GROUP_CLOSED,
    GROUP_HASH_BITS,
    MAX_NAMED,
    SUM_SHIFT,
    GroupEntry,
    Runs,
    Summary,
    Tree,
    group_base,
    group_entry,
    group_value,
    lacking_entry,
    merge,
    missing_runs,
    node_value,
    ordinal_directory,
    parse_runs,
    parse_summary,
    program_hash,
    resolved,
    summary_text,
)
from ._ranks_protocol import (
    CLOSED,
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
    leaf_kind,
    leaf_texts,
    loads,
    named_text,
    pair_of,
    ranks_of,
    runs_text,
    summary,
    summary_diff,
)

#: Characters kept of the two fingerprints in a tree's entries and verdicts (hex: 36 and
#: 24 bits; every byte is paid once per rank per compile at the service).
SIGNATURE_CHARS = 9
PROGRAM_CHARS = 6
#: Starts each field of a relative verdict (``relative_text``).
RELATIVE_MARK = "|"
#: A change of a named divergence in a tree's verdict: a list of these, in this order.
_DIFF_FIELDS = (DiffKey.PATH, DiffKey.KIND, DiffKey.BEFORE, DiffKey.AFTER)

Outcome = Generator[Wait, "str | None", "tuple[dict[str, Any] | None, dict[str, Any] | None]"]


# --- one rank's steps -----------------------------------------------------------------

class TreeProtocol(RankProtocol):
    """This rank's steps of the check in a job of more ranks than the fan-in."""

    def __init__(self, channel: Channel, rank: int, count: int, timeout_s: float,
                 report: Reporter, failopen: FailOpen, fan_in: int = FAN_IN) -> None:
        super().__init__(channel, rank, count, timeout_s, report, failopen)
        self.tree = Tree(count, fan_in)
        self.path = self.tree.path(rank)
        #: whether the group's summary came from its entries (their directory then goes)
        self._read_entries = False

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

    # --- the keys of a node ---------------------------------------------------------------

    def _entries(self, item: Compile, level: int) -> str:
        """The directory of the node's entries (and of its ``a`` and ``s``)."""
        node, _ = self.path[level]
        if level == 0:
            return f"{item.directory}{W.ENTRIES}{node}"
        return f"{item.directory}{level}.{node}"

    def _counter(self, item: Compile, level: int) -> str:
        """The node's counter: outside its entries' directory, which goes once read."""
        if level == 0:
            return f"{item.directory}{self.path[0][0]}"
        return self._entries(item, level) + W.ARRIVED

    def _takeover(self, item: Compile, level: int) -> str:
        if level == 0:
            return f"{item.directory}{W.TAKEOVER}{self.path[0][0]}"
        return self._entries(item, level) + W.TAKEOVER

    # --- a group: two calls per rank ------------------------------------------------------

    def publish(self, item: Compile) -> bool:
        node, slot = self.path[0]
        fp, pf = item.program
        digest = program_hash(item.program, GROUP_HASH_BITS)
        value = self.channel.increment("publish", self._counter(item, 0),
                                       (1 << slot) + (digest << SUM_SHIFT))
        if value is None:
            return False
        item.arrived_at = self.clock()
        closes, present, total = group_value(value)
        arrival = present.bit_count()
        if closes:
            item.arrival = arrival + CLOSED  # after its group was closed: late
            return True
        item.arrival = arrival
        if total != arrival * digest:
            # Unlike an arrival before it: its entry, so that whoever reports the group
            # knows its program (a rank without one compiled the first's), with the sum
            # of the digests before it (which tells the reader whether an entry before
            # this one is still being written).
            entries = self._entries(item, 0)
            before = total - digest
            self.channel.set("publish", f"{entries}/{arrival}", f"{slot} {fp} {pf} {before}")
            if arrival > 1 and before % (arrival - 1) == 0 and before // (arrival - 1) != digest:
                # every arrival before this one (if any: a rank that counted one
                # ordinal twice is its own first) compiled one program, and this one
                # another: its summary goes beside the entries, for the comparer
                self._send_summary(item, entries)
        if 1 < arrival == self.tree.children(0, node):
            # the last to arrive wakes the comparer: "a" when the counter says every
            # rank compiled one program, else the counter (which says who arrived)
            self.channel.set("publish", f"{self._entries(item, 0)}/{W.NODE_ALL}",
                             W.AGREE if total == arrival * digest else str(value))
        return True

    def _gather_group(self, item: Compile, group: int, arrival: int, wait: bool,
                      ) -> Generator[Wait, str | None, Summary | None]:
        """A group's summary, by its comparer (the first to arrive, ``wait``), or by its
        parent's comparer in the place of one that died: from the counter alone when
        every rank that arrived compiled this rank's program, else from the entries of
        those that did not."""
        directory = f"{item.directory}{W.ENTRIES}{group}"
        children = self.tree.children(0, group)
        lo, hi = self.tree.ranks(0, group)
        value: int | None = None
        if wait:
            self._read_entries = False
            if arrival >= children:
                return {item.program: [(lo, hi)]}, []
            every = yield Wait(f"{directory}/{W.NODE_ALL}",
                               item.arrived_at + self.wait_s(0), Read.OWN)
            self._read_entries = every is not None  # its directory goes once reported
            if every == W.AGREE:
                return {item.program: [(lo, hi)]}, []
            if every is not None and every.lstrip("-").isdigit():
                value = int(every)
        if value is None:
            # closed first: an arrival after this is late and checks itself
            value = self.channel.increment("close", f"{item.directory}{group}",
                                           GROUP_CLOSED)
            if value is None:
                return None
        _, present, total = group_value(value)
        count = present.bit_count()
        if not count:
            return None  # none of its ranks arrived
        own = program_hash(item.program, GROUP_HASH_BITS)
        by_slot: dict[int, Program] = {}
        base = item.program
        if total != count * own:
            found = self.channel.dir_get("read", f"{directory}/")
            if found is None:
                return None
            entries: dict[int, GroupEntry] = {}
            for key, raw in found:
                name = key.rpartition("/")[2]
                if name == W.SUMMARIES:
                    self._name(item, raw)
                    continue
                entry = group_entry(name, raw, children)
                if entry is not None and entry.arrival <= count:
                    entries[entry.arrival] = entry
            if wait:
                self._read_entries = True
            deadline = self.clock() + VERDICT_MARGIN_S
            # the first arrival's digest: the comparer's own
            first_digest = own if wait else None
            for _ in range(count):
                lacking = lacking_entry(entries, count, first_digest, total)
                if lacking is None:
                    break
                # counted before it was written: written at once after its increment
                written = yield Wait(f"{directory}/{lacking}", deadline, Read.OWN)
                entry = (group_entry(str(lacking), written, children)
                         if written is not None else None)
                if entry is None:
                    break  # its rank died in between: counted with the first one's
                entries[lacking] = entry
            by_slot = {e.slot: e.program for e in entries.values()}
            base = group_base(entries, item.program, first_digest, total, count)
        programs: dict[Program, Runs] = {}
        for s in range(children):
            if present >> s & 1:
                programs.setdefault(by_slot.get(s, base), []).append((lo + s, lo + s))
        return merge([(resolved(programs, ()), [])], lo, hi)

    # --- settling -------------------------------------------------------------------------

    def settle(self, item: Compile) -> Steps:
        verdict: dict[str, Any] | None = None
        named: dict[str, Any] | None = None
        item.stage = 0
        if item.arrival == 1:
            verdict, named = yield from self._climb(item, 0, item.arrival, wait=True)
        if verdict is None:
            verdict, named = yield from self._await(item)
        if verdict is not None and _RELATIVE in verdict:
            verdict, named = yield from self._relative(item, verdict[_RELATIVE])
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

    def _relative(self, item: Compile, wire: list[Any]) -> Outcome:
        """A verdict worded against the larger side's own signature (``_relative_wire``):
        a rank of that side makes the whole one from its leaves; a rank of the other
        side, or a missing one, reads the whole one (``f``)."""
        last = self.count - 1
        whole = len(wire) >= 3 and all(isinstance(v, str) for v in wire[:3])
        others = parse_runs(wire[0], 0, last) if whole else []
        missed = parse_runs(wire[1], 0, last) if whole else []
        diff = _worded(item, wire[3:]) if whole else None
        if diff is None or any(a <= self.rank <= b for a, b in [*others, *missed]):
            raw = yield Wait(item.directory + W.FULL, self.clock() + VERDICT_MARGIN_S)
            return (loads(raw) if raw is not None else None), None
        mine = missing_runs([*others, *missed], 0, last)
        ours = Group(item.program, ranks_of(mine), runs_text(mine))
        theirs = Group((str(wire[2]), ""), ranks_of(others), runs_text(others))
        first, second = sorted((ours, theirs), key=lambda g: g.ranks[0])
        if first is theirs:  # the changes are from the first side's values to the second's
            diff = [{**d, DiffKey.BEFORE: d[DiffKey.AFTER], DiffKey.AFTER: d[DiffKey.BEFORE]}
                    for d in diff]
        named = {W.TEXT: named_text(diff, first.ranks, second.ranks), W.DIFF: diff}
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
                verdict, named = yield from self._climb(item, level, 0, wait=False)
                if verdict is not None:
                    return verdict, named
        raw = yield Wait(shared, self.clock() + self.timeout_s + VERDICT_MARGIN_S,
                         Read.SHARED)
        return (_verdict_of(raw) if raw is not None else None), None

    def _climb(self, item: Compile, level: int, arrival: int, wait: bool) -> Outcome:
        """Compare the node of ``level`` on this rank's path and push its summary up; go
        on as the parent's comparer when this rank is the first there. At the root:
        the verdict."""
        while True:
            directory = self._entries(item, level)
            found = yield from (self._gather_group(item, self.path[0][0], arrival, wait)
                                if level == 0 else self._gather(item, level, arrival, wait))
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
            if level or self._read_entries:
                self.channel.delete("clean-up", directory)
            if pushed != 1:
                return None, None
            level, arrival, wait = level + 1, 1, True

    # --- above level 0: nodes of child summaries ------------------------------------------

    def _arrive(self, item: Compile, directory: str, children: int,
                program_hash_: int) -> int | None:
        """Count an arrival at a node above level 0 (carrying a digest of what it
        summarises); the last one says whether all were one program. The arrival's
        number (whether it came late, after the node's comparer read it, the verdict
        says)."""
        value = self.channel.increment("publish", directory + W.ARRIVED,
                                       1 + (program_hash_ << COUNT_BITS))
        if value is None:
            return None
        arrival, digests = node_value(value)
        before, total = arrival - 1, digests - program_hash_
        if before and total % before == 0 and total // before != program_hash_:
            # Every arrival before this one compiled one program, and this one another:
            # its signature's summary goes beside the entries, so that the comparer
            # (the first, on the other side) names the difference without asking.
            self._send_summary(item, directory)
        if arrival == children:
            agree = digests == children * program_hash_
            self.channel.set("publish", f"{directory}/{W.NODE_ALL}",
                             W.AGREE if agree else W.DISAGREE)
        return arrival

    def _gather(self, item: Compile, level: int, arrival: int, wait: bool,
                ) -> Generator[Wait, str | None, Summary | None]:
        """Wait for the node's entries (or its deadline), and read them once."""
        node, _ = self.path[level]
        directory = self._entries(item, level)
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
        if not wait and not entries and (level > 1 or self._arrivals(directory) != 0):
            # Taken over after its comparer reported it (or the service failed): nothing
            # to do. A level-1 node no child ever reached, its groups' comparers dead, is
            # this rank's to report.
            return None
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
        if level == 1 and not everyone:
            # A group that has not reported by now lost its comparer: that comparer's
            # deadline, and the moment a rank there could have taken over, are past
            # (``wait_s``). This node's comparer reports the group in its place (one
            # rank, not one per group: no rank takes a group over).
            for child in range(children):
                if child not in entries:
                    group = node * self.tree.fan_in + child
                    part = yield from self._gather_group(item, group, 0, wait=False)
                    self.channel.delete("clean-up", f"{item.directory}{W.ENTRIES}{group}")
                    if part is not None:
                        parts.append(part)
        # a few pairs of signatures named are enough: the verdict names one
        del item.named[MAX_NAMED:]
        programs, missed = merge(parts, lo, hi)
        return resolved(programs, (item.program,)), missed

    def _arrivals(self, directory: str) -> int | None:
        """How many children reached a node above level 0 (``None``: unknown)."""
        value = self.channel.increment("takeover", directory + W.ARRIVED, 0)
        return None if value is None else node_value(value)[0]

    def _push(self, item: Compile, level: int, found: Summary) -> int | None:
        """The node's summary, into its parent (``level``): the parent's arrival count
        after it (1: this rank compares the parent), or ``None`` when the node had
        reported already or the call failed."""
        node, slot = self.path[level]
        directory = self._entries(item, level)
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

    # --- the verdict ----------------------------------------------------------------------

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
            wire[W.DIFF] = [[d.get(f, "") for f in _DIFF_FIELDS] for d in verdict[W.DIFF]]
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
        index = {path: i for i, (path, _) in enumerate(leaf_texts(signature))}
        mine = dict(leaf_texts(signature))
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
        return ""  # a late rank wrote no entry (its increment said it was late)


#: Wrapped around a verdict that came as a list (``TreeProtocol._relative_wire``).
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


def _worded(item: Compile, changes: list[Any]) -> list[dict[str, str]] | None:
    """The changes of a relative verdict in this rank's words (``before``: its own type),
    or ``None`` when its signature does not have the leaves they name."""
    if item.signature is None or not item.signature.captured or len(changes) % 2:
        return None
    leaves = leaf_texts(item.signature)
    diff: list[dict[str, str]] = []
    for index, other in zip(changes[::2], changes[1::2]):
        if not isinstance(index, int) or not 0 <= index < len(leaves):
            return None
        path, own = leaves[index]
        other = str(other)
        diff.append({DiffKey.PATH: path, DiffKey.KIND: leaf_kind(own, other).value,
                     DiffKey.BEFORE: own, DiffKey.AFTER: other})
    return diff



def protocol(channel: Channel, rank: int, count: int, timeout_s: float, report: Reporter,
             failopen: FailOpen, fan_in: int = FAN_IN) -> RankProtocol:
    """The protocol of a job of ``count`` ranks: flat up to ``fan_in``, a tree past it."""
    if count <= fan_in:
        return RankProtocol(channel, rank, count, timeout_s, report, failopen)
    return TreeProtocol(channel, rank, count, timeout_s, report, failopen, fan_in)
