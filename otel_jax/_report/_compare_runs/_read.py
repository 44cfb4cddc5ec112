"""What ``otel-jax diff`` reads of one run: an otel_jax log, or a report's JSON, as rows.

A log (plain or ``.gz``) is read by the report's own streaming aggregate
(:class:`._aggregate.Report`, fed by the hardened reader of :mod:`._read`), so that the
diff counts exactly what ``otel-jax report`` counts, in the same bounded memory.  The
output of ``otel-jax report --format json`` (a list of rows) is read whole, at most
:data:`MAX_REPORT_JSON_BYTES`, and every row is checked and normalised to the shape
:meth:`._aggregate.Report.rows` gives, whatever the file holds.  The two are told apart by
their first byte: a report's JSON is one array (``[``), a log is lines of objects.

What cannot be read as either is :class:`Unreadable`, with one line saying why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import IO, Any

from ..._core._terminal import printable
from ..._core._vocab import ReportName, RowKind
from .._aggregate import DEFAULT_MAX_FUNCTIONS, Report
from .._read import (
    _MAX_DIFF,
    _MAX_FILE,
    _MAX_HINT,
    _MAX_NAME,
    _MAX_PATH,
    Decompressed,
    _seconds,
    _text,
    open_log,
    read_errors,
)

#: Largest report JSON read (a report of the 10,000-row cap is a few MiB; parsing one of
#: this size whole costs a few hundred MiB at most); rows past the report's own cap of
#: ``DEFAULT_MAX_FUNCTIONS`` are folded into one ``(other)`` row, as the report does.
MAX_REPORT_JSON_BYTES = 32 << 20
#: Entries read of a row's lists (causes, cause paths, hazards) in a report's JSON.
_MAX_LIST = 64
_ROW_KINDS = frozenset(k.value for k in RowKind)


class Unreadable(Exception):
    """An input the diff cannot compare; its text is the one line that says why."""


@dataclass
class Run:
    """One side of a diff: the per-function rows, and what the steps add up to."""

    source: str
    rows: list[dict[str, Any]]
    #: :meth:`._aggregate.Steps.summary`, ``None`` without ``jax.step`` lines (or from a
    #: report's JSON, which holds rows only)
    steps: dict[str, Any] | None
    kind: str  # "log" or "report JSON"
    events: int = 0
    skipped: int = 0
    unread: str = ""  # what of a compressed log was left unread past its bounds


def load_run(path: str, label: str) -> Run:
    """Read ``path`` (a log, a ``.gz`` log or a report's JSON; ``-``: stdin); raises
    :class:`Unreadable`.
    ``label`` (BASE, NEW) names the input in messages."""
    try:
        stream = _stdin() if path == "-" else open_log(path)
    except OSError as exc:
        raise Unreadable(f"cannot open {label} {path}: {exc.strerror or exc}") from None
    try:
        with stream:
            head = _peek(stream)
            if head == b"[":
                return _report_json(path, label, stream)
            report = Report()
            report.feed_lines(stream)
            unread = (stream.said(printable(path)) if isinstance(stream, Decompressed)
                      and stream.stopped else "")
    except read_errors() as exc:
        raise Unreadable(f"cannot read {label} {path}: it is corrupt or truncated "
                         f"({type(exc).__name__}: {exc})") from None
    if not (report.events or report.steps.events or report.hazards.total()["said"]):
        what = "it is empty" if not report.skipped else (
            f"none of its {report.skipped} lines is an otel_jax event")
        raise Unreadable(f"{label} {path} is not an otel_jax log or report JSON: {what}")
    rows = report.rows()
    for row in rows:
        row["hazards"] = hazard_list(row.get("hazards"))
    return Run(path, rows, report.steps.summary(), "log", report.events, report.skipped,
               unread)


def _stdin() -> IO[bytes]:
    """Standard input, binary, left open when the ``with`` around its reading closes it."""
    import io
    import os
    import sys

    if sys.stdin is None:
        raise OSError(0, "no stdin to read")
    return io.BufferedReader(io.FileIO(os.dup(sys.stdin.fileno()), "rb"))


def _peek(stream: Any) -> bytes:
    """The first byte past leading whitespace, the stream left at that byte: the whitespace
    before it is read and dropped (neither a log nor JSON needs it), and the byte is
    looked at with ``peek``, so that a pipe (``<(zcat run.log.gz)``, stdin) reads as a
    file does (a buffered file, stdin and a gzip stream all peek)."""
    while True:
        head = stream.peek(4096)
        if not head:
            return b""
        text = head.lstrip()
        stream.read(len(head) - len(text))
        if text:
            return bytes(text[:1])


def _report_json(path: str, label: str, stream: IO[bytes]) -> Run:
    data = stream.read(MAX_REPORT_JSON_BYTES + 1)
    if len(data) > MAX_REPORT_JSON_BYTES:
        raise Unreadable(f"{label} {path} starts like a report's JSON but is larger than "
                         f"the {MAX_REPORT_JSON_BYTES} bytes one may have")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise Unreadable(f"{label} {path} is not valid report JSON ({reason})") from None
    if not isinstance(value, list):
        raise Unreadable(f"{label} {path} is not a report's JSON (a list of rows)")
    rows: list[dict[str, Any]] = []
    other: dict[str, Any] | None = None
    skipped = 0
    for v in value:
        r = _row(v)
        if r is None:
            skipped += 1
        elif len(rows) < DEFAULT_MAX_FUNCTIONS or r["row_kind"] == RowKind.EAGER_OPS.value:
            rows.append(r)
        else:  # past the report's own row cap: one (other) row, as the report makes it
            other = _fold(other, r)
    if other is not None:
        rows.append(other)
    if value and not rows:
        raise Unreadable(f"{label} {path} holds no report rows (none of its {len(value)} "
                         "entries has a function and its counts)")
    return Run(path, rows, None, "report JSON", sum(r["compiles"] for r in rows), skipped)


def _fold(other: dict[str, Any] | None, r: dict[str, Any]) -> dict[str, Any]:
    """``r`` counted in the ``(other)`` row of the rows past the cap."""
    if other is None:
        other = {"function": ReportName.OTHER, "file": None, "line": None,
                 "row_kind": RowKind.OTHER.value, "compiles": 0, "recompiles": 0,
                 "recompiles_after_warmup": 0, "total_s": 0.0, "recompile_s": None,
                 "p50_s": None, "p95_s": None, "max_s": None, "causes": [],
                 "cause_paths": None, "hazards": []}
    for key in ("compiles", "recompiles", "recompiles_after_warmup"):
        other[key] += r[key]
    other["total_s"] += r["total_s"]
    causes = {c["cause"]: c for c in other["causes"]}
    for c in r["causes"]:
        if c["cause"] in causes:
            causes[c["cause"]]["count"] += c["count"]
            causes[c["cause"]]["seconds"] += c["seconds"]
        elif len(causes) < _MAX_LIST:
            causes[c["cause"]] = dict(c)
    other["causes"] = list(causes.values())
    return other


def _int(v: Any) -> int | None:
    return v if type(v) is int and 0 <= v < (1 << 53) else None


def _num(v: Any) -> float | None:
    s = _seconds(v)
    return s if s is not None and math.isfinite(s) else None


def _str(v: Any, limit: int) -> str | None:
    return _text(v, limit) if isinstance(v, str) else None


def _row(v: Any) -> dict[str, Any] | None:
    """One row of a report's JSON in the shape :meth:`._aggregate.Report.rows` gives, or
    ``None`` when it is not one (no function name, counts missing or mistyped)."""
    if not isinstance(v, dict):
        return None
    function = _str(v.get("function"), _MAX_NAME)
    compiles, recompiles = _int(v.get("compiles")), _int(v.get("recompiles"))
    if not function or compiles is None or recompiles is None or recompiles > compiles:
        return None
    kind = v.get("row_kind")
    row: dict[str, Any] = {
        "function": function,
        "file": _str(v.get("file"), _MAX_FILE),
        "line": _int(v.get("line")),
        "row_kind": kind if kind in _ROW_KINDS else RowKind.FUNCTION.value,
        "compiles": compiles,
        "recompiles": recompiles,
        "recompiles_after_warmup": _int(v.get("recompiles_after_warmup")) or 0,
    }
    for key in ("total_s", "recompile_s", "p50_s", "p95_s", "max_s"):
        row[key] = _num(v.get(key))
    if row["total_s"] is None:
        row["total_s"] = 0.0
    causes = []
    for c in _list(v.get("causes")):
        cause, count = _str(c.get("cause"), _MAX_NAME), _int(c.get("count"))
        if cause and count is not None:
            causes.append({"cause": cause, "count": count,
                           "seconds": _num(c.get("seconds")) or 0.0})
    row["causes"] = causes
    # cause_paths and hazards came with a later report; without them the diff compares
    # cause kinds only (``None``), and finds no hazard
    if isinstance(v.get("cause_paths"), list):
        paths = []
        for c in _list(v.get("cause_paths")):
            cause, count = _str(c.get("cause"), _MAX_NAME), _int(c.get("count"))
            if cause and count is not None:
                paths.append({
                    "cause": cause, "count": count,
                    "paths": sorted({p for p in (_str(x, _MAX_PATH) for x in
                                                 _list(c.get("paths"), dicts=False)) if p}),
                    "example": _str(c.get("example"), _MAX_DIFF),
                    "callsite": _str(c.get("callsite"), _MAX_FILE)})
        row["cause_paths"] = paths
    else:
        row["cause_paths"] = None
    row["hazards"] = hazard_list(v.get("hazards"))
    # the largest program's operations came with a later report; without them, ``None``
    program = v.get("program")
    ops = _int(program.get("ops")) if isinstance(program, dict) else None
    row["program"] = {"ops": ops} if ops is not None else None
    return row


def hazard_list(v: Any) -> list[dict[str, Any]]:
    """A row's hazards as the diff compares them: one entry per (kind, path) with how
    often it was said, from the report's ``hazards`` (``None``, or its ``list``), whatever
    a report's JSON holds there."""
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for h in _list(v.get("list") if isinstance(v, dict) else None):
        kind = _str(h.get("kind"), _MAX_NAME)
        if not kind:
            continue
        path = _str(h.get("path"), _MAX_PATH) or ""
        seen = by_key.get((kind, path))
        if seen is not None:
            seen["count"] += 1
            continue
        level = h.get("level")
        by_key[(kind, path)] = {
            "kind": kind, "path": path, "count": 1,
            "level": level if level in ("warning", "info") else "warning",
            "hazard": _str(h.get("hazard"), _MAX_HINT),
            "hint": _str(h.get("hint"), _MAX_HINT)}
    return sorted(by_key.values(), key=lambda d: (d["level"] != "warning", d["kind"], d["path"]))


def _list(v: Any, dicts: bool = True) -> list[Any]:
    if not isinstance(v, list):
        return []
    return [x for x in v[:_MAX_LIST] if isinstance(x, dict) or not dicts]
