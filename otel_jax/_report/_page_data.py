"""What the HTML page keeps beside the per-function rows: the aggregate it is drawn from.

:class:`HtmlReport` is the text report's own streaming aggregator
(:class:`._aggregate.Report`, fed by the same hardened reader) that also keeps what a page
shows and a table cannot:

* the compiles for the timeline (when each started and how long it took), the longest
  :data:`MAX_TIMELINE` of them;
* the full detail (cause, diff, hint, call site, phases, fingerprints, persistent-cache
  state) of the longest :data:`MAX_DETAILS` compiles; the rest are counted;
* call sites (user file and line) with counts and seconds, per rank counts per function,
  and the recompile-storm warnings.

Everything kept is bounded whatever the length of the log; :mod:`._html` renders it.
"""

from __future__ import annotations

import heapq
import json
import random
from datetime import datetime, timezone
from typing import Any

from .._core._vocab import EVENT_STORM, DiffKey, Field
from ._aggregate import Report, _Row
from ._read import (
    _MAX_DIFF,
    _MAX_FILE,
    _MAX_HINT,
    _MAX_NAME,
    _is_rank,
    _seconds,
    _text,
    event_marker,
)

__all__ = ["HtmlReport"]

#: Compiles drawn on the timeline (the longest; the others are counted under it).
MAX_TIMELINE = 3000
#: Compiles whose full detail is on the page (the longest; the others are counted).
MAX_DETAILS = 200
#: Changes of one compile's diff shown in its before/after table (``diff_total`` counts all).
MAX_DIFF_ROWS = 16
#: Characters kept of a path, a before or an after value.
MAX_VALUE = 120
#: Distinct (call site, function) pairs counted; the rest go to one "(other call sites)".
MAX_CALLSITES = 5000
#: Distinct (function, rank) pairs counted for the side-by-side rank table.
MAX_RANK_CELLS = 50_000
MAX_STORMS = 1000

#: Steps drawn on the steps chart: every step that compiled up to this many (the longest),
#: and a sample of this many of the others (reservoir: evenly over the run).
MAX_STEP_POINTS = 3000

_STORM_MARKER = event_marker(EVENT_STORM)
_OTHER_CALLSITES = "(other call sites)"
_UTC = timezone.utc


def _epoch(ts: Any, cache: dict[str, float]) -> float | None:
    """Seconds since the epoch of an ISO-8601 UTC timestamp as structlog writes it
    (``2026-12-01T19:50:30.310517Z``); ``None`` when it is not one.  The whole-second part
    is parsed once per distinct second (``cache`` keeps the last one)."""
    if type(ts) is not str or len(ts) < 19 or len(ts) > 40:
        return None
    head, tail = ts[:19], ts[19:]
    if tail.endswith("Z"):
        tail = tail[:-1]
    base = cache.get(head)
    if base is None:
        try:
            base = datetime.fromisoformat(head).replace(tzinfo=_UTC).timestamp()
        except ValueError:
            return None
        cache.clear()
        cache[head] = base
    if not tail:
        return base
    if tail[0] == "." and tail[1:].isdigit():
        return base + float(tail)
    try:  # an explicit offset
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=_UTC)).timestamp()


def _value(v: Any, limit: int = MAX_VALUE) -> str | None:
    if v is None:
        return None
    return _text(v if isinstance(v, str) else json.dumps(v, default=str), limit)


def _bool(v: Any) -> bool | None:
    return v if type(v) is bool else None


def _int(v: Any) -> int | None:
    return v if type(v) is int and -(1 << 62) < v < (1 << 62) else None


class HtmlReport(Report):
    """:class:`Report` that also keeps what the HTML page shows (see the module's text)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seq = 0
        self._first_stamp: tuple[str, float] | None = None
        self._last_stamp: str | None = None
        self._ts_cache: dict[str, float] = {}
        #: (seconds, -seq, start, row, cause kind, after warm-up, rank)
        self.timeline: list[tuple[float, int, float, _Row, str, bool, int | None]] = []
        self.timed = 0  # compiles with a timestamp and a duration
        self.details: list[tuple[float, int, dict[str, Any]]] = []
        self.kept_per_row: dict[int, int] = {}
        self.callsites: dict[tuple[str, str], list[float]] = {}
        self.rank_cells: dict[tuple[str, int], list[int]] = {}
        self.storms: list[dict[str, Any]] = []
        self.storm_events = 0
        self.after_warmup = 0
        self.recompiles = 0
        self.total_s = 0.0
        self.recompile_s = 0.0
        #: steps for the chart: (start, seconds, name, compile_s); compiled: the longest,
        #: behind their seconds (a heap)
        self.compiled_steps: list[tuple[float, float, float, str, float]] = []
        self.sampled_steps: list[tuple[float, float, str, float]] = []
        self._sampled_seen = 0
        self._rng = random.Random(0)  # the same log draws the same page

    @property
    def first_start(self) -> float | None:
        """When the first compile of the log started (seconds since the epoch)."""
        if self._first_stamp is None:
            return None
        end = _epoch(self._first_stamp[0], {})
        return None if end is None else end - self._first_stamp[1]

    @property
    def last_end(self) -> float | None:
        """When the last compile of the log ended."""
        return None if self._last_stamp is None else _epoch(self._last_stamp, {})

    # -- input ---------------------------------------------------------------

    def _stepped(self, ev: dict[str, Any], read: dict[str, Any]) -> None:
        end = _epoch(ev.get(Field.TIMESTAMP), self._ts_cache)
        if end is None:
            return
        seconds = read["seconds"]
        item = (end - seconds, seconds, read["name"], read["compile_s"])
        if read["compiled"]:
            if len(self.compiled_steps) < MAX_STEP_POINTS:
                heapq.heappush(self.compiled_steps, (seconds, *item))
            elif seconds > self.compiled_steps[0][0]:
                heapq.heapreplace(self.compiled_steps, (seconds, *item))
            return
        self._sampled_seen += 1
        if len(self.sampled_steps) < MAX_STEP_POINTS:
            self.sampled_steps.append(item)
        else:
            j = self._rng.randrange(self._sampled_seen)
            if j < MAX_STEP_POINTS:
                self.sampled_steps[j] = item

    def step_points(self) -> tuple[list[tuple[float, float, str, float]],
                                   list[tuple[float, float, str, float]]]:
        """The steps to draw: (those that compiled, a sample of the others), each
        ``(start, seconds, name, compile seconds)``, in time order."""
        compiled = sorted((c[1], c[2], c[3], c[4]) for c in self.compiled_steps)
        return compiled, sorted(self.sampled_steps)

    def _compiled(self, ev: dict[str, Any], row: _Row, function: str, recompile: bool,
                  cause_kind: str, seconds: float | None) -> None:
        self.seq += 1
        seq = self.seq
        secs = seconds if seconds is not None else 0.0
        after = ev.get(Field.AFTER_WARMUP) is True
        if recompile:
            self.recompiles += 1
            self.recompile_s += secs
            if after:
                self.after_warmup += 1
        self.total_s += secs
        rank = ev.get(Field.PROCESS_INDEX)
        if type(rank) is not int or rank < 0:
            rank = None
        # ISO timestamps of one format order as text: only the first and last seen are
        # parsed, and those of the compiles that make it onto the timeline or into detail.
        stamp = ev.get(Field.TIMESTAMP)
        start = None
        if type(stamp) is str:
            if self._first_stamp is None or stamp < self._first_stamp[0]:
                self._first_stamp = (stamp, secs)
            if self._last_stamp is None or stamp > self._last_stamp:
                self._last_stamp = stamp
            timeline = self.timeline
            self.timed += 1
            # a later compile of equal length never displaces a kept one (seq only grows)
            if len(timeline) < MAX_TIMELINE or secs > timeline[0][0]:
                end = _epoch(stamp, self._ts_cache)
                if end is not None:
                    start = end - secs
                    item = (secs, -seq, start, row, cause_kind, after, rank)
                    if len(timeline) < MAX_TIMELINE:
                        heapq.heappush(timeline, item)
                    else:
                        heapq.heapreplace(timeline, item)

        if rank is not None:
            key = (row.function, rank)
            cell = self.rank_cells.get(key)
            if cell is None and len(self.rank_cells) < MAX_RANK_CELLS:
                cell = self.rank_cells[key] = [0, 0]
            if cell is not None:
                cell[0] += 1
                cell[1] += recompile

        site = ev.get(Field.CALLSITE)
        if type(site) is not str or not site:
            site = "(no call site)"
        elif len(site) > _MAX_FILE:
            site = site[:_MAX_FILE - 3] + "..."
        ckey = (site, function)
        counted = self.callsites.get(ckey)
        if counted is None:
            if len(self.callsites) >= MAX_CALLSITES:
                ckey = (_OTHER_CALLSITES, "")
                counted = self.callsites.get(ckey)
            if counted is None:
                counted = self.callsites[ckey] = [0, 0.0, 0]
        counted[0] += 1
        counted[1] += secs
        counted[2] += recompile

        details = self.details
        if len(details) >= MAX_DETAILS and secs <= details[0][0]:
            return
        if start is None and type(stamp) is str:
            end = _epoch(stamp, self._ts_cache)
            start = end - secs if end is not None else None
        detail = self._detail(ev, row, function, recompile, cause_kind, seconds, start,
                              rank, after, seq)
        if len(details) < MAX_DETAILS:
            heapq.heappush(details, (secs, -seq, detail))
        else:
            heapq.heapreplace(details, (secs, -seq, detail))

    @staticmethod
    def _detail(ev: dict[str, Any], row: _Row, function: str, recompile: bool,
                cause_kind: str, seconds: float | None, start: float | None,
                rank: int | None, after: bool, seq: int) -> dict[str, Any]:
        diff_in = ev.get(Field.DIFF)
        diff: list[tuple[str | None, ...]] = []
        if isinstance(diff_in, list):
            for entry in diff_in[:MAX_DIFF_ROWS]:
                if isinstance(entry, dict):
                    diff.append(tuple(_value(entry.get(k)) for k in (
                        DiffKey.PATH, DiffKey.KIND, DiffKey.BEFORE, DiffKey.AFTER)))
                else:
                    diff.append((None, None, None, _value(entry)))
        total = _int(ev.get(Field.DIFF_TOTAL))
        n_diff = len(diff_in) if isinstance(diff_in, list) else 0
        return {
            "seq": seq, "row": row, "function": function, "recompile": recompile,
            "cause_kind": cause_kind, "seconds": seconds, "start": start, "rank": rank,
            "after_warmup": after, "eager": ev.get(Field.EAGER_OP) is True,
            "count": _int(ev.get(Field.COUNT)),
            "cause": _text(ev.get(Field.CAUSE), _MAX_HINT),
            "hint": _text(ev.get(Field.HINT), _MAX_HINT),
            "callsite": _text(ev.get(Field.CALLSITE), _MAX_FILE),
            "file": _text(ev.get(Field.FILE), _MAX_FILE),
            "line": _int(ev.get(Field.LINE)),
            "diff": diff,
            "diff_total": max(total or 0, n_diff),
            "compared_with": _int(ev.get(Field.COMPARED_WITH)),
            "trace_s": _seconds(ev.get(Field.TRACE_S)),
            "lower_s": _seconds(ev.get(Field.LOWER_S)),
            "backend_s": _seconds(ev.get(Field.BACKEND_COMPILE_S)),
            "fingerprint": _text(ev.get(Field.FINGERPRINT), 80),
            "program_fingerprint": _text(ev.get(Field.PROGRAM_FINGERPRINT), 80),
            "cache_hit": _bool(ev.get(Field.PERSISTENT_CACHE_HIT)),
            "miss_reason": _text(ev.get(Field.PERSISTENT_CACHE_MISS_REASON), 80),
            "miss_detail": _text(ev.get(Field.PERSISTENT_CACHE_MISS_DETAIL), _MAX_DIFF),
            "device": " ".join(filter(None, (
                _text(ev.get(Field.DEVICE_PLATFORM), 40), _text(ev.get(Field.DEVICE_KIND), 80),
                (f"x{ev.get(Field.DEVICE_COUNT)}" if _int(ev.get(Field.DEVICE_COUNT)) else None),
            ))) or None,
            "timestamp": _text(ev.get(Field.TIMESTAMP), 40),
            "trace_id": _text(ev.get(Field.TRACE_ID), 64),
            "span_id": _text(ev.get(Field.SPAN_ID), 32),
        }

    def add_other(self, line: bytes) -> bool:
        if _STORM_MARKER not in line:
            return super().add_other(line)
        try:
            ev = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if type(ev) is not dict or ev.get(Field.EVENT) != EVENT_STORM:
            return False
        function = _text(ev.get(Field.FUNCTION), _MAX_NAME)
        if not function:
            return False
        if self.functions is not None and function not in self.functions:
            self.filtered += 1
            return True
        self.storm_events += 1
        if len(self.storms) < MAX_STORMS:
            self.storms.append({
                "function": function,
                "file": _text(ev.get(Field.FILE), _MAX_FILE),
                "line": _int(ev.get(Field.LINE)),
                "time": _epoch(ev.get(Field.TIMESTAMP), self._ts_cache),
                "recompiles": _int(ev.get(Field.RECOMPILES)),
                "threshold": _int(ev.get(Field.THRESHOLD)),
                "last_cause": _text(ev.get(Field.LAST_CAUSE), _MAX_DIFF),
                "rank": (ev.get(Field.PROCESS_INDEX)
                         if _is_rank(ev.get(Field.PROCESS_INDEX)) else None),
            })
        return True
