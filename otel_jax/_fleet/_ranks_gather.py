"""The cross-rank check's second stage, gathering: the comparer's waits, the reads it
drives (a tree node's are arriving's, ``TreeArrive._read_node``), and the summaries it
makes of the entries (the flat protocol's, and the tree's).

A job of ``FAN_IN`` ranks or fewer is one group, compared by one comparer that reads
every entry (``Gather._compare``). Past that, the ranks compare in groups of at most
``GROUP``, each group's comparer pushes one summary (its ranks by program, as ranges,
and the missing ones) to its parent, and so on up to the root, whose summary is the
verdict: docs/fleet.md draws the tree, lists its keys and says who reports a node
whose comparer died.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

from .._core._vocab import RankWire as W
from ._ranks_arrive import (
    CLOSED,
    GROUP_HASH_BITS,
    VERDICT_MARGIN_S,
    Arrive,
    Compile,
    GroupEntry,
    Node,
    NodeRead,
    TreeArrive,
    node_value,
    ordinal_directory,
    parse_entries,
    parse_node,
    program_hash,
)
from ._ranks_name import Group, Program
from ._ranks_transport import Read, Run, Runs, Wait, dumps, loads, parse_runs, runs_text

#: Ordinals of a function whose keys stay on the service (late ranks read the verdict).
KEEP = 64
#: Marks a program known only by its group digest (``placeholder``).
PLACEHOLDER = "#"
#: Pairs of signatures named on the way up that a summary carries.
MAX_NAMED = 4

#: A node's summary: its ranks grouped by program, and the ones missing.
Summary = tuple[dict[Program, Runs], Runs]
#: What the flat comparer read: the groups by program, the absent ranks, the entries.
Compared = tuple[list[Group], list[int], dict[int, Program]]


# --- ranks as runs: merged without listing them -------------------------------------------

def normalized(runs: Iterable[Run]) -> Runs:
    out: Runs = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def runs_within(text: str, lo: int, hi: int) -> Runs:
    """The runs of ``0-6,8`` within ``lo..hi``, merged (a tree's summary names only its
    node's ranks)."""
    return normalized(parse_runs(text, lo, hi))


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
    if len(groups) == 1 and not missing and not named:
        [(fp, pf)] = groups  # every rank of the node, one program: its fingerprints
        return f"{fp} {pf}"
    value: dict[str, Any] = {W.GROUPS: [[p[0], p[1], runs_text(r)] for p, r in
                                        sorted(groups.items(), key=lambda i: i[1][0])]}
    if missing:
        value[W.MISSING] = runs_text(missing)
    if named:
        value[W.DIFF] = named[:MAX_NAMED]
    return dumps(value)


def parse_summary(raw: str, lo: int, hi: int) -> Summary | None:
    if not raw.startswith("{"):
        # one program for every rank of the node: its two fingerprints
        fp, space, pf = raw.partition(" ")
        if not space or not fp or " " in pf:
            return None
        return {(fp, pf): [(lo, hi)]}, []
    value = loads(raw)
    if value is None:
        return None
    groups: dict[Program, Runs] = {}
    for g in value.get(W.GROUPS) or ():
        try:
            program = (str(g[0]), str(g[1]))
            runs = runs_within(g[2], lo, hi)
        except (IndexError, TypeError):
            continue
        if runs:
            groups.setdefault(program, []).extend(runs)
    return groups, runs_within(value.get(W.MISSING) or "", lo, hi)


def lacking_entry(entries: dict[int, GroupEntry], count: int, first_digest: int | None,
                  total: int) -> int | None:
    """The arrival number of an entry the group's counter says was written, or is being
    written (its rank's increment came first), that was not read: ``None`` when all are
    in. Once one rank was unlike those before it, every later one is too (the sum of
    their digests is no longer one digest times the arrivals): the entries run from the
    first unlike one to the last arrival. Whether the earliest entry read is that first
    one, the sum of the digests before it tells: the first arrival's digest times their
    number (exactly, when the reader knows that digest: it is the first arrival, or
    alike with it; else when the sum divides by their number, which a sum of unlike
    digests does about once in that number, and only matters while an entry is still
    being written). Without entries, the group's sum (``total``) tells whether its
    ranks compiled one program (no entry to wait for) or the last one's is on its way."""
    if not entries:
        uniform = (total == count * first_digest if first_digest is not None
                   else total % max(1, count) == 0)
        return None if uniform or count < 2 else count
    first = min(entries)
    for k in range(first + 1, count + 1):
        if k not in entries:
            return k
    if first > 2:
        before = entries[first].before
        if (before != (first - 1) * first_digest if first_digest is not None
                else before % (first - 1)):
            return first - 1
    return None


def group_base(entries: dict[int, GroupEntry], own: Program, own_digest: int,
               first_digest: int | None, total: int, count: int) -> Program:
    """The program of a group's ranks without an entry (the first arrival's): the one
    of these whose digest is the first arrival's (known to the comparer; else the first
    unlike rank's sum of those before it divided by their number, or without one, the
    group's sum divided by its arrivals); else that digest alone (``placeholder``), for
    a parent to match."""
    if first_digest is None:
        if entries:
            first = entries[min(entries)]
            first_digest = first.before // max(1, first.arrival - 1)
        else:
            first_digest = total // max(1, count)
    for program, digest in ((own, own_digest), *((e.program, e.digest) for e in entries.values())):
        if digest == first_digest:
            return program
    return placeholder(first_digest)


def placeholder(digest: int) -> Program:
    """A program known by its group digest only (its fingerprints were never sent)."""
    return "", f"{PLACEHOLDER}{digest}"


def resolved(programs: dict[Program, Runs], known: Iterable[Program]) -> dict[Program, Runs]:
    """The programs of a summary with those known by their digest only replaced by the
    program of ``known`` (or of the summary) that has that digest."""
    by_digest: dict[int, Program] | None = None  # made for a placeholder only
    out: dict[Program, Runs] = {}
    for program, runs in programs.items():
        if program[1].startswith(PLACEHOLDER):
            by_digest = by_digest or {program_hash(p, GROUP_HASH_BITS): p for p in
                                      (*known, *programs) if not p[1].startswith(PLACEHOLDER)}
            try:
                program = by_digest.get(int(program[1][len(PLACEHOLDER):]), program)
            except ValueError:
                pass
        out[program] = normalized([*out.get(program, []), *runs])
    return out


# --- the comparer ------------------------------------------------------------------------

class Gather(Arrive):
    """The comparer's reads, in a job of ``FAN_IN`` ranks or fewer."""

    def _compare(self, item: Compile, wait: bool) -> Generator[Wait, str | None,
                                                             Compared | None]:
        """The comparer: wait for every rank (or the deadline), read the entries once,
        and group them by program (``None``: the service failed). ``wait=False``: it
        takes over from a comparer that never answered."""
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
            return None
        entries = parse_entries(found, self.count)
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
        return groups, absent, entries


class TreeGather(TreeArrive, Gather):
    """The comparers' waits at each node of the tree (the reads are ``TreeArrive``'s), and
    the summaries they push up (``_climb``)."""

    #: whether the group's summary came from its entries (their directory then goes)
    _read_entries: bool

    def wait_s(self, level: int) -> float:
        """How long, from its own arrival, a node's comparer waits for every child:
        ``wait(L)`` of docs/fleet.md (above level 0, until a child whose comparer died
        could have been taken over)."""
        if level == 0:
            return self.timeout_s
        return self.timeout_s + self.stage_s(level - 1) + 2 * VERDICT_MARGIN_S

    def stage_s(self, level: int) -> float:
        """After its arrival, how long a rank waits for the verdict before it takes over
        the node of ``level`` on its path: ``stage(L)`` of docs/fleet.md, past the latest
        moment that node's comparer can still be waiting (sooner, it would close a node
        its living comparer waits for, and name ranks missing that compiled on time)."""
        stage = 2 * self.timeout_s + VERDICT_MARGIN_S
        pushed = stage + VERDICT_MARGIN_S
        for up in range(1, level + 1):
            stage = pushed + self.wait_s(up) + VERDICT_MARGIN_S
            pushed = stage + VERDICT_MARGIN_S
        return stage

    def _gather_group(self, item: Compile, at: Node | None, arrival: int, wait: bool,
                      ) -> Generator[Wait, str | None, Summary | None]:
        """A group's summary (``at``, else this rank's), by its comparer (the first to
        arrive, ``wait``), or by its parent's comparer in the place of one that died: from
        the counter alone when every rank that arrived compiled this rank's program, else
        from the entries of those that did not."""
        deadline = item.arrived_at + self.wait_s(0)
        directory, children, lo, hi, _, _ = at = at or self._node(item, 0)
        value: int | None = None
        if wait:
            self._read_entries = False
            if arrival >= children:
                return {item.program: [(lo, hi)]}, []
            every = yield Wait(f"{directory}/{W.NODE_ALL}", deadline, Read.OWN)
            self._read_entries = every is not None  # its directory goes once reported
            if every == W.AGREE:
                return {item.program: [(lo, hi)]}, []
            if every is not None and every.lstrip("-").isdigit():
                value = int(every)
        read = self._read_group(item, at, value)
        if read is None or not read[0]:
            return None  # a call failed, or none of its ranks arrived
        present, total, own, entries = read
        count = present.bit_count()
        by_slot: dict[int, Program] = {}
        base = item.program
        if entries is not None:
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
                entry = (parse_node([(str(lacking), written)], children, count)[0].get(lacking)
                         if written is not None else None)
                if entry is None:
                    break  # its rank died in between: counted with the first one's
                entries[lacking] = entry
            by_slot = {e.slot: e.program for e in entries.values()}
            base = group_base(entries, item.program, own, first_digest, total, count)
        programs: dict[Program, Runs] = {}
        for s in range(children):
            if present >> s & 1:
                programs.setdefault(by_slot.get(s, base), []).append((lo + s, lo + s))
        return merge([(resolved(programs, ()), [])], lo, hi)

    def _climb(self, item: Compile, level: int, arrival: int, wait: bool,
               ) -> Generator[Wait, str | None, Summary | None]:
        """Compare the node of ``level`` on this rank's path and push its summary up; go
        on as the parent's comparer when this rank is the first there. At the root: its
        summary, for the verdict (``None``: another rank compares there, or a call
        failed); its entries go once the verdict is out (``_clean_root``)."""
        deadline = item.arrived_at + self.wait_s(level)
        while True:
            if level == 0:
                found = yield from self._gather_group(item, None, arrival, wait)
            else:  # the push below, its wait and this read: no gathering call between
                read = yield from self._read_node(item, level, arrival, wait, deadline)
                found = None if read is None else (yield from self._gather(item, level, read, wait))
            if found is None:
                return None
            item.stage = level + 1
            if level == self.tree.depth - 1:
                return found
            # into the parent: a node of one program, every rank there, counts as that
            # program; any other summary as itself, which no program's digest matches
            programs, missed = found
            text = summary_text(found, item.named)
            deadline = item.arrived_at + self.wait_s(level + 1)
            pushed = self._arrive(item, level + 1, text, next(iter(programs))
                                  if len(programs) == 1 and not missed else ("", text))
            # pushed first: a takeover that finds no entries knows the node reported
            if level or self._read_entries:
                self.channel.delete("clean-up", self._entries(item, level))
            if pushed != 1:
                return None
            level, arrival, wait = level + 1, 1, True

    def _clean_root(self, item: Compile) -> None:
        """After the verdict: the root's entries, and the ordinal ``KEEP`` compiles back."""
        self.channel.delete("clean-up", self._entries(item, self.tree.depth - 1))
        if item.count > KEEP:
            self.channel.delete("clean-up", ordinal_directory(
                item.function_dir, item.count - KEEP).rstrip("/"))

    def _gather(self, item: Compile, level: int, read: NodeRead, wait: bool,
                ) -> Generator[Wait, str | None, Summary | None]:
        """The node's summary from what its read found (``_read_node``)."""
        at, everyone, entries = read
        _, children, lo, hi, span, node = at
        if entries is None:
            # every child arrived, all with this rank's program: no entry was read
            return {item.program: [(lo, hi)]}, []
        if not wait and not entries and (level > 1 or self._arrivals(at.directory) != 0):
            # Taken over after its comparer reported it (or the service failed); a level-1
            # node no child reached, its groups' comparers dead, is this rank's to report.
            return None
        parts: list[Summary] = []
        for child, raw in entries.items():
            first = lo + child * span
            part = parse_summary(raw, first, min(first + span - 1, hi))
            if part is not None:
                parts.append(part)
                named = (loads(raw) or {}).get(W.DIFF)
                if isinstance(named, list):
                    item.named.extend(n for n in named
                                      if isinstance(n, list) and len(n) == 3)
        if level == 1 and not everyone:
            # A group that has not reported by now lost its comparer (``wait_s``): this
            # node's comparer reports it in its place (no rank takes a group over).
            for child in range(children):
                if child not in entries:
                    group = self._node(item, 0, node * self.tree.fan_in + child)
                    part = yield from self._gather_group(item, group, 0, wait=False)
                    self.channel.delete("clean-up", group.directory)
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
