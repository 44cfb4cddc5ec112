"""Aggregating compile events: rows per function, ranks, divergences, the persistent cache.

:class:`Report` takes the events :func:`._read.read_lines` parses and keeps, per function
(file, line), counters, a bounded p95 estimator and per recompile cause its most frequent
diff (:mod:`._bounded`); per rank its compiles, each divergence between ranks once, and
the persistent cache's hits and misses by reason.  :meth:`Report.rows` gives the stable
JSON shape every renderer reads.  Rows and causes are capped, so memory depends on the
number of distinct functions, never on the length of the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from .._core._vocab import (
    EVENT_DIVERGENCE,
    EVENT_STEP,
    CauseKind,
    DiffKey,
    Field,
    MissReason,
    ReportName,
    RowKind,
)
from ._bounded import _Quantiles, _round, _Tally, _TopK
from ._hazards import HAZARD_MARKER, Hazards
from ._programs import ProgramTally
from ._read import (
    _MAX_DIFF,
    _MAX_FILE,
    _MAX_HINT,
    _MAX_NAME,
    _MAX_PATH,
    _is_rank,
    _seconds,
    _text,
    read_lines,
)
from ._steps import _STEP_MARKER, Steps

#: Multi-process logs: distinct ranks counted, and distinct divergences listed.
MAX_RANKS = 4096
MAX_DIVERGENCES = 1000
#: Default cap on distinct rows; later functions are merged into ``(other)``.
DEFAULT_MAX_FUNCTIONS = 10_000
#: Cap on distinct recompile causes per function (real logs have a handful).
MAX_CAUSES_PER_FUNCTION = 32
_MAX_DIFF_ENTRIES = 4
#: Recompile signatures (cause kind and the paths that changed) kept per
#: function, and the paths kept of one signature (each cut to ``_MAX_PATH`` characters).
MAX_SIGNATURES_PER_FUNCTION = 32
MAX_SIGNATURE_PATHS = 8
#: The (eager ops) row's calling lines kept (the first ones; later ones only counted), and
#: how many of them a row lists (``callsites``), most seconds first.
MAX_EAGER_CALLSITES = 256
TOP_CALLSITES = 5
#: The (eager ops) row's ops (JAX's primitives) counted apart, and how many it lists
#: (``ops``), most compiles first; the rest are counted in ``ops_more``.
MAX_EAGER_OPS = 256
TOP_OPS = 8


class _Cause:
    """Counters for one recompile cause kind of one function."""

    __slots__ = ("count", "seconds", "diffs", "memory")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.diffs = _TopK()
        #: of its recompiles whose program needed more memory (``memory_change``), the one
        #: whose program is largest: (its total bytes, the change, its count)
        self.memory: tuple[int, str, int | None] | None = None

    def grew(self, total: int, change: str, count: int | None) -> None:
        if self.memory is None or total > self.memory[0]:
            self.memory = (total, change, count)

    def merge(self, other: _Cause) -> None:
        self.count += other.count
        self.seconds += other.seconds
        self.diffs.merge(other.diffs)
        if other.memory is not None:
            self.grew(*other.memory)


#: Reasons kept apart in the persistent-cache section (more go to ``(other)``).
MAX_MISS_REASONS = 16


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
            reason = ReportName.UNEXPLAINED
        else:
            self.explained += 1
        if len(reason) > _MAX_NAME:
            reason = _text(reason, _MAX_NAME) or ReportName.UNEXPLAINED
        if reason not in self.reasons and len(self.reasons) >= MAX_MISS_REASONS:
            reason = ReportName.OTHER
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
        "lower_s", "backend_s", "times", "causes", "signatures", "largest", "callsites",
        "ops",
        "programs",
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
        #: (cause kind, paths) -> [recompiles, (example, callsite)]: what changed, without
        #: the values, so that two runs' recompiles compare (see :func:`diff_paths`)
        self.signatures = _Tally(MAX_SIGNATURES_PER_FUNCTION)
        #: the compile whose program needed the most device memory (``largest_program``)
        self.largest: dict[str, Any] | None = None
        #: the (eager ops) row's: callsite -> [compiles, [seconds]] (``callsites``)
        self.callsites = _Tally(MAX_EAGER_CALLSITES)
        #: the (eager ops) row's: op -> [compiles, [seconds]] (``ops``)
        self.ops = _Tally(MAX_EAGER_OPS)
        #: its largest program by operations and the programs kept (``_programs``)
        self.programs = ProgramTally()

    def called_at(self, callsite: str | None, seconds: float | None, op: str) -> None:
        """One eager op, ``op``, compiled at the user's line ``callsite``."""
        for tally, key in ((self.callsites, callsite or ReportName.UNKNOWN_FUNCTION),
                           (self.ops, op)):
            tally.add(key, [0.0])
            entry = tally.items.get(key)
            if entry is not None and seconds is not None:
                entry[1][0] += seconds

    def top_ops(self) -> tuple[list[dict[str, Any]], int]:
        """The ops that compiled most, at most TOP_OPS (``{op, compiles, seconds}``), and
        how many more ops compiled."""
        ranked = sorted((-n, -s, op) for op, (n, [s]) in self.ops.items.items())
        more = len(ranked) - TOP_OPS + (1 if self.ops.overflow else 0)
        return ([{"op": op, "compiles": -n, "seconds": _round(-s)}
                 for n, s, op in ranked[:TOP_OPS]], max(0, more))

    def top_callsites(self) -> list[dict[str, Any]]:
        """The lines whose eager ops cost the most compile seconds, at most TOP_CALLSITES."""
        ranked = sorted(((-s, -n, site) for site, (n, [s]) in self.callsites.items.items()))
        return [{"callsite": site, "count": -n, "seconds": _round(-s)}
                for s, n, site in ranked[:TOP_CALLSITES]]

    def program(self, ev: dict[str, Any]) -> int | None:
        """Keep ``ev``'s program when it needs more device memory than the largest so far
        (the first of equals is kept); its total bytes (``None``: the line gave none)."""
        sizes = program_sizes(ev)
        if not sizes:
            return None
        total = sum(sizes.values())
        if self.largest is not None and total <= self.largest["total_bytes"]:
            return total
        count = ev.get(Field.COUNT)
        limit = ev.get(Field.DEVICE_MEMORY_LIMIT_BYTES)
        self.largest = {
            "count": count if type(count) is int else None,
            "total_bytes": total,
            **{key: sizes.get(key) for key, _ in _PROGRAM_FIELDS},
            "device_memory_limit_bytes": limit if type(limit) is int and limit > 0 else None,
        }
        return total

    def cause(self, kind: str) -> _Cause:
        """The counters for ``kind``, merging overflow kinds into ``(other)``."""
        causes = self.causes
        c = causes.get(kind)
        if c is None:
            if len(causes) >= MAX_CAUSES_PER_FUNCTION:
                kind = ReportName.OTHER
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
        self.signatures.merge(other.signatures)
        if other.largest is not None and (
                self.largest is None
                or other.largest["total_bytes"] > self.largest["total_bytes"]):
            self.largest = dict(other.largest)
        self.programs.merge(other.programs)

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
                "memory_change": c.memory[1] if c.memory is not None else None,
                "memory_change_count": c.memory[2] if c.memory is not None else None,
            })
        causes.sort(key=lambda d: (-d["count"], -d["seconds"], d["cause"]))
        signatures = sorted(
            ({"cause": kind, "paths": list(paths), "count": count, "example": example,
              "callsite": callsite}
             for (kind, paths), (count, (example, callsite))
             in self.signatures.items.items()),
            key=lambda d: (-d["count"], d["cause"], d["paths"]))
        ops, ops_more = self.top_ops()
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
            "p50_s": _round(self.times.quantile(0.5)),
            "p95_s": _round(self.times.quantile(0.95)),
            "max_s": _round(self.times.max if self.times.n else None),
            "trace_s": _round(self.trace_s),
            "lower_s": _round(self.lower_s),
            "backend_compile_s": _round(self.backend_s),
            "causes": causes,
            "cause_paths": signatures,
            # a function's are set by :meth:`Report.rows` (said, came true, not yet)
            "hazards": None,
            "largest_program": dict(self.largest) if self.largest is not None else None,
            "callsites": self.top_callsites(),
            "ops": ops,
            "ops_more": ops_more,
            **self.programs.to_dict(),
        }


#: ``largest_program``'s sizes, and the log field each is read from.
_PROGRAM_FIELDS = (
    ("argument_bytes", Field.MEMORY_ARGUMENT_BYTES),
    ("output_bytes", Field.MEMORY_OUTPUT_BYTES),
    ("temp_bytes", Field.MEMORY_TEMP_BYTES),
    ("generated_code_bytes", Field.MEMORY_GENERATED_CODE_BYTES),
)


def program_sizes(ev: dict[str, Any]) -> dict[str, int]:
    """The sizes of XLA's memory analysis a compile line gives, by ``largest_program`` key."""
    return {key: value for key, field in _PROGRAM_FIELDS
            if type(value := ev.get(field)) is int and 0 <= value < (1 << 62)}



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


def diff_paths(diff: Any) -> tuple[str, ...]:
    """The paths a compile's ``diff`` changed (``batch['x']``, ``lr``), sorted, at most
    :data:`MAX_SIGNATURE_PATHS`: with the cause kind, what a recompile is *about*, without
    the values (shapes, timestamps) that make two runs' lines differ."""
    if not isinstance(diff, list):
        return ()
    if len(diff) == 1 and isinstance(diff[0], dict):  # the common case, without a set
        path = _text(diff[0].get(DiffKey.PATH), _MAX_PATH)
        return (path,) if path else ()
    paths = set()
    for entry in diff[:64]:
        if isinstance(entry, dict):
            path = _text(entry.get(DiffKey.PATH), _MAX_PATH)
            if path:
                paths.add(path)
    return tuple(sorted(paths)[:MAX_SIGNATURE_PATHS])




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
        #: the ``jax.step`` lines (steps are not filtered by ``functions``)
        self.steps = Steps()
        #: the ``jax.compile.hazard`` lines, each marked when a later compile made it true
        self.hazards = Hazards(functions)

    # -- input -------------------------------------------------------------

    def feed_lines(self, stream: IO[bytes]) -> None:
        """Consume a binary stream of log lines, one JSON object per line.

        Reads with ``readline(MAX_LINE_BYTES)`` so even a corrupt log with a
        gigantic line is processed in bounded memory.
        """
        self.skipped += read_lines(stream, self)

    def add(self, ev: dict[str, Any]) -> None:
        """Aggregate one parsed ``jax.compile`` event."""
        function = ev.get(Field.FUNCTION)
        if type(function) is not str or not function:
            function = _text(function, _MAX_NAME) or ReportName.UNKNOWN_FUNCTION
        elif len(function) > _MAX_NAME:
            function = _text(function, _MAX_NAME) or ReportName.UNKNOWN_FUNCTION
        eager = ev.get(Field.EAGER_OP) is True
        if self.functions is not None and function not in self.functions and not (
            eager and ReportName.EAGER_OPS in self.functions
        ):
            self.filtered += 1
            return
        self.events += 1
        if not eager:
            self.hazards.compiled(ev)

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
        # JAX's own primitives: where the user's code ran them is what can be changed,
        # not their causes (a primitive's params, compared across different ops).
        aggregate_of_ops = row.row_kind == RowKind.EAGER_OPS.value
        if aggregate_of_ops:
            row.called_at(_text(ev.get(Field.CALLSITE), _MAX_FILE), secs, function)
            # Each op compiles apart: one op's compile after another's is no recompile
            # of anything, and a primitive's own recompiles are not the program's.
            rec = False
        program_total = row.program(ev)
        row.programs.add(ev)
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
                kind = CauseKind.UNKNOWN.value
            elif len(cause_kind) > _MAX_NAME:
                kind = _text(cause_kind, _MAX_NAME) or CauseKind.UNKNOWN.value
            else:
                kind = cause_kind
        else:
            kind = CauseKind.FIRST_COMPILE.value
        if rec and not aggregate_of_ops:
            c = row.cause(kind)
            c.count += 1
            if secs is not None:
                c.seconds += secs
            key = (render_diff(ev.get(Field.DIFF), ev.get(Field.DIFF_TOTAL))
                   or _text(ev.get(Field.CAUSE), _MAX_DIFF))
            if key is not None:
                c.diffs.add(key, _text(ev.get(Field.HINT), _MAX_HINT))
            signature = (kind, diff_paths(ev.get(Field.DIFF)))
            seen = row.signatures.items.get(signature)
            if seen is not None:  # the common case: only a count (no strings kept again)
                seen[0] += 1
            else:
                row.signatures.add(signature, (key, _text(ev.get(Field.CALLSITE), _MAX_FILE)))
            change = _text(ev.get(Field.MEMORY_CHANGE), _MAX_DIFF)
            if change and program_total is not None:
                count = ev.get(Field.COUNT)
                c.grew(program_total, change, count if type(count) is int else None)
        self._compiled(ev, row, function, rec, kind, secs)

    def _compiled(self, ev: dict[str, Any], row: _Row, function: str, recompile: bool,
                  cause_kind: str, seconds: float | None) -> None:
        """Called once per aggregated compile event, with what :meth:`add` made of it (the
        row it went to, the checked function name, recompile or not, cause kind, seconds):
        a subclass that keeps more (the HTML report) reads the same facts."""

    def add_other(self, line: bytes) -> bool:
        """A line that is no compile or divergence event: ``True`` when it was used (a
        ``jax.step`` line here; a subclass may read more: the HTML report reads storm
        warnings); else it counts as skipped."""
        if HAZARD_MARKER in line:
            try:
                return self.hazards.said(json.loads(line))
            except (ValueError, RecursionError, TypeError, AttributeError):
                return False
        if _STEP_MARKER not in line:
            return False
        try:
            ev = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if type(ev) is not dict or ev.get(Field.EVENT) != EVENT_STEP:
            return False
        read = self.steps.add(ev)
        if read is None:
            return False
        self._stepped(ev, read)
        return True

    def _stepped(self, ev: dict[str, Any], read: dict[str, Any]) -> None:
        """Called once per step line used, with what :meth:`Steps.add` read of it (a
        subclass that keeps more, the HTML report, reads the same)."""

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
                self._eager = _Row(ReportName.EAGER_OPS, None, None, RowKind.EAGER_OPS.value)
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
                    self._other = _Row(ReportName.OTHER, None, None, RowKind.OTHER.value)
                return self._other
            row = self._rows[key] = _Row(function, file, line,
                                         (RowKind.EAGER_OP if eager else RowKind.FUNCTION).value)
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
        for row in out:  # said, came true, not (yet): ``None`` where none was said
            row["hazards"] = self.hazards.of((row["function"], row["file"], row["line"]))
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
    persistent_cache_hits, total_s, recompile_s, p50_s, p95_s, max_s, trace_s,
    lower_s, backend_compile_s, causes, cause_paths, hazards, largest_program``; each
    cause has ``cause, count, seconds, top_diff, top_diff_count, hint, memory_change,
    memory_change_count`` (of its recompiles whose program needed more memory, the largest
    one's ``memory_change`` and count; ``None`` without one); each of ``cause_paths``
    (the recompiles by cause kind and the paths their diff changed) ``cause, paths,
    count, example, callsite``; ``hazards`` (a function's ``jax.compile.hazard`` lines)
    is ``None``, or ``said, came_true, not_yet, more, list``, each listed hazard with
    ``kind, path, level, count, callsite, hazard, hint, came_true_at``;
    ``largest_program`` (``None`` when no line gave XLA's memory analysis) is the compile
    whose program needed the most device memory: ``count, total_bytes, argument_bytes,
    output_bytes, temp_bytes, generated_code_bytes, device_memory_limit_bytes`` (a size no
    line gave is ``None``); ``callsites``, ``ops`` and ``ops_more``: the ``(eager ops)``
    row's lines that ran them and its compiles by op (``[]``, 0 on other rows).  ``kwargs`` go to
    :class:`Report` except ``top``, which goes to :meth:`Report.rows`.
    """
    top = kwargs.pop("top", None)
    report = Report(**kwargs)
    report.feed_lines(stream)
    return report.rows(top), report
