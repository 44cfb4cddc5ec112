"""``otel-jax report``: summarise otel_jax's JSON compile logs per function.

otel_jax writes one structlog JSON object per line; every JAX compilation is a
line whose ``"event"`` is ``"jax.compile"``.  This module reads such a log (a
file, a ``.gz`` file, or stdin) and prints, per jitted function, how many
compiles and recompiles happened, how many seconds they cost, and *why* the
recompiles happened (cause kind, the most frequent argument diff, the hint).
Rows are sorted by compile time lost, so the function worth fixing first is at
the top.

Usage::

    otel-jax report app.log                 # readable table
    otel-jax report --format json app.log   # list of per-function objects
    otel-jax report --format markdown -     # GitHub table, log on stdin
    otel-jax report --format html -o report.html rank*.log   # one page (_html)
    python -m otel_jax._report report app.log.gz --top 5 --function train_step

Design constraints, and how they are met:

* **Streaming, bounded memory.**  Logs of long training runs reach gigabytes,
  so nothing here grows with the number of lines.  Lines are read one at a
  time (each capped at :data:`MAX_LINE_BYTES`).  Per function we keep plain
  counters, a bounded p95 estimator (:class:`_Quantiles`) and, per recompile
  cause, a bounded "most frequent diff" counter (:class:`_TopK`, the
  space-saving algorithm).  The number of rows is capped too: functions beyond
  ``--max-functions`` (default 10,000) are merged into one ``(other)`` row, and
  causes beyond :data:`MAX_CAUSES_PER_FUNCTION` into an ``(other)`` cause.
  Memory therefore depends on the number of distinct functions, never on the
  length of the log.
* **Tolerant input.**  Lines that are not JSON, not objects, or not
  ``jax.compile`` events are skipped and counted (the count goes to stderr);
  missing or mistyped fields fall back to sensible defaults.  A line longer than
  :data:`MAX_LINE_BYTES` is read on in chunks with each JSON string cut to
  :data:`MAX_FIELD_BYTES` (:func:`_condense`), so one huge field does not cost the event.
* **Fast import.**  Standard library only; importing this module must not pull
  in jax or opentelemetry, because the command runs on machines (CI, laptops)
  where only the log is available.

Log fields read from each ``jax.compile`` line (all optional except
``event``): ``function``, ``file``, ``line``, ``is_recompile``, ``count``,
``eager_op``, ``persistent_cache_hit``, ``after_warmup``, ``cause_kind``,
``cause``, ``diff`` (list of ``{path, kind, before, after}``),
``diff_total``, ``hint``, ``compile_s``, ``trace_s``, ``lower_s``,
``backend_compile_s``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

try:  # the vocabulary (standard library only)
    from .._core import _vocab
except ImportError:  # loaded by path, outside its package: the vocabulary, by path too
    import importlib.util as _import_util

    _spec = _import_util.spec_from_file_location(
        "_otel_jax_report_vocab",
        os.path.join(os.path.dirname(__file__), os.pardir, "_core", "_vocab.py"))
    assert _spec is not None and _spec.loader is not None
    _vocab = _import_util.module_from_spec(_spec)
    sys.modules[_spec.name] = _vocab
    _spec.loader.exec_module(_vocab)
Field, MissReason = _vocab.Field, _vocab.MissReason
CauseKind, DiffKey = _vocab.CauseKind, _vocab.DiffKey
EVENT_COMPILE, EVENT_DIVERGENCE = _vocab.EVENT_COMPILE, _vocab.EVENT_DIVERGENCE

__all__ = ["Report", "main", "render", "summarize"]

#: The ``event`` value that marks a compile line.
COMPILE_EVENT = EVENT_COMPILE
#: Cheap substring test done before ``json.loads``: most lines of a mixed log
#: are other events, and a substring search is far cheaper than parsing.
_COMPILE_MARKER = json.dumps(EVENT_COMPILE).encode()
_DIVERGENCE_MARKER = json.dumps(EVENT_DIVERGENCE).encode()
#: Multi-process logs: distinct ranks counted, and distinct divergences listed.
MAX_RANKS = 4096
MAX_DIVERGENCES = 1000

#: Longest line considered; longer lines are skipped (and counted) without
#: ever being held in memory whole, so a corrupt log cannot exhaust memory.
MAX_LINE_BYTES = 1 << 20
#: Default cap on distinct rows; later functions are merged into ``(other)``.
DEFAULT_MAX_FUNCTIONS = 10_000
#: Cap on distinct recompile causes per function (real logs have a handful).
MAX_CAUSES_PER_FUNCTION = 32
#: Distinct diffs tracked per cause by the space-saving counter.
TOP_K_DIFFS = 32
#: Exact compile times kept per function before switching to the histogram.
EXACT_SAMPLES = 256
#: Length caps for strings kept from the log (bounds memory per entry).
_MAX_NAME = 200
_MAX_FILE = 400
_MAX_DIFF = 240
_MAX_HINT = 400
_MAX_DIFF_ENTRIES = 4

EAGER_ROW = "(eager ops)"
OTHER_ROW = "(other)"
UNKNOWN_FUNCTION = "(unknown)"


# --------------------------------------------------------------------------
# Bounded estimators
# --------------------------------------------------------------------------

#: Histogram range and resolution for compile seconds.  100 log-spaced buckets
#: per decade from 1e-4 s to 1e4 s (800 buckets) means adjacent bucket edges
#: differ by a factor 10**0.01 = 1.0233; reporting a bucket's geometric middle
#: is within sqrt(1.0233) - 1 = 1.16 % of any value in it.
_HIST_MIN = 1e-4
_HIST_MAX = 1e4
_BUCKETS_PER_DECADE = 100
_LOG_MIN = math.log10(_HIST_MIN)
_N_BUCKETS = int(round((math.log10(_HIST_MAX) - _LOG_MIN) * _BUCKETS_PER_DECADE))



def _is_rank(value: Any) -> bool:
    """A process index as JAX numbers them (not a bool, not negative)."""
    return type(value) is int and value >= 0

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


# --------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------


class _Cause:
    """Counters for one recompile cause kind of one function."""

    __slots__ = ("count", "seconds", "diffs")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.diffs = _TopK()

    def merge(self, other: _Cause) -> None:
        self.count += other.count
        self.seconds += other.seconds
        self.diffs.merge(other.diffs)


#: Reasons kept apart in the persistent-cache section (more go to ``(other)``).
MAX_MISS_REASONS = 16
UNEXPLAINED = "unexplained"  # a miss the compile ledger did not explain (it was off)


class _PersistentCache:
    """The persistent-cache section: lookups of user functions, hits, misses by reason,
    and per reason its most frequent detail (bounded like everything else)."""

    __slots__ = ("lookups", "hits", "reasons", "explained")

    def __init__(self) -> None:
        self.lookups = 0
        self.hits = 0
        self.explained = 0  # misses the compile ledger gave a reason for
        self.reasons: dict[str, list[Any]] = {}  # reason -> [count, _TopK of details]

    def add(self, hit: bool, reason: Any, detail: Any) -> None:
        self.lookups += 1
        if hit:
            self.hits += 1
            return
        if type(reason) is not str or not reason:
            reason = UNEXPLAINED
        else:
            self.explained += 1
        if len(reason) > _MAX_NAME:
            reason = _text(reason, _MAX_NAME) or UNEXPLAINED
        if reason not in self.reasons and len(self.reasons) >= MAX_MISS_REASONS:
            reason = OTHER_ROW
        entry = self.reasons.get(reason)
        if entry is None:
            entry = self.reasons[reason] = [0, _TopK(8)]
        entry[0] += 1
        text = _text(detail, _MAX_DIFF)
        if text:
            entry[1].add(text, None)

    def to_dict(self) -> dict[str, Any]:
        """``lookups, hits, misses, hit_ratio, misses_by_reason`` (most first, each with
        ``reason, count, top_detail, top_detail_count``)."""
        order = {r.value: i for i, r in enumerate(MissReason)}
        misses = []
        for reason, (count, details) in sorted(
                self.reasons.items(), key=lambda kv: (-kv[1][0], order.get(kv[0], 99), kv[0])):
            top = details.top()
            misses.append({"reason": reason, "count": count,
                           "top_detail": top[0] if top else None,
                           "top_detail_count": top[1] if top else 0})
        return {"lookups": self.lookups, "hits": self.hits,
                "misses": self.lookups - self.hits,
                "hit_ratio": self.hits / self.lookups if self.lookups else None,
                "misses_by_reason": misses}


class _Row:
    """Everything kept for one output row (a function or an aggregate)."""

    __slots__ = (
        "function", "file", "line", "row_kind", "compiles", "recompiles",
        "after_warmup", "cache_hits", "total_s", "recompile_s", "trace_s",
        "lower_s", "backend_s", "times", "causes",
    )

    def __init__(self, function: str, file: str | None, line: int | None,
                 row_kind: str) -> None:
        self.function = function
        self.file = file
        self.line = line
        self.row_kind = row_kind
        self.compiles = 0
        self.recompiles = 0
        self.after_warmup = 0
        self.cache_hits = 0
        self.total_s = 0.0
        self.recompile_s = 0.0
        self.trace_s = 0.0
        self.lower_s = 0.0
        self.backend_s = 0.0
        self.times = _Quantiles()
        self.causes: dict[str, _Cause] = {}

    def cause(self, kind: str) -> _Cause:
        """The counters for ``kind``, merging overflow kinds into ``(other)``."""
        causes = self.causes
        c = causes.get(kind)
        if c is None:
            if len(causes) >= MAX_CAUSES_PER_FUNCTION:
                kind = OTHER_ROW
                c = causes.get(kind)
            if c is None:
                c = causes[kind] = _Cause()
        return c

    def merge(self, other: _Row) -> None:
        """Fold ``other`` into this row (functions past the row cap)."""
        self.compiles += other.compiles
        self.recompiles += other.recompiles
        self.after_warmup += other.after_warmup
        self.cache_hits += other.cache_hits
        self.total_s += other.total_s
        self.recompile_s += other.recompile_s
        self.trace_s += other.trace_s
        self.lower_s += other.lower_s
        self.backend_s += other.backend_s
        self.times.merge(other.times)
        for kind, c in other.causes.items():
            self.cause(kind).merge(c)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of one row (see :func:`summarize`)."""
        causes: list[dict[str, Any]] = []
        for kind, c in self.causes.items():
            top = c.diffs.top()
            causes.append({
                "cause": kind,
                "count": c.count,
                "seconds": _round(c.seconds),
                "top_diff": top[0] if top else None,
                "top_diff_count": top[1] if top else 0,
                "hint": top[2] if top else None,
            })
        causes.sort(key=lambda d: (-d["count"], -d["seconds"], d["cause"]))
        return {
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "row_kind": self.row_kind,
            "compiles": self.compiles,
            "first_compiles": self.compiles - self.recompiles,
            "recompiles": self.recompiles,
            "recompiles_after_warmup": self.after_warmup,
            "persistent_cache_hits": self.cache_hits,
            "total_s": _round(self.total_s),
            "recompile_s": _round(self.recompile_s),
            "p95_s": _round(self.times.quantile(0.95)),
            "max_s": _round(self.times.max if self.times.n else None),
            "trace_s": _round(self.trace_s),
            "lower_s": _round(self.lower_s),
            "backend_compile_s": _round(self.backend_s),
            "causes": causes,
        }


def _round(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, 6)


#: Longest duration taken from a log field (about 116 days); larger values are
#: corrupt and ignored, so that sums stay finite.
_MAX_SECONDS = 1e7


def _seconds(v: Any) -> float | None:
    """A usable duration from a log field: a finite number in ``[0, _MAX_SECONDS]``.
    (``json.loads`` accepts ``NaN``/``Infinity`` and integers of any size, and bools
    are ints; all are rejected.)"""
    if type(v) is float or type(v) is int:
        if 0 <= v <= _MAX_SECONDS:  # NaN fails the comparison; no float() of a huge int
            return float(v)
    return None


def _text(v: Any, limit: int) -> str | None:
    """A non-empty string field, truncated to ``limit`` characters."""
    if v is None or v == "":
        return None
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def render_diff(diff: Any, total: Any = None) -> str | None:
    """Render otel_jax's ``diff`` field compactly, e.g.
    ``batch['x']: f32[32,8] -> f32[17,8]``; several entries are joined with
    ``"; "`` and the rest counted as ``+N more`` (``total`` is the log's
    ``diff_total``, the count before otel_jax capped the list).  Returns
    ``None`` when there is nothing usable, so the caller can fall back to the
    ``cause`` string."""
    if not isinstance(diff, list) or not diff:
        return None
    n = total if type(total) is int and total > len(diff) else len(diff)
    parts = []
    for entry in diff[:_MAX_DIFF_ENTRIES]:
        if isinstance(entry, dict):
            path = entry.get(DiffKey.PATH)
            before, after = entry.get(DiffKey.BEFORE), entry.get(DiffKey.AFTER)
            if before is not None or after is not None:
                change = f"{before} -> {after}"
            else:
                change = str(entry.get(DiffKey.KIND) or "changed")
            parts.append(f"{path}: {change}" if path not in (None, "") else change)
        else:
            parts.append(str(entry))
    shown = min(len(diff), _MAX_DIFF_ENTRIES)
    if n > shown:
        parts.append(f"+{n - shown} more")
    return _text("; ".join(parts), _MAX_DIFF)


#: Bytes kept of each JSON string of an over-long line (the report keeps far less).
MAX_FIELD_BYTES = 16 * 1024
_STRING_STOP = re.compile(rb'["\\]')
_ELLIPSIS = b"..."


_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


def _drop_high_surrogate(out: list[bytes]) -> int:
    """Drop the escape of a surrogate pair's first half kept just before a cut (alone it is
    no character); the bytes dropped."""
    if out and len(out[-1]) == 6 and _HIGH_SURROGATE.fullmatch(out[-1]):
        return len(out.pop())
    return 0


def _condense(first: bytes, readline: Any, limit: int) -> bytes | None:
    """The over-long line that starts with ``first``, read on with ``readline(limit)`` to its
    end, with every JSON string longer than :data:`MAX_FIELD_BYTES` cut short (at a character
    boundary, never inside an escape, marked ``...``).  ``None`` when even that is longer
    than ``limit`` (a huge array, not text).  Memory stays within about ``2 * limit``."""
    out: list[bytes] = []
    size = 0
    in_str = skipping = False
    kept = 0
    carry = b""
    chunk: bytes = first
    while True:
        last = not chunk or chunk.endswith(b"\n")
        buf = carry + chunk if carry else chunk
        carry = b""
        pos, end = 0, len(buf)
        while pos < end:
            if not in_str:
                j = buf.find(b'"', pos)
                piece = buf[pos:] if j < 0 else buf[pos:j + 1]
                out.append(piece)
                size += len(piece)
                if j < 0:
                    break
                in_str, skipping, kept, pos = True, False, 0, j + 1
                continue
            m = _STRING_STOP.search(buf, pos)
            stop = end if m is None else m.start()
            if not skipping and stop > pos:
                room = MAX_FIELD_BYTES - kept
                if stop - pos > room:
                    cut = pos + room
                    while cut > pos and buf[cut] & 0xC0 == 0x80:  # inside a UTF-8 sequence
                        cut -= 1
                    if cut == pos:
                        size -= _drop_high_surrogate(out)
                    out += (buf[pos:cut], _ELLIPSIS)
                    size += cut - pos + 3
                    skipping = True
                else:
                    out.append(buf[pos:stop])
                    size += stop - pos
                    kept += stop - pos
            if m is None:
                break
            if buf[stop] == 0x22:  # the closing quote
                out.append(b'"')
                size += 1
                in_str, pos = False, stop + 1
                continue
            need = 6 if buf[stop + 1:stop + 2] == b"u" else 2
            if stop + need > end and not last:  # an escape split across chunks
                carry = buf[stop:]
                break
            if not skipping:
                if kept + need > MAX_FIELD_BYTES:
                    size -= _drop_high_surrogate(out)
                    out.append(_ELLIPSIS)
                    size += 3
                    skipping = True
                else:
                    out.append(buf[stop:stop + need])
                    size += need
                    kept += need
            pos = stop + need
        if size > limit:  # not text that cutting strings can shrink: drain, then give up
            while not last:
                chunk = readline(limit)
                last = not chunk or chunk.endswith(b"\n")
            return None
        if last:
            return b"".join(out)
        chunk = readline(limit)


def _loads() -> Any:
    """``json.loads``, or with orjson installed (the extra ``otel_jax[report]``) orjson's,
    three times faster, falling back to ``json.loads`` for what orjson refuses (``NaN``,
    ``Infinity``, invalid text).  One difference is left: orjson reads an integer past 64
    bits as a float, which the report then rejects as mistyped (a count, a line number)
    where the standard library's int would be used."""
    try:
        import orjson
    except ImportError:
        return json.loads
    fast, error, slow = orjson.loads, orjson.JSONDecodeError, json.loads

    def loads(line: bytes) -> Any:
        try:
            return fast(line)
        except error:
            return slow(line)

    return loads


class Report:
    """Streaming aggregator of ``jax.compile`` events.

    Feed lines with :meth:`feed_lines` (or parsed events with :meth:`add`),
    then call :meth:`rows`.  Memory is bounded by ``max_functions`` rows.
    """

    def __init__(self, *, include_eager: bool = False,
                 functions: Iterable[str] | None = None,
                 max_functions: int = DEFAULT_MAX_FUNCTIONS) -> None:
        """
        :param include_eager: show eager-op compiles as their own rows instead
            of one ``(eager ops)`` row.
        :param functions: keep only events of these function names (the name
            ``(eager ops)`` selects all eager-op compiles).
        :param max_functions: row cap; later functions go to ``(other)``.
        """
        self.include_eager = include_eager
        self.functions = frozenset(functions) if functions else None
        self.max_functions = max(1, max_functions)
        self.events = 0
        self.skipped = 0  # lines that are not jax.compile JSON objects
        self.filtered = 0  # compile events dropped by ``functions``
        self._rows: dict[tuple[str, str | None, int | None, bool], _Row] = {}
        self._eager: _Row | None = None
        self._other: _Row | None = None
        #: Multi-process logs: per rank, [compiles, recompiles]; divergences by what they say.
        self.ranks: dict[int, list[int]] = {}
        self.divergences: dict[tuple[str, int, str, str], dict[str, Any]] = {}
        self.divergence_events = 0
        self._cache = _PersistentCache()

    # -- input -------------------------------------------------------------

    def feed_lines(self, stream: IO[bytes]) -> None:
        """Consume a binary stream of log lines, one JSON object per line.

        Reads with ``readline(MAX_LINE_BYTES)`` so even a corrupt log with a
        gigantic line is processed in bounded memory.
        """
        readline = stream.readline
        loads = _loads()
        marker = _COMPILE_MARKER
        limit = MAX_LINE_BYTES
        add = self.add
        skipped = 0
        while True:
            line = readline(limit)
            if not line:
                break
            if len(line) >= limit and not line.endswith(b"\n"):
                # Over-long line: read on chunk by chunk, every JSON string cut short, so
                # an event with one huge field still counts, in bounded memory.
                condensed = _condense(line, readline, limit)
                if condensed is None:
                    skipped += 1
                    continue
                line = condensed
            if marker not in line:
                if _DIVERGENCE_MARKER in line:
                    try:
                        self.add_divergence(loads(line))
                    except Exception:  # bad JSON, or a value no check foresaw
                        skipped += 1
                elif line.strip() and not self.add_other(line):
                    skipped += 1
                continue
            try:
                event = loads(line)
            except (ValueError, RecursionError):  # bad JSON/UTF-8, deep nesting
                skipped += 1
                continue
            if type(event) is not dict or event.get(Field.EVENT) != COMPILE_EVENT:
                skipped += 1
                continue
            try:
                add(event)
            except Exception:  # a value no check above foresaw: skip the line, never crash
                skipped += 1
        self.skipped += skipped

    def add(self, ev: dict[str, Any]) -> None:
        """Aggregate one parsed ``jax.compile`` event."""
        function = ev.get(Field.FUNCTION)
        if type(function) is not str or not function:
            function = _text(function, _MAX_NAME) or UNKNOWN_FUNCTION
        elif len(function) > _MAX_NAME:
            function = _text(function, _MAX_NAME) or UNKNOWN_FUNCTION
        eager = ev.get(Field.EAGER_OP) is True
        if self.functions is not None and function not in self.functions and not (
            eager and EAGER_ROW in self.functions
        ):
            self.filtered += 1
            return
        self.events += 1

        row = self._row_for(ev, function, eager)
        rank = ev.get(Field.PROCESS_INDEX)
        per_rank = None
        if type(rank) is int and (rank in self.ranks or len(self.ranks) < MAX_RANKS):
            per_rank = self.ranks.setdefault(rank, [0, 0])
            per_rank[0] += 1

        # Recompile: trust ``is_recompile``; else ``count > 1`` unless the
        # persistent cache served it (otel_jax's own definition); else any
        # cause other than first_compile.
        cause_kind = ev.get(Field.CAUSE_KIND)
        rec = ev.get(Field.IS_RECOMPILE)
        if type(rec) is not bool:
            count = ev.get(Field.COUNT)
            if type(count) is int:
                rec = count > 1 and ev.get(Field.PERSISTENT_CACHE_HIT) is not True
            else:
                rec = isinstance(cause_kind, str) and cause_kind not in (
                    "", CauseKind.FIRST_COMPILE.value)

        secs = _seconds(ev.get(Field.COMPILE_S))
        trace = _seconds(ev.get(Field.TRACE_S))
        lower = _seconds(ev.get(Field.LOWER_S))
        backend = _seconds(ev.get(Field.BACKEND_COMPILE_S))
        if secs is None and (trace is not None or lower is not None or backend is not None):
            secs = (trace or 0.0) + (lower or 0.0) + (backend or 0.0)

        row.compiles += 1
        if secs is not None:
            row.total_s += secs
            row.times.add(secs)
        if trace is not None:
            row.trace_s += trace
        if lower is not None:
            row.lower_s += lower
        if backend is not None:
            row.backend_s += backend
        hit = ev.get(Field.PERSISTENT_CACHE_HIT)
        if hit is True:
            row.cache_hits += 1
        if type(hit) is bool and not eager:
            self._cache.add(hit, ev.get(Field.PERSISTENT_CACHE_MISS_REASON),
                            ev.get(Field.PERSISTENT_CACHE_MISS_DETAIL))
        if rec:
            row.recompiles += 1
            if per_rank is not None:
                per_rank[1] += 1
            if secs is not None:
                row.recompile_s += secs
            if ev.get(Field.AFTER_WARMUP) is True:
                row.after_warmup += 1
            if type(cause_kind) is not str or not cause_kind:
                cause_kind = CauseKind.UNKNOWN.value
            elif len(cause_kind) > _MAX_NAME:
                cause_kind = _text(cause_kind, _MAX_NAME) or CauseKind.UNKNOWN.value
            c = row.cause(cause_kind)
            c.count += 1
            if secs is not None:
                c.seconds += secs
            key = (render_diff(ev.get(Field.DIFF), ev.get(Field.DIFF_TOTAL))
                   or _text(ev.get(Field.CAUSE), _MAX_DIFF))
            if key is not None:
                c.diffs.add(key, _text(ev.get(Field.HINT), _MAX_HINT))
        else:
            cause_kind = CauseKind.FIRST_COMPILE.value
        self._compiled(ev, row, function, rec, cause_kind, secs)

    def _compiled(self, ev: dict[str, Any], row: _Row, function: str, recompile: bool,
                  cause_kind: str, seconds: float | None) -> None:
        """Called once per aggregated compile event, with what :meth:`add` made of it (the
        row it went to, the checked function name, recompile or not, cause kind, seconds):
        a subclass that keeps more (the HTML report) reads the same facts."""

    def add_other(self, line: bytes) -> bool:
        """A line that is no compile or divergence event: ``True`` when a subclass used it
        (the HTML report reads storm warnings); else it counts as skipped."""
        return False

    def add_divergence(self, ev: Any) -> None:
        """Aggregate one ``jax.compile.divergence`` event: every rank that saw a divergence
        logs it, so one divergence is listed once, with the ranks that reported it."""
        if type(ev) is not dict or ev.get(Field.EVENT) != EVENT_DIVERGENCE:
            raise ValueError("not a divergence event")
        function = _text(ev.get(Field.FUNCTION), _MAX_NAME)
        kind = _text(ev.get(Field.DIVERGENCE_KIND), _MAX_NAME)
        count = ev.get(Field.COUNT)
        if not function or not kind or type(count) is not int or count < 1:
            raise ValueError("a divergence event without its function, kind or count")
        if self.functions is not None and function not in self.functions:
            self.filtered += 1
            return
        text = _text(ev.get(Field.DIVERGENCE), _MAX_DIFF) or ""
        self.divergence_events += 1
        key = (function, count, kind, text)
        entry = self.divergences.get(key)
        if entry is None:
            if len(self.divergences) >= MAX_DIVERGENCES:
                return
            ranks = ev.get(Field.RANKS)
            sides = ([[r for r in side if _is_rank(r)][:64] for side in ranks[:16]
                      if isinstance(side, list)] if isinstance(ranks, list) else [])
            missing = ev.get(Field.MISSING_RANKS)
            entry = self.divergences[key] = {
                "function": function, "count": count, "kind": kind, "divergence": text,
                "ranks": sides,
                "missing_ranks": ([r for r in missing if _is_rank(r)][:64]
                                  if isinstance(missing, list) else []),
                "reported_by": [],
            }
        by = ev.get(Field.PROCESS_INDEX)
        if _is_rank(by) and by not in entry["reported_by"] and len(entry["reported_by"]) < 64:
            entry["reported_by"].append(by)
            entry["reported_by"].sort()

    def _row_for(self, ev: dict[str, Any], function: str, eager: bool) -> _Row:
        if eager and not self.include_eager:
            if self._eager is None:
                self._eager = _Row(EAGER_ROW, None, None, "eager_ops")
            return self._eager
        file = ev.get(Field.FILE)
        file = _text(file, _MAX_FILE) if file is not None else None
        line = ev.get(Field.LINE)
        if type(line) is not int:
            line = None
        key = (function, file, line, eager)
        row = self._rows.get(key)
        if row is None:
            if len(self._rows) >= self.max_functions:
                if self._other is None:
                    self._other = _Row(OTHER_ROW, None, None, "other")
                return self._other
            row = self._rows[key] = _Row(function, file, line,
                                         "eager_op" if eager else "function")
        return row

    # -- output ------------------------------------------------------------

    def persistent_cache(self) -> dict[str, Any] | None:
        """The persistent-cache section (see :class:`_PersistentCache`), or ``None``
        when no line gave a miss reason (a log written without the compile ledger)."""
        return self._cache.to_dict() if self._cache.explained else None

    def rows(self, top: int | None = None) -> list[dict[str, Any]]:
        """Per-function summaries, most compile seconds first.

        ``top`` keeps the first N function rows; the aggregate rows
        ``(other)`` and ``(eager ops)`` are always appended last, in that
        order, when they have events.
        """
        rows = sorted(
            self._rows.values(),
            key=lambda r: (-r.total_s, -r.recompile_s, -r.compiles,
                           r.function, r.file or "", -1 if r.line is None else r.line),
        )
        if top is not None:
            rows = rows[:top]
        out = [r.to_dict() for r in rows]
        for agg in (self._other, self._eager):
            if agg is not None and agg.compiles:
                out.append(agg.to_dict())
        return out


def summarize(stream: IO[bytes], **kwargs: Any) -> tuple[list[dict[str, Any]], Report]:
    """Aggregate a binary log stream and return ``(rows, report)``.

    Each row is a dict (``row_kind`` is ``function``, ``eager_op`` with
    ``include_eager``, or the aggregates ``other`` / ``eager_ops``) with the
    stable keys ``function, file, line, row_kind,
    compiles, first_compiles, recompiles, recompiles_after_warmup,
    persistent_cache_hits, total_s, recompile_s, p95_s, max_s, trace_s,
    lower_s, backend_compile_s, causes``; each cause has ``cause, count,
    seconds, top_diff, top_diff_count, hint``.  ``kwargs`` go to
    :class:`Report` except ``top``, which goes to :meth:`Report.rows`.
    """
    top = kwargs.pop("top", None)
    report = Report(**kwargs)
    report.feed_lines(stream)
    return report.rows(top), report


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------

_COLUMNS = ("FUNCTION", "LOCATION", "COMPILES", "RECOMPILES", "TOTAL_S",
            "P95_S", "RECOMPILE_S")


#: Characters that must not reach a terminal raw: C0/C1 controls (ESC starts escape
#: sequences, BEL rings, newlines would inject rows), DEL, line/paragraph separators
#: and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                          "\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``, ``\\n``), so that
    names read from a log can neither drive the terminal nor add table rows."""
    return _UNPRINTABLE.sub(_escape_char, text)


def _printable_row(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("function", "file"):
        if isinstance(out.get(key), str):
            out[key] = printable(out[key])
    out["causes"] = [{k: printable(v) if isinstance(v, str) else v for k, v in c.items()}
                     for c in row["causes"]]
    return out


def _location(row: dict[str, Any]) -> str:
    if not row["file"]:
        return ""
    base = os.path.basename(row["file"]) or row["file"]
    return f"{base}:{row['line']}" if row["line"] is not None else base


def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _cells(row: dict[str, Any]) -> list[str]:
    return [row["function"], _location(row), str(row["compiles"]),
            str(row["recompiles"]), _fmt_s(row["total_s"]), _fmt_s(row["p95_s"]),
            _fmt_s(row["recompile_s"])]


def _clip(s: str, width: int | None) -> str:
    if width is None or len(s) <= width:
        return s
    return s[: max(0, width - 3)] + "..."


def render_table(rows: Sequence[dict[str, Any]], width: int | None = None) -> str:
    """Aligned plain-text table; each recompile cause is listed under its
    function with its most frequent diff and hint.  ``width`` (terminal
    columns) shortens long function names and clips the cause/hint lines;
    ``None`` keeps everything whole (pipes, files)."""
    if not rows:
        return "no jax.compile events\n"
    rows = [_printable_row(r) for r in rows]
    table = [list(_COLUMNS)] + [_cells(r) for r in rows]
    if width is not None:  # keep names from pushing the numbers off-screen
        name_cap = max(12, width - 70)
        for cells in table[1:]:
            cells[0] = _clip(cells[0], name_cap)
            cells[1] = _clip(cells[1], 30)
    widths = [max(len(cells[i]) for cells in table) for i in range(len(_COLUMNS))]

    def line(cells: list[str]) -> str:
        left = [c.ljust(w) for c, w in zip(cells[:2], widths[:2])]
        right = [c.rjust(w) for c, w in zip(cells[2:], widths[2:])]
        return "  ".join(left + right).rstrip()

    out = [line(table[0])]
    for row, cells in zip(rows, table[1:]):
        out.append(line(cells))  # numbers are never clipped
        for c in row["causes"]:
            detail = f"  - {c['cause']} x{c['count']} ({_fmt_s(c['seconds'])} s)"
            if c["top_diff"]:
                detail += f": {c['top_diff']}"
                if c["top_diff_count"] != c["count"]:
                    detail += f" (x{c['top_diff_count']})"
            out.append(_clip(detail, width))
            if c["hint"]:
                out.append(_clip(f"      hint: {c['hint']}", width))
    return "\n".join(out) + "\n"


_MD_SPECIAL = re.compile(r"[\\|*`\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _md(s: str) -> str:
    """Escape text for a GitHub table cell: no HTML (``main.<locals>.<lambda>`` is text,
    not tags), no emphasis or links, no cell breaks, no control characters."""
    s = printable(s.replace("\n", " "))
    s = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), s)
    return re.sub("[&<>]", lambda m: _HTML[m.group()], s)


def _md_code(s: str) -> str:
    """A code span (HTML and emphasis are not read inside one); only pipes are escaped."""
    if "`" in s:
        return _md(s)
    return "`" + printable(s.replace("\n", " ")).replace("|", "\\|") + "`"


def render_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table, one row per function; recompile
    causes (with most frequent diff and hint) share the last cell."""
    header = ["Function", "Location", "Compiles", "Recompiles", "Total s",
              "p95 s", "Recompile s", "Recompile causes"]
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join(["---", "---"] + ["---:"] * 5 + ["---"]) + " |"]
    for row in rows:
        causes = []
        for c in row["causes"]:
            text = f"**{_md(c['cause'])}** ×{c['count']} ({_fmt_s(c['seconds'])} s)"
            if c["top_diff"]:
                text += f": {_md_code(c['top_diff'])}"
            if c["hint"]:
                text += f" — {_md(c['hint'])}"
            causes.append(text)
        cells = [_md(x) for x in _cells(row)] + ["<br>".join(causes)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def render_persistent_cache(section: dict[str, Any] | None, fmt: str) -> str:
    """The persistent-cache section after the table (``table`` or ``markdown``): hits,
    and misses by reason with the most frequent detail; ``""`` without lookups."""
    if not section:
        return ""
    ratio = section["hit_ratio"]
    head = f"{section['lookups']} lookups, {section['hits']} hits"
    if ratio is not None:
        head += f" ({100 * ratio:.0f}%)"
    head += f", {section['misses']} misses"
    if fmt == "markdown":
        out = ["", "**Persistent cache**: " + _md(head), ""]
        if section["misses_by_reason"]:
            out += ["| Miss reason | Misses | Most frequent detail |", "| --- | ---: | --- |"]
            for m in section["misses_by_reason"]:
                detail = (f"{_md_code(m['top_detail'])} ×{m['top_detail_count']}"
                          if m["top_detail"] else "")
                out.append(f"| {_md(m['reason'])} | {m['count']} | {detail} |")
        return "\n".join(out) + "\n"
    out = ["", "Persistent cache: " + printable(head)]
    for m in section["misses_by_reason"]:
        line = f"  {printable(m['reason']):<14} {m['count']:>6}"
        if m["top_detail"]:
            line += f"  {printable(m['top_detail'])} (x{m['top_detail_count']})"
        out.append(line)
    return "\n".join(out) + "\n"


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


#: Characters JSON leaves raw that a terminal or an editor may act on.
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                       "\u2066-\u2069]")


def render_json(rows: Sequence[dict[str, Any]]) -> str:
    """Strict JSON (no ``NaN``/``Infinity``); control characters as ``\\u`` escapes."""
    text = json.dumps(_finite(list(rows)), indent=2, ensure_ascii=False, allow_nan=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def render_ranks(report: Report, fmt: str) -> str:
    """Multi-process logs: the divergences between ranks first, then compiles per rank.
    Empty for the log of one process without divergences."""
    if not report.divergences and len(report.ranks) <= 1:
        return ""
    md = fmt == "markdown"
    out: list[str] = []
    divs = sorted(report.divergences.values(), key=lambda d: (d["function"], d["count"]))
    out.append(("### " if md else "") + f"Divergences between ranks: {len(divs)}")
    for d in divs:
        sides = " vs ".join(",".join(map(str, side)) for side in d["ranks"])
        by = ",".join(map(str, d["reported_by"]))
        line = (f"{printable(d['function'])} #{d['count']} [{printable(d['kind'])}] "
                f"{printable(d['divergence'])} (ranks {sides}; reported by {by})")
        out.append(("- " if md else "  ") + (_md(line) if md else line))
    out.append("")
    out.append(("### " if md else "") + "Compiles per rank")
    if md:
        out += ["| rank | compiles | recompiles |", "|---:|---:|---:|"]
    else:
        out.append(f"  {'RANK':>6} {'COMPILES':>9} {'RECOMPILES':>11}")
    for rank in sorted(report.ranks):
        compiles, recompiles = report.ranks[rank]
        out.append(f"| {rank} | {compiles} | {recompiles} |" if md
                   else f"  {rank:>6} {compiles:>9} {recompiles:>11}")
    return "\n".join(out) + "\n\n"


def render(rows: Sequence[dict[str, Any]], fmt: str, width: int | None = None) -> str:
    """Render ``rows`` as ``table``, ``json`` or ``markdown`` text."""
    if fmt == "json":
        return render_json(rows)
    if fmt == "markdown":
        return render_markdown(rows)
    return render_table(rows, width)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {n}")
    return n


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-jax",
        description="Tools for otel_jax's JSON compile logs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    rep = sub.add_parser(
        "report",
        help="summarise jax.compile log lines per function",
        description=(
            "Summarise otel_jax JSON log lines (one object per line) per "
            "function: compiles, recompiles, compile seconds, p95, seconds "
            "lost to recompiles, and recompile causes with their most "
            "frequent diff and hint. Rows are sorted by total compile "
            "seconds. Reads in a streaming way; memory does not grow with "
            "the log's length."
        ),
    )
    rep.add_argument("files", nargs="*", default=["-"], metavar="file",
                     help="log file ('.gz' is decompressed); '-' or omitted reads stdin. "
                          "Several files (the logs of the ranks of a multi-process job) "
                          "are summarised together, divergences between ranks first")
    rep.add_argument("--format", choices=("table", "json", "markdown", "html"),
                     default="table",
                     help="output format (default: table); html is one self-contained page "
                          "(timeline, tables, every kept compile's diff; charts need the "
                          "extra otel_jax[report])")
    rep.add_argument("-o", "--output", metavar="PATH",
                     help="write the report to PATH instead of stdout")
    rep.add_argument("--top", type=_positive_int, metavar="N",
                     help="show only the N functions with the most compile seconds "
                          "(the (other)/(eager ops) aggregate rows are still shown)")
    rep.add_argument("--function", action="append", metavar="NAME", dest="functions",
                     help="only this function (repeatable); '(eager ops)' selects "
                          "eager-op compiles")
    rep.add_argument("--include-eager", action="store_true",
                     help="list eager-op compiles per op instead of one "
                          "'(eager ops)' row")
    rep.add_argument("--max-functions", type=_positive_int, default=DEFAULT_MAX_FUNCTIONS,
                     metavar="N",
                     help="distinct rows kept before merging the rest into '(other)' "
                          f"(default: {DEFAULT_MAX_FUNCTIONS})")
    return parser


def _open(path: str) -> IO[bytes]:
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _read_errors() -> tuple[type[BaseException], ...]:
    import zlib

    # OSError: unreadable, or not gzip (gzip.BadGzipFile); EOFError: truncated .gz;
    # zlib.error: corrupt compressed data.
    return (OSError, EOFError, zlib.error)


def _run_report(args: argparse.Namespace) -> int:
    kind: type[Report] = Report
    if args.format == "html":
        from ._html import HtmlReport

        kind = HtmlReport
    report = kind(include_eager=args.include_eager, functions=args.functions,
                  max_functions=args.max_functions)
    status = 0
    for path in args.files or ["-"]:
        status = max(status, _feed(report, path))
        if status == 130:
            break
    if status == 2:
        return 1

    rows = report.rows(args.top)
    out: IO[str] = sys.stdout
    if args.output:
        try:
            out = open(args.output, "w", encoding="utf-8", errors="replace")
        except OSError as exc:
            print(f"otel-jax report: cannot write {printable(args.output)}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 1
    try:
        if args.format == "html":
            from ._html import render_html

            out.write(render_html(report, rows, sources=args.files))  # type: ignore[arg-type]
        else:
            width = None
            if args.format == "table" and out.isatty():
                import shutil

                width = shutil.get_terminal_size().columns
            if args.format != "json":
                out.write(render_ranks(report, args.format))
            out.write(render(rows, args.format, width))
            if args.format != "json":  # the JSON output stays a list of rows
                out.write(render_persistent_cache(report.persistent_cache(), args.format))
        out.flush()
    finally:
        if out is not sys.stdout:
            out.close()

    note = f"otel-jax report: {report.events} jax.compile events"
    if report.divergence_events:
        note += (f", {report.divergence_events} jax.compile.divergence events "
                 f"({len(report.divergences)} divergences)")
    if report.filtered:
        note += f", {report.filtered} filtered out by --function"
    if report.skipped:
        note += f"; skipped {report.skipped} lines that are not jax.compile JSON events"
    print(note, file=sys.stderr)
    return status


def _feed(report: Report, path: str) -> int:
    """Feed one file (or stdin) to ``report``: 0, 1 (unreadable part), 2 (cannot open or
    read at all) or 130 (interrupted)."""
    status = 0
    name = printable(path)
    try:
        if path == "-":
            if sys.stdin is None:
                print("otel-jax report: no stdin to read", file=sys.stderr)
                return 2
            if sys.stdin.isatty():
                print("otel-jax report: reading the log from stdin (Ctrl-D ends)",
                      file=sys.stderr)
            report.feed_lines(sys.stdin.buffer)
        else:
            try:
                stream = _open(path)
            except OSError as exc:
                print(f"otel-jax report: cannot open {name}: {exc.strerror or exc}",
                      file=sys.stderr)
                return 2
            try:
                with stream:
                    report.feed_lines(stream)
            except _read_errors() as exc:
                print(f"otel-jax report: cannot read {name} past the first "
                      f"{report.events + report.skipped + report.filtered} lines, it is "
                      f"corrupt or truncated ({type(exc).__name__}: {exc}); the summary "
                      "below covers what was read", file=sys.stderr)
                status = 1
    except KeyboardInterrupt:
        # Ctrl-C on a long or endless stream: the summary of what was read so far.
        print("otel-jax report: interrupted; the summary below covers what was read",
              file=sys.stderr)
        status = 130
    return status


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``otel-jax`` console command; returns the exit
    status (0 ok, 1 unreadable input, 2 usage error)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return _run_report(args)
    except BrokenPipeError:
        # Output piped into e.g. ``head``: stop quietly, like other CLI tools.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        return 130

