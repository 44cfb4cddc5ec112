"""``otel-jax report --format html``: one self-contained page about a run's compiles.

The page is drawn from :class:`._page_data.HtmlReport` (the rows, the timeline, the kept
compiles' detail, call sites, ranks, storms).  Every string from the log is escaped
(:func:`_e`) before it reaches the page, which also carries a Content Security Policy that
lets no script run but its own one (by hash) and loads nothing from anywhere.  Charts are
drawn by matplotlib (the extra ``otel_jax[report]``) as SVG images inlined as ``data:``
URIs, so nothing a chart contains can run either; without matplotlib the page says so and
keeps every table.  matplotlib is imported only when a page is rendered.

This module writes the sections from the data; the stylesheet, the script with its policy
and the cause colours are in :mod:`._html_style`, the matplotlib charts in
:mod:`._html_charts`.
"""

from __future__ import annotations

import html
import math
from typing import Any

from .._core._units import human_bytes
from .._core._vocab import RowKind
from ._aggregate import _Row
from ._html_charts import _steps_chart, _timeline_chart
from ._html_style import _CSS, _FIRST, _JS, _colour, _csp, _location
from ._page_data import HtmlReport
from ._programs import programs_section
from ._text import printable, program_text

__all__ = ["render_html"]

#: Functions listed in the table.
MAX_TABLE_ROWS = 250
#: Ranks side by side in the rank table.
MAX_RANK_COLUMNS = 64
#: What the page lists at most: causes per function row, and call-site tree entries.
MAX_CAUSES_SHOWN = 6
MAX_TREE_FILES, MAX_TREE_LINES, MAX_TREE_FUNCTIONS, MAX_TREE_LEAVES = 100, 50, 20, 1500
#: Rows that stand for one function each (not the aggregates of many).
_ONE_PER_ROW = (RowKind.FUNCTION.value, RowKind.EAGER_OP.value)


def _e(value: Any) -> str:
    """Text from the log as HTML text or attribute value: control characters and
    bidirectional overrides shown as escapes, then ``& < > " '`` escaped."""
    return html.escape(printable(str(value)), quote=True)


def _s(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.3f}"


def _chip(kind: str) -> str:
    return (f'<span class="chip" style="--c:{_colour(kind)}">{_e(kind)}</span>')


def _num(value: float | int | None, text: str | None = None) -> str:
    if value is None:
        return '<td class="n" data-v="-1">–</td>'
    return f'<td class="n" data-v="{value}">{text if text is not None else value}</td>'


def _row_id(index: int) -> str:
    return f"fn-{index}"


def render_html(report: HtmlReport, rows: list[dict[str, Any]],
                title: str = "JAX compile report", sources: list[str] | None = None) -> str:
    """The page for ``report`` (fed) and its ``rows`` (``report.rows()``), as one string."""
    rows = rows[:MAX_TABLE_ROWS + 2]
    index = {(r["function"], r["file"], r["line"], r["row_kind"]): i for i, r in enumerate(rows)}

    def row_index(row: _Row) -> int | None:
        return index.get((row.function, row.file, row.line, row.row_kind))

    parts: list[str] = []
    add = parts.append
    add("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
    add(f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">')
    add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    add(f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>")
    add(f"<header><h1>{_e(title)}</h1>")
    if sources:
        add(f'<div class="src">{_e(", ".join(sources))}</div>')
    add("</header>")
    multi = len(report.ranks) > 1 or bool(report.divergences)
    links = [("summary", "Summary")]
    if multi:
        links += [("divergences", "Ranks")]
    links += [("timeline", "Timeline")]
    if report.steps.events:
        links += [("steps", "Steps")]
    links += [("functions", "Functions")]
    if any(r.get("hazards") for r in rows):
        links.append(("hazards", "Hazards"))
    links += [("callsites", "Call sites")]
    if report.persistent_cache():
        links.append(("cache", "Persistent cache"))
    links.append(("compiles", "Compiles"))
    add("<nav>" + "".join(f'<a href="#{a}">{t}</a>' for a, t in links) + "</nav><main>")

    _summary(add, report)
    if multi:  # what differs between ranks comes first
        _ranks(add, report, rows)
    _timeline(add, report, rows, row_index)
    _steps(add, report, rows, row_index)
    _functions(add, report, rows)
    _hazards(add, rows)
    programs_section(add, rows)
    _callsites(add, report)
    _cache(add, report)
    _compiles(add, report, rows, row_index)
    add(f"</main><script>{_JS}</script></body></html>\n")
    return "".join(parts)


def _summary(add: Any, report: HtmlReport) -> None:
    compiles, recompiles = report.events, report.recompiles
    seconds, recompile_s = report.total_s, report.recompile_s
    cards = [
        ("compiles", str(compiles), False),
        ("recompiles", str(recompiles), False),
        ("compile seconds", _s(seconds), False),
        ("seconds lost to recompiles", _s(recompile_s), False),
        ("recompiles after warm-up", str(report.after_warmup), report.after_warmup > 0),
    ]
    ranks = max(1, len(report.ranks))
    steps = report.steps.summary()
    if steps is not None and steps["share"] is not None:
        cards.append(("of step time compiling", f"{100 * steps['share']:.0f}%", False))
    elif report.first_start is not None and report.last_end is not None:
        span = report.last_end - report.first_start
        if span > 0:
            share = min(1.0, seconds / (span * ranks))
            cards.append(("of the logged time compiling", f"{100 * share:.0f}%", False))
    if report.storm_events:
        cards.append(("recompile storms", str(report.storm_events), True))
    if len(report.ranks) > 1:
        cards.append(("ranks", str(len(report.ranks)), False))
    if report.divergences:
        cards.append(("divergences between ranks", str(len(report.divergences)), True))
    add('<section id="summary"><h2>Summary</h2><div class="cards">')
    for label, value, warn in cards:
        add(f'<div class="card{" warn" if warn else ""}"><div class="v">{value}</div>'
            f'<div class="k">{label}</div></div>')
    add("</div>")
    notes = []
    if steps is not None and steps["share"] is not None:
        notes.append(f"The time share is the compile seconds inside steps "
                     f"({_s(steps['compile_s'])} s) over the steps' seconds "
                     f"({_s(steps['steps_s'])} s), from the jax.step lines (steps nested in "
                     "another not counted twice).")
    elif report.first_start is not None and report.last_end is not None:
        notes.append("The time share is compile seconds over the time from the first "
                     "compile's start to the last one's end"
                     + (f", summed over {ranks} ranks" if ranks > 1 else "") + ".")
    if report.skipped:
        notes.append(f"{report.skipped} lines were not jax.compile JSON events and were "
                     "skipped.")
    if report.filtered:
        notes.append(f"{report.filtered} events were left out by --function.")
    if notes:
        add(f'<p class="muted">{" ".join(_e(n) for n in notes)}</p>')
    add("</section>")


def _charts_missing() -> str:
    return ('<p class="note" id="charts-missing">Charts need matplotlib: '
            "<code>pip install matplotlib</code>. Every table below is complete "
            "without it.</p>")


def _timeline(add: Any, report: HtmlReport, rows: list[dict[str, Any]],
              row_index: Any) -> None:
    add('<section id="timeline"><h2>Timeline</h2>')
    items = sorted(report.timeline, key=lambda t: t[2])
    if not items or report.first_start is None:
        add('<p class="muted">No compile in this log has a timestamp and a duration.</p>'
            "</section>")
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        add(_charts_missing())
        add("</section>")
        return
    chart = _timeline_chart(report, items, row_index, rows)
    add(f'<img id="timeline-chart" class="chart" alt="compile timeline" src="{chart}">')
    kinds = sorted({t[4] for t in items}, key=lambda k: (k != _FIRST, k))
    add('<p class="legend muted">Each bar is one compile, from its start to its end, on '
        "its function's lane, coloured by cause kind: "
        + " ".join(_chip(k) for k in kinds)
        + (' · <span class="aw">after warm-up</span> outlined in red'
           if any(t[5] and t[4] != _FIRST for t in items) else "")
        + (' · <span class="storm">storm</span> marked where the warning fired'
           if report.storms else "") + ".")
    if report.timed > len(items):
        add(f" The {len(items)} longest of {report.timed} timed compiles are drawn.")
    add("</p></section>")


def _steps(add: Any, report: HtmlReport, rows: list[dict[str, Any]], row_index: Any) -> None:
    """Step durations over time with the compiles under them, then the per-step table;
    nothing without ``jax.step`` lines."""
    summary = report.steps.summary()
    if summary is None:
        return
    add('<section id="steps"><h2>Steps</h2>')
    compiled, sampled = report.step_points()
    if compiled or sampled:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            add(_charts_missing())
        else:
            chart = _steps_chart(report, compiled, sampled, rows, row_index)
            add(f'<img id="steps-chart" class="chart" alt="step durations over time, with '
                f'the compiles under them" src="{chart}">')
            add('<p class="legend muted">Above, each step from its start to its end at the '
                'height of its duration: <span class="aw">compiled</span> in red, the others '
                "a sample (about one a second per step name). Below, on the same time axis, "
                "each compile on its function's lane, coloured by cause kind: a slow step "
                "stands over the compile that made it slow.</p>")
    add('<div class="scroll"><table id="steps-table" class="sortable"><thead><tr>'
        '<th>Step</th><th class="n">Steps</th><th class="n">Compiled</th>'
        '<th class="n">p50 s</th><th class="n">p95 s</th><th class="n">Step s</th>'
        '<th class="n">Compile s</th><th class="n">Extra s</th></tr></thead><tbody>')
    for r in summary["steps"]:
        add(f"<tr><td><code>{_e(r['step'])}</code>"
            + (' <span class="muted">(nested)</span>' if r["nested"] else "") + "</td>"
            + _num(r["steps"]) + _num(r["compiled_steps"])
            + "".join(_num(r[k], _s(r[k])) for k in (
                "p50_s", "p95_s", "steps_s", "compile_s", "extra_s")) + "</tr>")
    add("</tbody></table></div>")
    add('<p class="muted">p50/p95: the steps that did not compile (a sample of them). Extra: '
        "the time of the steps that compiled over the step's p50.</p>")
    if summary["compiled"]:
        add('<h3>Steps that compiled, longest first</h3><table id="compiled-steps"><thead>'
            '<tr><th>Step</th><th class="n">Seconds</th><th class="n">Compiling s</th>'
            '<th class="n">Extra s</th><th>At</th></tr></thead><tbody>')
        for c in summary["compiled"]:
            number = f" #{c['number']}" if c["number"] is not None else ""
            add(f"<tr><td><code>{_e(c['step'])}</code>{_e(number)}</td>"
                + _num(c["seconds"], _s(c["seconds"])) + _num(c["compile_s"], _s(c["compile_s"]))
                + _num(c["extra_s"], _s(c["extra_s"]))
                + f"<td class=\"mono\">{_e(c['timestamp'] or '')}</td></tr>")
        add("</tbody></table>")
    add("</section>")


def _hint_title(hint: str | None) -> str:
    return f' title="hint: {_e(hint)}"' if hint else ""


def _functions(add: Any, report: HtmlReport, rows: list[dict[str, Any]]) -> None:
    add('<section id="functions"><h2>Functions</h2>')
    if not rows:
        add('<p class="muted">No jax.compile events.</p></section>')
        return
    add('<div class="scroll"><table id="functions-table" class="sortable"><thead><tr>'
        '<th>Function</th><th>Location</th><th class="n">Compiles</th>'
        '<th class="n">Recompiles</th><th class="n">After<br>warm-up</th>'
        '<th class="n">Total s</th><th class="n">p95 s</th><th class="n">Recompile s</th>'
        '<th class="n">Trace / lower /<br>backend s</th>'
        '<th class="n">Largest<br>program</th>'
        "<th>Recompile causes</th></tr></thead><tbody>")
    for i, r in enumerate(rows):
        causes = "".join(
            f'<div class="cause"{_hint_title(c["hint"])}>{_chip(c["cause"])} ×{c["count"]} '
            f'({_s(c["seconds"])} s)'
            + (f' <code>{_e(c["top_diff"])}</code>' if c["top_diff"] else "")
            + (f' <span class="muted">memory: {_e(c["memory_change"])}</span>'
               if c.get("memory_change") else "") + "</div>"
            for c in r["causes"][:MAX_CAUSES_SHOWN])
        if len(r["causes"]) > MAX_CAUSES_SHOWN:
            causes += (f'<div class="muted">{len(r["causes"]) - MAX_CAUSES_SHOWN} more cause '
                       "kinds</div>")
        # the (eager ops) row: where the program ran them, not causes
        causes += "".join(
            f'<div class="cause">at <code>{_e(c["callsite"])}</code> ×{c["count"]} '
            f'({_s(c["seconds"])} s)</div>' for c in r.get("callsites") or ())
        phases = " / ".join(_s(r[k]) for k in ("trace_s", "lower_s", "backend_compile_s"))
        aw = r["recompiles_after_warmup"]
        add(f'<tr id="row-{i}"><td><a href="#{_row_id(i)}">{_e(r["function"])}</a></td>'
            f'<td class="mono" title="{_e(r["file"] or "")}">'
            f'{_e(_location(r["file"], r["line"]))}</td>'
            + _num(r["compiles"]) + _num(r["recompiles"])
            + _num(aw, f'<span class="aw">{aw}</span>' if aw else "0")
            + _num(r["total_s"], _s(r["total_s"])) + _num(r["p95_s"], _s(r["p95_s"]))
            + _num(r["recompile_s"], _s(r["recompile_s"]))
            + f'<td class="n">{phases}</td>' + _program(r.get("largest_program"))
            + f"<td>{causes}</td></tr>")
    add("</tbody></table></div>")
    shown = sum(1 for r in rows if r["row_kind"] in _ONE_PER_ROW)
    if len(report._rows) > shown:
        add(f'<p class="muted">{len(report._rows) - shown} more functions with fewer compile '
            "seconds are not listed; their compiles are in the figures above.</p>")
    add("</section>")


def _hazards(add: Any, rows: list[dict[str, Any]]) -> None:
    """Each function's hazards: what was said, at which compile and line, and whether a
    later compile made it true (``not (yet)``: none did in this log)."""
    said = [(r, r["hazards"]) for r in rows if r.get("hazards")]
    if not said:
        return
    add('<section id="hazards"><h2>Hazards</h2><div class="scroll"><table class="sortable">'
        "<thead><tr><th>Function</th><th>Hazard</th><th>Path</th><th>Said at</th>"
        "<th>Came true</th><th>Fix</th></tr></thead><tbody>")
    for r, hazards in said:
        for h in hazards["list"]:
            level = "warning" if h["level"] == "warning" else "note"
            where = f" ({_location(h['callsite'], None)})" if h["callsite"] else ""
            at = f"#{h['count']}" if h["count"] is not None else ""
            fate = (f"at #{h['came_true_at']}" if h["came_true_at"] is not None
                    else '<span class="muted">not (yet)</span>')
            add(f'<tr><td title="{_e(r["file"] or "")}">{_e(r["function"])}</td>'
                f'<td title="{_e(h["hazard"])}">{_chip(h["kind"])} {level}</td>'
                f'<td class="mono">{_e(h["path"])}</td>'
                f'<td class="mono">{_e(at + where)}</td><td>{fate}</td>'
                f'<td>{_e(h["hint"] or "")}</td></tr>')
        if hazards["more"]:
            add(f'<tr><td>{_e(r["function"])}</td><td colspan="5" class="muted">'
                f'{hazards["more"]} more</td></tr>')
    add("</tbody></table></div></section>")


def _program(largest: dict[str, Any] | None) -> str:
    """The largest program's cell: its total, sortable, with every size in its title."""
    if not largest:
        return _num(None)
    total = largest["total_bytes"]
    return (f'<td class="n" data-v="{total}" title="{_e(program_text(largest))}">'
            f'{_e(human_bytes(total))}</td>')


def _callsites(add: Any, report: HtmlReport) -> None:
    add('<section id="callsites"><h2>Call sites</h2>')
    if not report.callsites:
        add('<p class="muted">No call sites in this log.</p></section>')
        return
    add('<p class="muted">The lines of user code whose calls compiled, by file, line and '
        "function compiled: compiles (recompiles), seconds.</p>")
    files: dict[str, dict[str, list[tuple[str, list[float]]]]] = {}
    for (site, function), counted in report.callsites.items():
        path, sep, line = site.rpartition(":")
        if not sep or not line.isdigit():
            path, line = site, ""
        files.setdefault(path, {}).setdefault(line, []).append((function, counted))

    def total(entries: list[tuple[str, list[float]]]) -> tuple[float, int, int]:
        return (sum(c[1] for _, c in entries), int(sum(c[0] for _, c in entries)),
                int(sum(c[2] for _, c in entries)))

    def fig(t: tuple[float, int, int]) -> str:
        return f'<span class="fig">{t[1]} ({t[2]}) · {_s(t[0])} s</span>'

    by_file = sorted(files.items(), key=lambda kv: -sum(
        total(e)[0] for e in kv[1].values()))
    add('<ul class="tree" id="callsite-tree">')
    leaves = left_out = 0
    for n, (path, lines) in enumerate(by_file[:MAX_TREE_FILES]):
        flat = [x for e in lines.values() for x in e]
        add(f'<li><details{" open" if n < 5 else ""}><summary><code>{_e(path)}</code>'
            f"{fig(total(flat))}</summary><ul class=\"tree\">")
        by_line = sorted(lines.items(), key=lambda kv: -total(kv[1])[0])
        left_out += sum(len(e) for _, e in by_line[MAX_TREE_LINES:])
        for line, entries in by_line[:MAX_TREE_LINES]:
            label = f"line {line}" if line else "(no line)"
            add(f"<li>{_e(label)}{fig(total(entries))}<ul class=\"tree\">")
            shown = sorted(entries, key=lambda e: -e[1][1])[:MAX_TREE_FUNCTIONS]
            shown = shown[:max(0, MAX_TREE_LEAVES - leaves)]
            left_out += len(entries) - len(shown)
            leaves += len(shown)
            for function, c in shown:
                add(f"<li><code>{_e(function)}</code>"
                    f"{fig((c[1], int(c[0]), int(c[2])))}</li>")
            add("</ul></li>")
        add("</ul></details></li>")
    add("</ul>")
    left_out += sum(len(e) for _, lines in by_file[MAX_TREE_FILES:] for e in lines.values())
    if left_out:
        add(f'<p class="muted">{left_out} more (call site, function) pairs with fewer '
            "seconds are not listed.</p>")
    add("</section>")


def _ranks(add: Any, report: HtmlReport, rows: list[dict[str, Any]]) -> None:
    add('<section id="divergences"><h2>Divergences between ranks</h2>')
    divs = sorted(report.divergences.values(), key=lambda d: (d["function"], d["count"]))
    if divs:
        add('<table id="divergence-table"><thead><tr><th>Function</th><th class="n">Compile'
            "</th><th>What differs</th><th>Description</th><th>Ranks (grouped by what they "
            "compiled)</th><th>Missing</th><th>Reported by</th></tr></thead><tbody>")
        for d in divs:
            sides = " vs ".join("[" + ", ".join(map(str, s)) + "]" for s in d["ranks"])
            add(f'<tr class="diverge"><td><code>{_e(d["function"])}</code></td>'
                f'<td class="n">#{d["count"]}</td><td>{_e(d["kind"])}</td>'
                f'<td><code>{_e(d["divergence"])}</code></td><td>{_e(sides)}</td>'
                f'<td>{_e(", ".join(map(str, d["missing_ranks"])))}</td>'
                f'<td>{_e(", ".join(map(str, d["reported_by"])))}</td></tr>')
        add("</tbody></table>")
    else:
        add('<p class="muted">None: every rank compiled the same programs.</p>')
    ranks = sorted(report.ranks)
    shown = ranks[:MAX_RANK_COLUMNS]
    add("<h3>Compiles per rank</h3>")
    add('<table id="rank-table"><thead><tr><th>Function</th>'
        + "".join(f'<th class="n">rank {r}</th>' for r in shown) + "</tr></thead><tbody>")
    add('<tr><td><b>all functions</b></td>'
        + "".join(f'<td class="n">{report.ranks[r][0]} ({report.ranks[r][1]})</td>'
                  for r in shown) + "</tr>")
    for r in rows[:50]:
        cells = [report.rank_cells.get((r["function"], k)) for k in shown]
        values = [tuple(c) if c else (0, 0) for c in cells]
        common = max(set(values), key=values.count) if values else None
        add(f"<tr><td><code>{_e(r['function'])}</code></td>"
            + "".join(f'<td class="n{" odd" if v != common else ""}">{v[0]} ({v[1]})</td>'
                      for v in values) + "</tr>")
    add("</tbody></table>")
    add('<p class="muted">compiles (recompiles); a cell that differs from most ranks is '
        "marked.")
    if len(ranks) > len(shown):
        add(f" {len(ranks) - len(shown)} more ranks are not shown.")
    add("</p></section>")


def _cache(add: Any, report: HtmlReport) -> None:
    section = report.persistent_cache()
    if not section:
        return
    ratio = section["hit_ratio"]
    add('<section id="cache"><h2>Persistent cache</h2>'
        f"<p>{section['lookups']} lookups, {section['hits']} hits"
        + (f" ({100 * ratio:.0f}%)" if ratio is not None else "")
        + f", {section['misses']} misses</p>")
    if section["misses_by_reason"]:
        add('<table><thead><tr><th>Miss reason</th><th class="n">Misses</th>'
            "<th>Most frequent detail</th></tr></thead><tbody>")
        for m in section["misses_by_reason"]:
            detail = (f"<code>{_e(m['top_detail'])}</code> ×{m['top_detail_count']}"
                      if m["top_detail"] else "")
            add(f"<tr><td>{_e(m['reason'])}</td><td class=\"n\">{m['count']}</td>"
                f"<td>{detail}</td></tr>")
        add("</tbody></table>")
    add("</section>")


def _compiles(add: Any, report: HtmlReport, rows: list[dict[str, Any]],
              row_index: Any) -> None:
    details = sorted(report.details, key=lambda d: (-d[0], -d[1]))
    add('<section id="compiles"><h2>Compiles</h2>')
    kept = len(details)
    total = report.events
    add(f'<p class="muted">{kept} of {total} compiles in detail'
        + (f" (the {kept} longest; the others are counted in the tables)"
           if total > kept else "") + ", grouped by function.</p>")
    opened = {d[2]["seq"] for d in details[:3]}
    groups: dict[int, list[dict[str, Any]]] = {}
    unlisted: list[dict[str, Any]] = []
    for _, _, d in details:
        i = row_index(d["row"])
        if i is None:
            unlisted.append(d)
        else:
            groups.setdefault(i, []).append(d)
    for i, r in enumerate(rows):
        entries = sorted(groups.get(i, []), key=lambda d: d["seq"])
        add(f'<div class="fn" id="{_row_id(i)}"><h3><code>{_e(r["function"])}</code> '
            f'<span class="muted">{r["compiles"]} compiles, {_s(r["total_s"])} s'
            + (f", {len(entries)} shown" if len(entries) < r["compiles"] else "")
            + "</span></h3>")
        for d in entries:
            _compile(add, d, d["seq"] in opened)
        add("</div>")
    if unlisted:
        add('<div class="fn" id="fn-unlisted"><h3>Functions not listed in the table</h3>')
        for d in sorted(unlisted, key=lambda d: d["seq"]):
            _compile(add, d, False)
        add("</div>")
    add("</section>")


def _compile(add: Any, d: dict[str, Any], open_: bool) -> None:
    kind = d["cause_kind"]
    after = d["after_warmup"] and d["recompile"]
    ordinal = f"#{d['count']}" if d["count"] is not None else ""
    add(f'<details class="compile{" after" if after else ""}" id="c-{d["seq"]}"'
        f'{" open" if open_ else ""}><summary><b>{_e(ordinal)}</b> {_chip(kind)} '
        + ('<span class="aw">after warm-up</span> ' if after else "")
        + f'{_e(d["cause"] or "")} <span class="muted">· {_s(d["seconds"])} s'
        + (f" · rank {d['rank']}" if d["rank"] is not None else "")
        + "</span></summary>")
    if d["diff"]:
        add('<table class="diff"><thead><tr><th>Path</th><th>Kind</th><th>Before</th>'
            "<th>After</th></tr></thead><tbody>")
        for path, k, before, after_v in d["diff"]:
            add(f"<tr><td><code>{_e(path or '')}</code></td><td>{_e(k or '')}</td>"
                f'<td class="before"><code>{_e(before if before is not None else "")}</code>'
                f'</td><td class="after"><code>{_e(after_v if after_v is not None else "")}'
                "</code></td></tr>")
        add("</tbody></table>")
        if d["diff_total"] > len(d["diff"]):
            add(f'<p class="muted">{d["diff_total"] - len(d["diff"])} more changes not '
                "shown.</p>")
    kv: list[tuple[str, str]] = []
    if d["hint"]:
        kv.append(("hint", _e(d["hint"])))
    if d["callsite"]:
        kv.append(("call site", f"<code>{_e(d['callsite'])}</code>"))
    if d["file"]:
        kv.append(("defined at", f"<code>{_e(_location(d['file'], d['line']))}</code>"))
    phases = [("trace", d["trace_s"]), ("lower", d["lower_s"]),
              ("backend compile", d["backend_s"])]
    kv.append(("durations", f"total {_s(d['seconds'])} s · "
               + " · ".join(f"{name} {_s(v)} s" for name, v in phases)))
    if d["compared_with"] is not None:
        kv.append(("compared with", f"compile #{d['compared_with']}"))
    if d["fingerprint"] or d["program_fingerprint"]:
        kv.append(("fingerprint", f"<code>{_e(d['fingerprint'] or '–')}</code>"
                   + (f" · program <code>{_e(d['program_fingerprint'])}</code>"
                      if d["program_fingerprint"] else "")))
    if d["cache_hit"] is None:
        cache = '<span class="muted">not looked up (persistent cache off)</span>'
    elif d["cache_hit"]:
        cache = "hit"
    else:
        cache = "miss" + (f": {_e(d['miss_reason'])}" if d["miss_reason"] else "")
        if d["miss_detail"]:
            cache += f" · <code>{_e(d['miss_detail'])}</code>"
    kv.append(("persistent cache", cache))
    if d["device"]:
        kv.append(("devices", _e(d["device"])))
    if d["timestamp"]:
        kv.append(("logged at", _e(d["timestamp"])))
    if d["trace_id"]:
        kv.append(("trace / span", f"<code>{_e(d['trace_id'])}</code> / "
                   f"<code>{_e(d['span_id'] or '')}</code>"))
    add('<table class="kv"><tbody>'
        + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in kv)
        + "</tbody></table></details>")
