"""Bounded estimators: what the report keeps of a stream, whatever its length.

:class:`_Quantiles` estimates a nearest-rank quantile of compile seconds (exact for small
logs, within 1.16 % from a log-scale histogram past them); :class:`_TopK` keeps the most
frequent keys of a stream (the space-saving algorithm).  Neither grows with the input.
"""

from __future__ import annotations

import math
from typing import Any

#: Distinct diffs tracked per cause by the space-saving counter.
TOP_K_DIFFS = 32
#: Exact compile times kept per function before switching to the histogram.
EXACT_SAMPLES = 256

#: Histogram range and resolution for compile seconds.  100 log-spaced buckets
#: per decade from 1e-4 s to 1e4 s (800 buckets) means adjacent bucket edges
#: differ by a factor 10**0.01 = 1.0233; reporting a bucket's geometric middle
#: is within sqrt(1.0233) - 1 = 1.16 % of any value in it.
_HIST_MIN = 1e-4
_HIST_MAX = 1e4
_BUCKETS_PER_DECADE = 100
_LOG_MIN = math.log10(_HIST_MIN)
_N_BUCKETS = int(round((math.log10(_HIST_MAX) - _LOG_MIN) * _BUCKETS_PER_DECADE))


def _round(x: float | None) -> float | None:
    """A figure as the report writes it: rounded to the microsecond; ``None`` when there is
    none or it is not finite."""
    if x is None or not math.isfinite(x):
        return None
    return round(x, 6)


class _Quantiles:
    """Bounded-memory estimator of a nearest-rank quantile of compile times.

    The first :data:`EXACT_SAMPLES` values are kept verbatim, so small logs get
    exact answers.  Every value is also counted in a sparse log-scale histogram
    (at most ``_N_BUCKETS + 2`` entries); once the exact list overflows it is
    dropped and the quantile comes from the histogram: the geometric middle of
    the bucket holding the nearest-rank value, clamped to the observed
    ``[min, max]``.  The error is then at most 1.16 % relative for values in
    1e-4 s .. 1e4 s; values outside that range fall into an under/overflow
    bucket and are reported as the observed min/max.
    """

    __slots__ = ("n", "min", "max", "samples", "buckets")

    def __init__(self) -> None:
        self.n = 0
        self.min = math.inf
        self.max = -math.inf
        self.samples: list[float] | None = []
        self.buckets: dict[int, int] = {}

    def add(self, x: float) -> None:
        """Record one compile time in seconds (finite and >= 0)."""
        self.n += 1
        if x < self.min:
            self.min = x
        if x > self.max:
            self.max = x
        samples = self.samples
        if samples is not None:
            if len(samples) < EXACT_SAMPLES:
                samples.append(x)
            else:
                self.samples = None
        if x < _HIST_MIN:
            b = -1
        elif x >= _HIST_MAX:
            b = _N_BUCKETS
        else:
            b = int((math.log10(x) - _LOG_MIN) * _BUCKETS_PER_DECADE)
            if b >= _N_BUCKETS:  # float rounding just below _HIST_MAX
                b = _N_BUCKETS - 1
        buckets = self.buckets
        buckets[b] = buckets.get(b, 0) + 1

    def merge(self, other: _Quantiles) -> None:
        """Fold ``other`` into this estimator (used for the ``(other)`` row)."""
        if other.n == 0:
            return
        self.n += other.n
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        if self.samples is not None and other.samples is not None and (
            len(self.samples) + len(other.samples) <= EXACT_SAMPLES
        ):
            self.samples.extend(other.samples)
        else:
            self.samples = None
        for b, c in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + c

    def quantile(self, q: float) -> float | None:
        """Nearest-rank ``q`` quantile: the smallest recorded value with at
        least ``ceil(q * n)`` values <= it.  ``None`` when nothing was
        recorded."""
        if self.n == 0:
            return None
        rank = max(1, math.ceil(q * self.n - 1e-9))
        if self.samples is not None:
            return sorted(self.samples)[rank - 1]
        if rank >= self.n:
            return self.max
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                if b < 0:
                    return self.min
                if b >= _N_BUCKETS:
                    return self.max
                mid = 10 ** (_LOG_MIN + (b + 0.5) / _BUCKETS_PER_DECADE)
                return min(max(mid, self.min), self.max)
        return self.max  # unreachable: bucket counts sum to n


class _TopK:
    """Most frequent keys in a stream, in bounded memory (space-saving).

    Keeps at most ``k`` keys.  A new key arriving when full replaces the key
    with the smallest count and inherits that count + 1 (Metwally et al.,
    2005).  Any key occurring more than ``n / k`` times is guaranteed to be
    kept, and counts are exact as long as no more than ``k`` distinct keys were
    seen; otherwise a count may over-estimate by at most the count it
    inherited.  Each key also remembers the first non-empty hint seen with it.
    """

    __slots__ = ("k", "items")

    def __init__(self, k: int = TOP_K_DIFFS) -> None:
        self.k = k
        # key -> [count, hint]
        self.items: dict[str, list[Any]] = {}

    def add(self, key: str, hint: str | None, n: int = 1) -> None:
        """Count ``n`` occurrences of ``key``."""
        items = self.items
        entry = items.get(key)
        if entry is not None:
            entry[0] += n
            if hint and not entry[1]:
                entry[1] = hint
            return
        if len(items) < self.k:
            items[key] = [n, hint]
            return
        victim = min(items, key=lambda k: (items[k][0], k))
        floor = items.pop(victim)[0]
        items[key] = [floor + n, hint]

    def merge(self, other: _TopK) -> None:
        """Fold ``other``'s counts into this counter."""
        for key, (count, hint) in other.items.items():
            self.add(key, hint, count)

    def top(self) -> tuple[str, int, str | None] | None:
        """``(key, count, hint)`` of the most frequent key; ties go to the
        alphabetically first key so output does not depend on line order."""
        if not self.items:
            return None
        key = min(self.items, key=lambda k: (-self.items[k][0], k))
        count, hint = self.items[key]
        return key, count, hint


class _Tally:
    """Counts of at most ``k`` distinct keys, each with what was seen with it first (a
    dict); a key past ``k`` is counted in :attr:`overflow` only.  The keys are few in real
    logs (a function's recompile signatures, its hazards): the first ``k`` are kept whole,
    so that two runs are compared on the same keys, rather than on the most frequent."""

    __slots__ = ("k", "items", "overflow")

    def __init__(self, k: int) -> None:
        self.k = k
        self.items: dict[Any, list[Any]] = {}  # key -> [count, first info]
        self.overflow = 0

    def add(self, key: Any, info: Any, n: int = 1) -> None:
        """Count ``n`` occurrences of ``key``; ``info`` is kept with a new key."""
        entry = self.items.get(key)
        if entry is not None:
            entry[0] += n
        elif len(self.items) < self.k:
            self.items[key] = [n, info]
        else:
            self.overflow += n

    def merge(self, other: _Tally) -> None:
        """Fold ``other``'s counts into this tally."""
        for key, (count, info) in other.items.items():
            self.add(key, info, count)
        self.overflow += other.overflow
