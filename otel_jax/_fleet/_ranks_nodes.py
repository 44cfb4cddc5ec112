"""The nodes of the cross-rank tree (``_ranks_tree``): its shape, a group's counter and
entries, and the summaries a node sends up (ranks as runs, merged without listing them).

The counters' layouts stay within the 32 bits the coordination service parses a counter
as (``_ranks_transport.COUNTER_MAX``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from .._core._vocab import RankWire as W
from . import _wire
from ._wire import Program, Run, loads, runs_text

#: The most entries (ranks, or child summaries) one comparer reads per compile.
FAN_IN = 128
#: The most ranks of a group (level 0): one presence bit each in the group's counter.
GROUP = 8
#: A group's counter, within the 32 bits the service parses a counter as
#: (``_ranks_transport.COUNTER_MAX``): presence bits below ``SUM_SHIFT``; above them the
#: sum of the arrivals' program digests, signed ``GROUP_HASH_BITS``-bit integers (eight
#: of them within +-2**20, so +-2**28 once shifted); and ``GROUP_CLOSED`` added once the
#: group was closed: by its comparer, by its parent's comparer in a dead one's place,
#: and by a rank that takes the parent over (three times stays below 2**31). A group
#: that differs passes for one program only when its digests happen to sum alike:
#: about one in 2**18.
SUM_SHIFT = GROUP
GROUP_HASH_BITS = 18
GROUP_CLOSED = 1 << (SUM_SHIFT + GROUP_HASH_BITS + 3)
PRESENCE = (1 << SUM_SHIFT) - 1
#: A node's arrival counter above level 0: the arrivals in its low ``COUNT_BITS`` bits,
#: above them the sum of the arrivals' program digests, signed ``HASH_BITS``-bit
#: integers (the last to arrive tells the comparer whether they all compiled one
#: program, so that it reads no entry when they did). ``MAX_FAN_IN`` arrivals of the
#: largest digests, either sign, stay within the service's 32 bits; no closed mark fits
#: beside them: an arrival after the comparer read the node learns it from the verdict.
COUNT_BITS = 8
HASH_BITS = 17
MAX_FAN_IN = 128
#: Marks a program known only by its group digest (``placeholder``).
PLACEHOLDER = "#"
#: Pairs of signatures named on the way up that a summary carries.
MAX_NAMED = 4

Runs = list[Run]
#: A node's summary: its ranks grouped by program, and the ones missing.
Summary = tuple[dict[Program, Runs], Runs]


# --- the shape of the tree ----------------------------------------------------------------

class Tree:
    """Which node of each level a rank belongs to, and what a node holds: groups of
    ``min(fan_in, GROUP)`` ranks at level 0, nodes of ``fan_in`` children above."""

    def __init__(self, count: int, fan_in: int = FAN_IN) -> None:
        if not 2 <= fan_in <= MAX_FAN_IN:
            raise ValueError(f"a tree's fan-in is 2 to {MAX_FAN_IN}")
        self.count = count
        self.fan_in = fan_in
        self.group = min(fan_in, GROUP)
        n = -(-count // self.group)
        self.widths: list[int] = [n]  # nodes per level, up to the root's 1
        while n > 1:
            n = -(-n // fan_in)
            self.widths.append(n)
        self.depth = len(self.widths)

    def _size(self, level: int) -> int:
        return self.group if level == 0 else self.fan_in

    def path(self, rank: int) -> list[tuple[int, int]]:
        """(node, slot in it) at each level, from level 0 to the root."""
        out, index = [], rank
        for level in range(self.depth):
            size = self._size(level)
            out.append((index // size, index % size))
            index //= size
        return out

    def children(self, level: int, node: int) -> int:
        """Entries the node waits for: ranks at level 0, child nodes above."""
        below = self.count if level == 0 else self.widths[level - 1]
        size = self._size(level)
        return max(0, min(size, below - node * size))

    def ranks(self, level: int, node: int) -> Run:
        """The ranks under a node."""
        span = self.group * self.fan_in ** level
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
    if len(groups) == 1 and not missing and not named:
        [(fp, pf)] = groups  # every rank of the node, one program: its fingerprints
        return f"{fp} {pf}"
    value: dict[str, Any] = {W.GROUPS: [[p[0], p[1], runs_text(r)] for p, r in
                                        sorted(groups.items(), key=lambda i: i[1][0])]}
    if missing:
        value[W.MISSING] = runs_text(missing)
    if named:
        value[W.DIFF] = named[:MAX_NAMED]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
            runs = parse_runs(g[2], lo, hi)
        except (IndexError, TypeError):
            continue
        if runs:
            groups.setdefault(program, []).extend(runs)
    return groups, parse_runs(value.get(W.MISSING) or "", lo, hi)


class GroupEntry(NamedTuple):
    """A group's entry ``<arrival>``: a rank unlike an arrival before it."""

    arrival: int
    slot: int
    program: Program
    #: the sum of the digests of the arrivals before it
    before: int


def group_entry(name: str, raw: str, children: int) -> GroupEntry | None:
    try:
        arrival = int(name)
        slot_text, fp, pf, before = str(raw).split(" ")
        entry = GroupEntry(arrival, int(slot_text), (fp, pf), int(before))
    except ValueError:
        return None
    if arrival < 2 or not 0 <= entry.slot < children:
        return None
    return entry


def group_value(value: int) -> tuple[int, int, int]:
    """A group's counter as (times closed, presence bits, sum of digests)."""
    closes = (value + (GROUP_CLOSED >> 1)) // GROUP_CLOSED
    rest = value - closes * GROUP_CLOSED
    present = rest & PRESENCE
    return closes, present, (rest - present) >> SUM_SHIFT


def node_value(value: int) -> tuple[int, int]:
    """A node's arrival counter above level 0 as (arrivals, sum of their digests)."""
    arrivals = value & ((1 << COUNT_BITS) - 1)
    return arrivals, (value - arrivals) >> COUNT_BITS


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


def group_base(entries: dict[int, GroupEntry], own: Program, first_digest: int | None,
          total: int, count: int) -> Program:
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
    for program in (own, *(e.program for e in entries.values())):
        if program_hash(program, GROUP_HASH_BITS) == first_digest:
            return program
    return placeholder(first_digest)


def placeholder(digest: int) -> Program:
    """A program known by its group digest only (its fingerprints were never sent)."""
    return "", f"{PLACEHOLDER}{digest}"


def resolved(programs: dict[Program, Runs], known: Iterable[Program]) -> dict[Program, Runs]:
    """The programs of a summary with those known by their digest only replaced by the
    program of ``known`` (or of the summary) that has that digest."""
    by_digest = {program_hash(p, GROUP_HASH_BITS): p
                 for p in (*known, *programs) if not p[1].startswith(PLACEHOLDER)}
    out: dict[Program, Runs] = {}
    for program, runs in programs.items():
        if program[1].startswith(PLACEHOLDER):
            try:
                program = by_digest.get(int(program[1][len(PLACEHOLDER):]), program)
            except ValueError:
                pass
        out[program] = normalized([*out.get(program, []), *runs])
    return out


def program_hash(program: Program, bits: int = HASH_BITS) -> int:
    """A digest of what a rank compiled, summed by the node counters: a signed
    ``bits``-bit integer (a sum of either sign stays small)."""
    digest = hashlib.blake2b(f"{program[0]} {program[1]}".encode("utf-8", "backslashreplace"),
                             digest_size=4).digest()
    return (int.from_bytes(digest, "big") >> (32 - bits)) - (1 << (bits - 1))


def ordinal_directory(function_dir: str, count: int) -> str:
    """The keys of one compile ordinal of one function, in a tree: a digest of both under
    ``TREE_PREFIX``, short since every key of every rank carries it."""
    digest = hashlib.blake2b(f"{function_dir}{count}".encode("utf-8", "backslashreplace"),
                             digest_size=6).digest()
    return f"{W.TREE_PREFIX}/{base64.urlsafe_b64encode(digest).decode('ascii')}/"
