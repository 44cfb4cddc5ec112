"""Rendering the aggregate as text: a terminal table, GitHub Markdown, strict JSON.

Every string that came from a log passes :func:`printable` (or the Markdown escapes built
on it) before it is shown, so names read from a log can neither drive a terminal nor add
table rows.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

from .._core._terminal import printable as printable  # the report modules name it here
from .._core._units import human_bytes
from .._core._vocab import RowKind
from ._aggregate import Report
from ._programs import programs_lines

_COLUMNS = ("FUNCTION", "LOCATION", "COMPILES", "RECOMPILES", "TOTAL_S",
            "P95_S", "RECOMPILE_S")


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


#: ``largest_program``'s sizes, with the word each is shown with.
_PROGRAM_SIZES = (("temp_bytes", "temp"), ("argument_bytes", "arguments"),
                  ("output_bytes", "outputs"), ("generated_code_bytes", "code"))


def program_text(largest: dict[str, Any] | None) -> str:
    """A row's ``largest_program`` in one line: ``#2: 16.0 MiB (temp 16.0 MiB, arguments
    8.0 KiB, outputs 8.0 KiB, code 0 B; device 15.7 GiB)``; ``""`` without one."""
    if not largest:
        return ""
    parts = [f"{word} {human_bytes(largest[key])}" for key, word in _PROGRAM_SIZES
             if largest.get(key) is not None]
    limit = largest.get("device_memory_limit_bytes")
    count = largest.get("count")
    return (("" if count is None else f"#{count}: ") + human_bytes(largest["total_bytes"])
            + f" ({', '.join(parts)}" + ("" if limit is None else
                                         f"; device {human_bytes(limit)}") + ")")


def _memory_change(cause: dict[str, Any]) -> str:
    """A cause's ``memory_change``, with the compile it is of: ``temp 1.0 MiB -> 16.0 MiB
    (#2)``."""
    count = cause.get("memory_change_count")
    return str(cause["memory_change"]) + ("" if count is None else f" (#{count})")


def _clip(s: str, width: int | None) -> str:
    if width is None or len(s) <= width:
        return s
    return s[: max(0, width - 3)] + "..."


def _eager_ops_row(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                              dict[str, Any] | None]:
    """``rows`` without the ``(eager ops)`` row, and that row (None without one)."""
    eager = next((r for r in rows if r.get("row_kind") == RowKind.EAGER_OPS.value), None)
    return [r for r in rows if r is not eager], eager


def render_table(rows: Sequence[dict[str, Any]], width: int | None = None) -> str:
    """Aligned plain-text table; each recompile cause is listed under its
    function with its most frequent diff and hint.  ``width`` (terminal
    columns) shortens long function names and clips the cause/hint lines;
    ``None`` keeps everything whole (pipes, files). JAX's eager ops are no row of it:
    their summary (:func:`eager_ops_lines`) follows it."""
    if not rows:
        return "no jax.compile events\n"
    rows, eager = _eager_ops_row(rows)
    eager_text = "".join(_clip(printable(text), width) + "\n"
                         for text in eager_ops_lines(eager))
    if not rows:
        return "no compiles of the program's functions\n" + eager_text
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
        program = program_text(row.get("largest_program"))
        if program:
            out.append(_clip(f"  largest program {program}", width))
        out.extend(_clip(line, width) for line in programs_lines(row))
        for c in row["causes"]:
            detail = f"  - {c['cause']} x{c['count']} ({_fmt_s(c['seconds'])} s)"
            if c["top_diff"]:
                detail += f": {c['top_diff']}"
                if c["top_diff_count"] != c["count"]:
                    detail += f" (x{c['top_diff_count']})"
            out.append(_clip(detail, width))
            if c.get("memory_change"):
                out.append(_clip(f"      memory: {_memory_change(c)}", width))
            if c["hint"]:
                out.append(_clip(f"      hint: {c['hint']}", width))
        for text in callsite_lines(row.get("callsites")):
            out.append(_clip(printable(text), width))
        for text, hint in hazard_lines(row.get("hazards")):
            out.append(_clip(printable(text), width))
            if hint:
                out.append(_clip(printable(f"      fix: {hint}"), width))
    return "\n".join(out) + "\n" + ("\n" + eager_text if eager_text else "")


def relative_site(callsite: str) -> str:
    """``file:line`` with the file relative to the current folder (the program's, at its
    exit) where it lies under it; any other path as it is."""
    path, sep, line = callsite.rpartition(":")
    if not sep or not line.isdigit():
        path, line = callsite, ""
    if not os.path.isabs(path):
        return callsite
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return callsite
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return callsite
    return f"{rel}:{line}" if line else rel


def callsite_lines(callsites: Any) -> list[str]:
    """The (eager ops) row's lines: where the program ran the ops that compiled, most
    seconds first (``  - at train.py:41: 12 compiles (0.812 s)``), each file relative to
    the current folder."""
    return [f"  - at {relative_site(c['callsite'])}: {c['count']} "
            f"compile{'' if c['count'] == 1 else 's'} ({_fmt_s(c['seconds'])} s)"
            for c in callsites or ()]


def eager_ops_lines(row: dict[str, Any] | None) -> list[str]:
    """The one summary of JAX's eager ops, which ``otel-jax report`` and ``otel-jax run``'s
    summary at exit both give: their compiles and seconds, the compiles of each op (JAX
    compiles each primitive apart: none of them is a recompile of the program), and the
    program's lines that ran them. Raw text from the log: the caller escapes it."""
    if not row or not row.get("compiles"):
        return []
    compiles = row["compiles"]
    out = [f"JAX's eager ops (one primitive at a time, outside jit): {compiles} "
           f"compile{'' if compiles == 1 else 's'}, {_fmt_s(row['total_s'])} s"]
    ops = [f"{o['op']} x{o['compiles']}" for o in row.get("ops") or ()]
    if ops:
        more = row.get("ops_more") or 0
        out.append("  by op: " + ", ".join(ops) + (f", and {more} more" if more else ""))
    return out + callsite_lines(row.get("callsites"))


def hazard_lines(hazards: dict[str, Any] | None) -> list[tuple[str, str | None]]:
    """A row's hazards as ``(line, fix)`` pairs, the summary first: what was said, at
    which compile and line, and whether a later compile made it true (``not (yet)``: none
    did in this log). Raw text from the log: the caller escapes it for its format."""
    if not hazards:
        return []
    out: list[tuple[str, str | None]] = [(
        f"  hazards: {hazards['said']} said, {hazards['came_true']} came true, "
        f"{hazards['not_yet']} not (yet)", None)]
    for h in hazards["list"]:
        level = "warning" if h["level"] == "warning" else "note"
        said = f"said at #{h['count']}" if h["count"] is not None else "said"
        where = f" ({os.path.basename(h['callsite'])})" if h["callsite"] else ""
        fate = (f"came true at #{h['came_true_at']}" if h["came_true_at"] is not None
                else "not (yet)")
        path = f" {h['path']}" if h["path"] else ""
        out.append((f"  ! {h['kind']} ({level}){path}, {said}{where}: {fate}", h["hint"]))
    if hazards["more"]:
        out.append((f"  ! ... and {hazards['more']} more", None))
    return out


_MD_SPECIAL = re.compile(r"[\\|*`\[\]]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_HTML = {"&": "&amp;", "<": "&lt;"}


def _md(s: str) -> str:
    """Escape text for a GitHub table cell: no HTML (``main.<locals>.<lambda>`` is text,
    not tags), no emphasis or links, no cell breaks, no control characters. ``>`` is left
    as it is: with every ``<`` escaped it opens nothing, and ``f32 -> bf16`` reads as
    itself in the Markdown as well as on the page."""
    s = printable(s.replace("\n", " "))
    s = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), s)
    return re.sub("[&<]", lambda m: _HTML[m.group()], s)


def _md_code(s: str) -> str:
    """A code span (HTML and emphasis are not read inside one); only pipes are escaped."""
    if "`" in s:
        return _md(s)
    return "`" + printable(s.replace("\n", " ")).replace("|", "\\|") + "`"


def render_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table, one row per function; recompile
    causes (with most frequent diff and hint) share the last cell."""
    header = ["Function", "Location", "Compiles", "Recompiles", "Total s",
              "p95 s", "Recompile s", "Largest program", "Recompile causes"]
    out = ["| " + " | ".join(header) + " |",
           "| " + " | ".join(["---", "---"] + ["---:"] * 5 + ["---", "---"]) + " |"]
    rows, eager = _eager_ops_row(rows)
    for row in rows:
        causes = []
        for c in row["causes"]:
            text = f"**{_md(c['cause'])}** ×{c['count']} ({_fmt_s(c['seconds'])} s)"
            if c["top_diff"]:
                text += f": {_md_code(c['top_diff'])}"
            if c.get("memory_change"):
                text += f"; memory: {_md(_memory_change(c))}"
            if c["hint"]:
                text += f" — {_md(c['hint'])}"
            causes.append(text)
        for line, hint in hazard_lines(row.get("hazards")):
            causes.append(_md(line.strip()) + (f" — fix: {_md(hint)}" if hint else ""))
        cells = ([_md(x) for x in _cells(row)]
                 + [_md(program_text(row.get("largest_program"))), "<br>".join(causes)])
        out.append("| " + " | ".join(cells) + " |")
    summary = eager_ops_lines(eager)
    if summary:
        out += ["", f"**{_md(summary[0])}**", ""] + [
            "- " + _md(line.strip().removeprefix("- ")) for line in summary[1:]]
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


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def render_steps(summary: dict[str, Any] | None, fmt: str) -> str:
    """The steps section after the table (``table`` or ``markdown``), from the
    ``jax.step`` lines (:meth:`._aggregate.Steps.summary`): per step name the steps, how
    many compiled, p50/p95 of those that did not, and the extra time of those that did;
    then the longest steps that compiled, and compile seconds over step seconds. ``""``
    without step lines."""
    if not summary:
        return ""
    md = fmt == "markdown"
    head = ["STEP", "STEPS", "COMPILED", "P50_S", "P95_S", "STEP_S", "COMPILE_S", "EXTRA_S"]
    cells = [[printable(r["step"]) + (" (nested)" if r["nested"] else ""), str(r["steps"]),
              str(r["compiled_steps"]), _fmt_s(r["p50_s"]), _fmt_s(r["p95_s"]),
              _fmt_s(r["steps_s"]), _fmt_s(r["compile_s"]), _fmt_s(r["extra_s"])]
             for r in summary["steps"]]
    share = (f"compiling: {_pct(summary['share'])} of step time "
             f"({_fmt_s(summary['compile_s'])} of {_fmt_s(summary['steps_s'])} s, steps "
             "not nested in another)")
    out: list[str] = [""]
    if md:
        out += ["**Steps**: " + _md(share), "",
                "| Step | Steps | Compiled | p50 s | p95 s | Step s | Compile s | Extra s |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += ["| " + " | ".join([_md(c[0])] + c[1:]) + " |" for c in cells]
    else:
        widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
        out.append("  ".join([head[0].ljust(widths[0])]
                             + [h.rjust(w) for h, w in zip(head[1:], widths[1:])]))
        out += ["  ".join([c[0].ljust(widths[0])]
                          + [x.rjust(w) for x, w in zip(c[1:], widths[1:])]) for c in cells]
        out.append(share)
    if summary["compiled"]:
        out.append("")
        out.append(("**Steps that compiled**" if md else "steps that compiled")
                   + " (longest first; extra: over the step's p50):")
        for c in summary["compiled"]:
            number = f" #{c['number']}" if c["number"] is not None else ""
            extra = f", extra {_fmt_s(c['extra_s'])} s" if c["extra_s"] is not None else ""
            line = (f"{printable(c['step'])}{number}: {_fmt_s(c['seconds'])} s, compiling "
                    f"{_fmt_s(c['compile_s'])} s{extra}"
                    + (f" (at {printable(c['timestamp'])})" if c["timestamp"] else ""))
            out.append(("- " + _md(line)) if md else "  " + line)
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
