"""The page's look, which the page and its charts share: the stylesheet, the one script
and the Content Security Policy that lets it alone run, the colour of each cause kind, and
the short ``file:line`` label of a function's place.

Its own module so that :mod:`._html` (the sections, from the data) and :mod:`._html_charts`
(matplotlib's drawings) take their colours and labels from one place; the page stays one
self-contained file, these strings inlined into it.
"""

from __future__ import annotations

import base64
import hashlib
import os

from .._core._vocab import CauseKind

#: One colour per cause kind (matplotlib's tab10/tab20, so the page and the charts agree).
_COLOURS = {k.value: colour for k, colour in (
    (CauseKind.FIRST_COMPILE, "#9aa5b1"), (CauseKind.SHAPE, "#1f77b4"),
    (CauseKind.DTYPE, "#ff7f0e"), (CauseKind.WEAK_TYPE, "#2ca02c"),
    (CauseKind.PYTREE_STRUCTURE, "#9467bd"), (CauseKind.STATIC_ARGUMENT, "#8c564b"),
    (CauseKind.FUNCTION_IDENTITY, "#e377c2"), (CauseKind.TRACING_CONTEXT, "#bcbd22"),
    (CauseKind.SHARDING, "#17becf"), (CauseKind.DEVICE_PLACEMENT, "#aec7e8"),
    (CauseKind.JIT_OPTIONS, "#ffbb78"), (CauseKind.UNKNOWN, "#7f7f7f"),
    (CauseKind.TRANSFORM_PARAMS, "#f7b6d2"),
)}
_AFTER_WARMUP = "#d62728"
_FIRST = CauseKind.FIRST_COMPILE.value


def _colour(kind: str) -> str:
    return _COLOURS.get(kind, "#c49c94")


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


def _location(file: str | None, line: int | None) -> str:
    if not file:
        return ""
    base = os.path.basename(file) or file
    return f"{base}:{line}" if line is not None else base

