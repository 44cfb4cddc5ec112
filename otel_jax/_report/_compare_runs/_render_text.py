"""Rendering a diff (:class:`._compare.Comparison`) as text: a terminal table, GitHub Markdown,
strict JSON.  Every string that came from a log passes :func:`.._text.printable` (or the
Markdown escapes built on it), as in the report."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .._text import _JSON_RAW, _finite, _md, _md_code, printable
from ._compare import Comparison

_COLUMNS = ("FUNCTION", "LOCATION", "COMPILES", "RECOMPILES", "TOTAL_S", "CHANGE_S",
            "P50_S", "P95_S")


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _arrow(pair: dict[str, Any], fmt: Callable[[Any], str] = str) -> str:
    b, n = pair["base"], pair["new"]
    if b == n:
        return fmt(b)
    return f"{fmt(b)} -> {fmt(n)}"


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def location(row: dict[str, Any]) -> str:
    """``file:line`` of a diff row (the line in NEW; in BASE for a function gone), and
    BASE's file when the function was matched in another one (``(was train.py)``)."""
    line = row["line"]["new"] if row["line"]["new"] is not None else row["line"]["base"]
    if not row["file"]:
        return ""
    text = f"{row['file']}:{line}" if line is not None else str(row["file"])
    moved = row.get("moved_from")
    return f"{text} (was {moved})" if moved else text


def name(row: dict[str, Any]) -> str:
    """The function's name, marked ``(new)``/``(gone)`` when only one run has it."""
    mark = {"new": " (new)", "gone": " (gone)"}.get(row["status"], "")
    return f"{row['function']}{mark}"


def cause_text(c: dict[str, Any]) -> str:
    """One new cause: kind, paths, count, call site, an example diff."""
    text = str(c["cause"])
    if c["paths"]:
        text += " [" + ", ".join(c["paths"]) + "]"
    text += f" x{c['count']}"
    if c["callsite"]:
        text += f" at {c['callsite']}"
    if c["example"]:
        text += f": {c['example']}"
    return text


def hazard_text(h: dict[str, Any]) -> str:
    """One new hazard: kind, path, level, what it says."""
    text = str(h["kind"]) + (f" {h['path']}" if h["path"] else "")
    text += f" ({'note' if h['level'] != 'warning' else 'warning'})"
    if h["hazard"]:
        text += f": {h['hazard']}"
    return text


def by_cause_text(row: dict[str, Any]) -> str:
    """Recompiles by cause kind where they differ, ``""`` where none does."""
    return ", ".join(f"{c['cause']} {c['base']} -> {c['new']}"
                     for c in row["recompiles_by_cause"] if c["base"] != c["new"])


def headline(diff: Comparison) -> list[str]:
    """The summary lines every format starts with (plain text)."""
    s = diff.summary
    f = s["functions"]
    ratio = s["matched_compile_s_ratio"]
    lines = [
        f"compiles {_arrow(s['compiles'])}, recompiles {_arrow(s['recompiles'])} "
        f"({s['recompiles_gained']} gained), compile seconds "
        f"{_arrow(s['compile_s'], _s)}",
        f"functions in both runs: {f['both']} (their compile seconds "
        f"{_signed(s['matched_compile_s_change'])}"
        + (f", {100 * ratio:+.0f}%" if ratio is not None else "") + f"); new: {f['new_only']}, "
        f"gone: {f['gone']}" + (f", matched in another file: {f['moved']}"
                                 if f.get("moved") else "")
        + f"; new causes: {s['new_causes']}; new hazards: {s['new_hazards']}"
        + (f" (and {s['new_notes']} notes)" if s["new_notes"] else ""),
    ]
    steps = _steps_line(diff)
    if steps:
        lines.append(steps)
    if not diff.changed:
        lines.append("no change in compiles, recompiles, causes, hazards or functions")
    return lines


def _steps_line(diff: Comparison) -> str:
    """``steps: compiling 12% -> 30% of step time``; where one run has no share, that run's
    share is not made a ``-`` in an arrow: the line says the other's and why this one has
    none (a report's JSON holds no steps; a log may have no ``jax.step`` lines)."""
    steps = diff.summary["steps"]
    shares = {side: f"{100 * x['share']:.0f}%" for side in ("base", "new")
              if (x := steps[side]) is not None and x["share"] is not None}
    if len(shares) == 2:
        return f"steps: compiling {_arrow(shares)} of step time"
    if not shares:
        return ""
    [(side, share)] = shares.items()
    other = "new" if side == "base" else "base"
    run = diff.new if other == "new" else diff.base
    why = ("a report's JSON holds no steps" if run.kind == "report JSON"
           else "no jax.step lines" if steps[other] is None else "no step time")
    return (f"steps: compiling {share} of step time in {side.upper()} "
            f"({other.upper()}: {why})")


def verdict(diff: Comparison) -> list[str]:
    """What the exit status says, and why."""
    if diff.regressions:
        return ["regressed (exit 1):"] + [f"- {r}" for r in diff.regressions]
    return ["no regression past the thresholds (exit 0)"]


def render_diff_table(diff: Comparison, top: int | None = None) -> str:
    """Aligned plain text: the headline, a row per function (compile seconds gained first)
    with what changed under it, then the verdict."""
    out = [printable(f"BASE {diff.base.source} ({diff.base.kind})"),
           printable(f"NEW  {diff.new.source} ({diff.new.kind})"), ""]
    out += headline(diff)
    rows = diff.rows[:top] if top is not None else diff.rows
    if rows:
        table = [list(_COLUMNS)] + [
            [printable(name(r)), printable(location(r)), _arrow(r["compiles"]),
             _arrow(r["recompiles"]), _arrow(r["total_s"], _s), _signed(r["total_s_change"]),
             _arrow(r["p50_s"], _s), _arrow(r["p95_s"], _s)] for r in rows]
        widths = [max(len(c[i]) for c in table) for i in range(len(_COLUMNS))]
        out.append("")
        for r, cells in zip([None, *rows], table):
            left = [c.ljust(w) for c, w in zip(cells[:2], widths[:2])]
            right = [c.rjust(w) for c, w in zip(cells[2:], widths[2:])]
            out.append("  ".join(left + right).rstrip())
            if r is None:
                continue
            changed = by_cause_text(r)
            if changed:
                out.append(printable(f"  recompiles by cause: {changed}"))
            for c in r["new_causes"]:
                out.append(printable(f"  + new cause {cause_text(c)}"))
            if r.get("program_ops_growth"):
                out.append(f"  program {_arrow(r['program_ops'], '{:,}'.format)} ops")
            for h in r["new_hazards"]:
                out.append(printable(f"  + new hazard {hazard_text(h)}"))
                if h["hint"]:
                    out.append(printable(f"      hint: {h['hint']}"))
        if len(diff.rows) > len(rows):
            out.append(f"({len(diff.rows) - len(rows)} more functions not shown)")
    out.append("")
    out += [printable(v) for v in verdict(diff)]
    return "\n".join(out) + "\n"


def render_diff_markdown(diff: Comparison, top: int | None = None) -> str:
    """GitHub Markdown: the headline, one table row per function, the verdict."""
    out = [f"**BASE** {_md_code(diff.base.source)} ({diff.base.kind}) · **NEW** "
           f"{_md_code(diff.new.source)} ({diff.new.kind})", ""]
    out += [f"- {_md(line)}" for line in headline(diff)]
    rows = diff.rows[:top] if top is not None else diff.rows
    if rows:
        out += ["", "| Function | Location | Compiles | Recompiles | Total s | Change s | "
                "p50 s | p95 s | What changed |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in rows:
            what = []
            changed = by_cause_text(r)
            if changed:
                what.append("recompiles: " + _md(changed))
            what += ["**new cause** " + _md_code(cause_text(c)) for c in r["new_causes"]]
            what += ["**new hazard** " + _md(hazard_text(h)) for h in r["new_hazards"]]
            cells = [_md(name(r)), _md(location(r)), _md(_arrow(r["compiles"])),
                     _md(_arrow(r["recompiles"])), _md(_arrow(r["total_s"], _s)),
                     _signed(r["total_s_change"]), _md(_arrow(r["p50_s"], _s)),
                     _md(_arrow(r["p95_s"], _s)), "<br>".join(what)]
            out.append("| " + " | ".join(cells) + " |")
        if len(diff.rows) > len(rows):
            out.append(f"\n{len(diff.rows) - len(rows)} more functions not shown.")
    out += ["", *(_md(v) if not v.startswith("- ") else "- " + _md(v[2:])
                  for v in verdict(diff))]
    return "\n".join(out) + "\n"


def render_diff_json(diff: Comparison) -> str:
    """Strict JSON (no ``NaN``/``Infinity``); control characters as ``\\u`` escapes."""
    text = json.dumps(_finite(diff.to_dict()), indent=2, ensure_ascii=False,
                      allow_nan=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
