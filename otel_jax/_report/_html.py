"""``otel-jax report --format html``: one self-contained page about a run's compiles.

The page is drawn from :class:`._page_data.HtmlReport` (the rows, the timeline, the kept
compiles' detail, call sites, ranks, storms).  Every string from the log is escaped
(:func:`_e`) before it reaches the page, which also carries a Content Security Policy that
lets no script run but its own one (by hash) and loads nothing from anywhere.  Charts are
drawn by matplotlib (the extra ``otel_jax[report]``) as SVG images inlined as ``data:``
URIs, so nothing a chart contains can run either; without matplotlib the page says so and
keeps every table.  matplotlib is imported only when a page is rendered.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math
import os
from typing import Any

from .._core._vocab import CauseKind, RowKind
from ._aggregate import _Row
from ._page_data import HtmlReport
from ._text import printable

__all__ = ["render_html"]

#: Functions listed in the table and on the timeline's lanes.
MAX_TABLE_ROWS = 250
MAX_LANES = 24
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


#: One colour per cause kind (matplotlib's tab10/tab20, so the page and the charts agree).
_COLOURS = {k.value: colour for k, colour in (
    (CauseKind.FIRST_COMPILE, "#9aa5b1"), (CauseKind.SHAPE, "#1f77b4"),
    (CauseKind.DTYPE, "#ff7f0e"), (CauseKind.WEAK_TYPE, "#2ca02c"),
    (CauseKind.PYTREE_STRUCTURE, "#9467bd"), (CauseKind.STATIC_ARGUMENT, "#8c564b"),
    (CauseKind.FUNCTION_IDENTITY, "#e377c2"), (CauseKind.TRACING_CONTEXT, "#bcbd22"),
    (CauseKind.SHARDING, "#17becf"), (CauseKind.DEVICE_PLACEMENT, "#aec7e8"),
    (CauseKind.JIT_OPTIONS, "#ffbb78"), (CauseKind.UNKNOWN, "#7f7f7f"),
)}
_AFTER_WARMUP = "#d62728"
_FIRST = CauseKind.FIRST_COMPILE.value


def _colour(kind: str) -> str:
    return _COLOURS.get(kind, "#c49c94")


def _chip(kind: str) -> str:
    return (f'<span class="chip" style="--c:{_colour(kind)}">{_e(kind)}</span>')


_CSS = """
:root{--fg:#1f2933;--muted:#616e7c;--line:#e4e7eb;--bg:#f5f7fa;--card:#fff;--accent:#2f6fde;
--warn:#d62728}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
header{background:#1f2933;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:20px;font-weight:600}
header .src{color:#cbd2d9;font-size:12px;margin-top:4px;word-break:break-all}
nav{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid var(--line);
padding:8px 32px;font-size:13px}
nav a{margin-right:16px;color:var(--accent);text-decoration:none}
main{padding:20px 32px 60px;max-width:1400px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:16px 20px;margin:0 0 20px}
h2{font-size:16px;margin:0 0 12px}
h3{font-size:14px;margin:16px 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{flex:1 1 150px;border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.card .v{font-size:24px;font-weight:600}
.card .k{color:var(--muted);font-size:12px}
.card.warn .v{color:var(--warn)}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f0f4f8;font-weight:600;white-space:nowrap}
th.sort{cursor:pointer}
th.sort:after{content:" \\2195";color:#9aa5b1}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;
overflow-wrap:anywhere}
td.mono{white-space:nowrap}
.scroll{overflow-x:auto}
#functions-table td:first-child{max-width:320px}
.cause{margin:0 0 3px}
.muted{color:var(--muted)}
.chip{display:inline-block;padding:0 7px;border-radius:10px;font-size:12px;
background:color-mix(in srgb,var(--c) 22%,white);border:1px solid var(--c);white-space:nowrap}
.aw{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;color:#fff;
background:var(--warn)}
.storm{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;color:#fff;
background:#7b1fa2}
details.compile{border:1px solid var(--line);border-radius:6px;margin:6px 0;padding:0 10px}
details.compile[open]{padding-bottom:10px}
details.compile>summary{cursor:pointer;padding:7px 0}
details.compile.after{border-left:4px solid var(--warn)}
table.kv th{width:170px;background:none;color:var(--muted);font-weight:500}
table.diff td.before{background:#fff1f0}
table.diff td.after{background:#f0fff4}
.chart{max-width:100%;height:auto;display:block}
.note{background:#fffbea;border:1px solid #f0d264;border-radius:6px;padding:8px 12px}
ul.tree{list-style:none;padding-left:18px;margin:4px 0}
ul.tree>li{margin:2px 0}
.tree .fig{color:var(--muted);font-size:12px;margin-left:6px}
tr.diverge td{background:#fff1f0}
td.odd{background:#fff1f0;font-weight:600}
.legend span{margin-right:10px}
"""

#: The page's one script: sortable tables.  Its hash is in the Content Security Policy,
#: so no other script (an escaping mistake, an injected handler) could run.
_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.classList.add("sort");
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var down = th.getAttribute("data-dir") !== "desc";
      th.setAttribute("data-dir", down ? "desc" : "asc");
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
        var r = (x !== null && y !== null) ? parseFloat(x) - parseFloat(y)
          : a.cells[col].textContent.localeCompare(b.cells[col].textContent);
        return down ? -r : r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def _num(value: float | int | None, text: str | None = None) -> str:
    if value is None:
        return '<td class="n" data-v="-1">–</td>'
    return f'<td class="n" data-v="{value}">{text if text is not None else value}</td>'


def _row_id(index: int) -> str:
    return f"fn-{index}"


def _location(file: str | None, line: int | None) -> str:
    if not file:
        return ""
    base = os.path.basename(file) or file
    return f"{base}:{line}" if line is not None else base


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
    links += [("functions", "Functions"), ("callsites", "Call sites")]
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
            "<code>pip install 'otel_jax[report]'</code>. Every table below is complete "
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


def _timeline_chart(report: HtmlReport,
                    items: list[tuple[float, int, float, _Row, str, bool, int | None]],
                    row_index: Any, rows: list[dict[str, Any]]) -> str:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t0 = report.first_start or 0.0
    span = max((report.last_end or t0) - t0, 1e-3)
    # one lane per function (per function and rank for several ranks' logs), the
    # functions in the table's order; the rest share one lane
    per_rank = len(report.ranks) > 1
    row_names = [r["function"] for r in rows[:MAX_LANES]]

    def key_of(row: _Row, rank: int | None) -> tuple[int, int] | None:
        i = row_index(row)
        if i is None or i >= MAX_LANES:
            return None
        return (int(i), rank if per_rank and rank is not None else -1)

    keys = sorted({k for it in items if (k := key_of(it[3], it[6])) is not None})
    keys = keys[:MAX_LANES]
    lane_index = {k: n for n, k in enumerate(keys)}
    lanes: list[str] = []
    for i, rank in keys:  # a name two rows share gets its location
        r = rows[i]
        where = _location(r["file"], r["line"])
        label = (f"{r['function']} ({where})" if row_names.count(r["function"]) > 1 and where
                 else r["function"])
        lanes.append(label + (f" · rank {rank}" if rank >= 0 else ""))
    other_lane = None

    def lane(key: tuple[int, int] | None) -> int:
        nonlocal other_lane
        n = lane_index.get(key) if key is not None else None
        if n is not None:
            return n
        if other_lane is None:
            lanes.append("(other functions)")
            other_lane = len(lanes) - 1
        return other_lane

    lane_of = {id(it): lane(key_of(it[3], it[6])) for it in items}
    rc: dict[str, Any] = {"svg.fonttype": "none", "svg.hashsalt": "otel_jax", "font.size": 9}
    if "text.parse_math" in matplotlib.rcParams:
        rc["text.parse_math"] = False
    with matplotlib.rc_context(rc):  # type: ignore[arg-type]
        height = 1.2 + 0.32 * len(lanes)
        fig = Figure(figsize=(13, max(2.4, height)), dpi=100)
        ax = fig.subplots()
        min_w = span * 0.0025
        per_lane: dict[int, tuple[list[tuple[float, float]], list[str], list[str]]] = {}
        for it in items:
            secs, _, start, _, kind, after, _ = it
            bars, cs, es = per_lane.setdefault(lane_of[id(it)], ([], [], []))
            bars.append((start - t0, max(secs, min_w)))
            cs.append(_colour(kind))
            es.append(_AFTER_WARMUP if after and kind != _FIRST else "none")
        for y, (bars, cs, es) in per_lane.items():  # one collection per lane: small, fast
            ax.broken_barh(bars, (y - 0.31, 0.62), facecolors=cs, edgecolors=es,
                           linewidth=1.4)
        storms = [s for s in report.storms if s["time"] is not None]
        if storms:
            sx = [float(s["time"]) - t0 for s in storms]
            by_name = {r["function"]: i for i, r in reversed(list(enumerate(rows[:MAX_LANES])))}
            by_place = {(r["function"], r["file"], r["line"]): i
                        for i, r in enumerate(rows[:MAX_LANES])}
            sy = []
            for st in storms:
                si = by_place.get((st["function"], st["file"], st["line"]),
                                  by_name.get(st["function"]))
                srank = int(st["rank"]) if per_rank and st["rank"] is not None else -1
                n = lane_index.get((si, srank)) if si is not None else None
                if n is None and si is not None:  # the storm's rank drew no compile
                    n = next((m for (j, _), m in lane_index.items() if j == si), None)
                sy.append(n if n is not None else lane(None))
            ax.scatter(sx, [y - 0.42 for y in sy], marker="v", s=46, color="#7b1fa2",
                       zorder=3)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels([_clip(printable(n), 42) for n in lanes])
        ax.invert_yaxis()
        ax.set_xlim(-span * 0.01, span * 1.01)
        ax.set_xlabel("seconds since the first compile started")
        ax.grid(axis="x", color="#e4e7eb")
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        kinds = sorted({it[4] for it in items}, key=lambda k: (k != _FIRST, k))
        handles: list[Any] = [Patch(color=_colour(k), label=k) for k in kinds]
        if any(it[5] and it[4] != _FIRST for it in items):
            handles.append(Patch(facecolor="white", edgecolor=_AFTER_WARMUP, linewidth=1.4,
                                 label="after warm-up"))
        if storms:
            handles.append(Line2D([], [], marker="v", color="#7b1fa2", linestyle="none",
                                  label="recompile storm"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  frameon=False, fontsize=8)
        # margins set from the longest label and the legend: tight_layout would draw the
        # whole figure once more
        label_pt = 9 * 0.6 * max(len(_clip(printable(n), 42)) for n in lanes) + 16
        fig_h = max(2.4, height)
        fig.subplots_adjust(left=min(0.4, label_pt / (13 * 72)), right=0.85,
                            bottom=0.5 / fig_h, top=1 - 0.12 / fig_h)
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


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


def _steps_chart(report: HtmlReport, compiled: list[tuple[float, float, str, float]],
                 sampled: list[tuple[float, float, str, float]], rows: list[dict[str, Any]],
                 row_index: Any) -> str:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    items = sorted(report.timeline, key=lambda t: t[2])
    starts = [c[0] for c in compiled] + [c[0] for c in sampled] + [it[2] for it in items]
    t0 = min(starts)
    ends = ([c[0] + c[1] for c in compiled] + [c[0] + c[1] for c in sampled]
            + [it[2] + it[0] for it in items])
    span = max(max(ends) - t0, 1e-3)
    lanes: list[str] = []
    lane_of: dict[int, int] = {}
    for it in items:
        i = row_index(it[3])
        key = i if i is not None and i < 8 else -1
        if key not in lane_of:
            lane_of[key] = len(lanes)
            lanes.append(rows[key]["function"] if key >= 0 else "(other functions)")
    rc: dict[str, Any] = {"svg.fonttype": "none", "svg.hashsalt": "otel_jax", "font.size": 9}
    if "text.parse_math" in matplotlib.rcParams:
        rc["text.parse_math"] = False
    with matplotlib.rc_context(rc):  # type: ignore[arg-type]
        lane_h = 0.3 * max(1, len(lanes))
        fig = Figure(figsize=(13, 3.2 + lane_h), dpi=100)
        top, bottom = fig.subplots(2, 1, sharex=True,
                                   gridspec_kw={"height_ratios": [3.2, 0.6 + lane_h]})
        for points, colour, width in ((sampled, "#7b8794", 1.2), (compiled, _AFTER_WARMUP, 2.4)):
            if points:
                top.hlines([p[1] for p in points], [p[0] - t0 for p in points],
                           [p[0] + p[1] - t0 for p in points], colors=colour, linewidth=width)
                top.scatter([p[0] + p[1] - t0 for p in points], [p[1] for p in points],
                            s=10 if colour != _AFTER_WARMUP else 22, color=colour, zorder=3)
        top.set_ylabel("step seconds")
        top.set_ylim(bottom=0)
        top.legend(handles=[Patch(color=_AFTER_WARMUP, label="step that compiled"),
                            Patch(color="#7b8794", label="step (sampled)")],
                   loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
        per_lane: dict[int, tuple[list[tuple[float, float]], list[str]]] = {}
        min_w = span * 0.002
        for it in items:
            i = row_index(it[3])
            bars, colours = per_lane.setdefault(
                lane_of[i if i is not None and i < 8 else -1], ([], []))
            bars.append((it[2] - t0, max(it[0], min_w)))
            colours.append(_colour(it[4]))
        for y, (bars, colours) in per_lane.items():
            bottom.broken_barh(bars, (y - 0.35, 0.7), facecolors=colours)
        bottom.set_yticks(range(len(lanes)))
        bottom.set_yticklabels([_clip(printable(n), 42) for n in lanes])
        bottom.set_ylim(len(lanes) - 0.5, -0.5)
        bottom.set_xlim(-span * 0.01, span * 1.01)
        bottom.set_xlabel("seconds since the first step or compile started")
        kinds = sorted({it[4] for it in items}, key=lambda k: (k != _FIRST, k))
        if kinds:
            bottom.legend(handles=[Patch(color=_colour(k), label=k) for k in kinds],
                          loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
                          fontsize=8)
        for ax in (top, bottom):
            ax.grid(axis="x", color="#e4e7eb")
            ax.set_axisbelow(True)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
        label_pt = 9 * 0.6 * max([len(_clip(printable(n), 42)) for n in lanes] + [12]) + 16
        fig.subplots_adjust(left=min(0.4, label_pt / (13 * 72)), right=0.85, hspace=0.08)
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


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
        "<th>Recompile causes</th></tr></thead><tbody>")
    for i, r in enumerate(rows):
        causes = "".join(
            f'<div class="cause"{_hint_title(c["hint"])}>{_chip(c["cause"])} ×{c["count"]} '
            f'({_s(c["seconds"])} s)'
            + (f' <code>{_e(c["top_diff"])}</code>' if c["top_diff"] else "") + "</div>"
            for c in r["causes"][:MAX_CAUSES_SHOWN])
        if len(r["causes"]) > MAX_CAUSES_SHOWN:
            causes += (f'<div class="muted">{len(r["causes"]) - MAX_CAUSES_SHOWN} more cause '
                       "kinds</div>")
        phases = " / ".join(_s(r[k]) for k in ("trace_s", "lower_s", "backend_compile_s"))
        aw = r["recompiles_after_warmup"]
        add(f'<tr id="row-{i}"><td><a href="#{_row_id(i)}">{_e(r["function"])}</a></td>'
            f'<td class="mono" title="{_e(r["file"] or "")}">'
            f'{_e(_location(r["file"], r["line"]))}</td>'
            + _num(r["compiles"]) + _num(r["recompiles"])
            + _num(aw, f'<span class="aw">{aw}</span>' if aw else "0")
            + _num(r["total_s"], _s(r["total_s"])) + _num(r["p95_s"], _s(r["p95_s"]))
            + _num(r["recompile_s"], _s(r["recompile_s"]))
            + f'<td class="n">{phases}</td><td>{causes}</td></tr>')
    add("</tbody></table></div>")
    shown = sum(1 for r in rows if r["row_kind"] in _ONE_PER_ROW)
    if len(report._rows) > shown:
        add(f'<p class="muted">{len(report._rows) - shown} more functions with fewer compile '
            "seconds are not listed; their compiles are in the figures above.</p>")
    add("</section>")


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
