"""What one rank remembers of each function's verdicts, to tell a shifted ordinal from a
divergence.

A rank that compiles one program more than the others (a partial batch on one rank)
is reported where it happened and at the next ordinal; after that, its ordinal ``k``
holds the others' ordinal ``k - 1``. Once two ordinals in a row show the same
programs one ordinal apart, the following ones are not reported again. Each rank
keeps, per function, the verdicts' groups of the last ``MAX_ORDINALS`` ordinals, as
ranges of ranks (a verdict of 1,024 agreeing ranks is one range), and the first
ordinal reported divergent; ``MAX_FUNCTIONS`` functions at most, the least recently
seen forgotten first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ._ranks_name import Group, Program, decode_ranks, encode_ranks, same_program

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
