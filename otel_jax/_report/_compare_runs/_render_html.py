"""``otel-jax diff --format html``: one self-contained page comparing two runs.

The report's page's look and safety (:mod:`._html_style`: the stylesheet, the one hashed
script that sorts tables, the Content Security Policy that loads nothing from anywhere;
:func:`._html._e`, which escapes every string from a log): the summary cards, the
verdict, and a sortable table with a row per function, compile seconds gained first, each
with its recompiles by cause, new causes and new hazards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._html import _chip, _e, _num, _s
from .._html_style import _CSS, _JS, _csp
from ._compare import Comparison
from ._render_text import cause_text, hazard_text, headline, location, name

__all__ = ["render_diff_html"]

#: Functions listed in the table (compile seconds gained first).
MAX_TABLE_ROWS = 500

_EXTRA_CSS = """
#diff-table td.n{white-space:nowrap}
.gain{color:var(--warn);font-weight:600}.loss{color:#2ca02c}
tr.gone td{color:var(--muted)}
.ok .v{color:#2ca02c}
"""


def _pair(pair: dict[str, Any], fmt: Callable[[Any], str] = str) -> str:
    b, n = pair["base"], pair["new"]
    if b == n:
        return _e(fmt(b))
    return f'{_e(fmt(b))} → <b>{_e(fmt(n))}</b>'


def _fmt(x: Any) -> str:
    return _s(x) if isinstance(x, float) or x is None else str(x)


def render_diff_html(diff: Comparison, title: str = "JAX compile diff") -> str:
    """The page for ``diff``, as one string."""
    s = diff.summary
    parts: list[str] = []
    add = parts.append
    add("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">")
    add(f'<meta http-equiv="Content-Security-Policy" content="{_csp()}">')
    add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    add(f"<title>{_e(title)}</title><style>{_CSS}{_EXTRA_CSS}</style></head><body>")
    add(f"<header><h1>{_e(title)}</h1><div class=\"src\">BASE {_e(diff.base.source)} "
        f"({_e(diff.base.kind)}) · NEW {_e(diff.new.source)} ({_e(diff.new.kind)})</div>"
        "</header>")
    add('<nav><a href="#summary">Summary</a><a href="#functions">Functions</a></nav><main>')

    ratio = s["matched_compile_s_ratio"]
    cards = [
        ("recompiles gained", str(s["recompiles_gained"]), s["recompiles_gained"] > 0),
        ("compile seconds, functions in both",
         f"{s['matched_compile_s_change']:+.3f}"
         + (f" ({100 * ratio:+.0f}%)" if ratio is not None else ""),
         s["matched_compile_s_change"] > 0),
        ("new causes", str(s["new_causes"]), s["new_causes"] > 0),
        ("new hazards", str(s["new_hazards"]), s["new_hazards"] > 0),
        ("functions new / gone", f"{s['functions']['new_only']} / {s['functions']['gone']}",
         False),
    ]
    add('<section id="summary"><h2>Summary</h2><div class="cards">')
    verdict_cls = "warn" if diff.regressed else "ok"
    add(f'<div class="card {verdict_cls}" id="verdict"><div class="v">'
        f'{"regressed" if diff.regressed else "passed"}</div><div class="k">exit status '
        f'{1 if diff.regressed else 0}</div></div>')
    for label, value, warn in cards:
        add(f'<div class="card{" warn" if warn else ""}"><div class="v">{_e(value)}</div>'
            f'<div class="k">{_e(label)}</div></div>')
    add("</div><ul>" + "".join(f"<li>{_e(line)}</li>" for line in headline(diff)) + "</ul>")
    if diff.regressions:
        add('<div class="note" id="regressions"><b>Past the thresholds:</b><ul>'
            + "".join(f"<li>{_e(r)}</li>" for r in diff.regressions) + "</ul></div>")
    add("</section>")

    add('<section id="functions"><h2>Functions</h2>')
    rows = diff.rows[:MAX_TABLE_ROWS]
    if not rows:
        add('<p class="muted">No function compiled in either run.</p></section>')
    else:
        add('<div class="scroll"><table id="diff-table" class="sortable"><thead><tr>'
            '<th>Function</th><th>Location</th><th class="n">Compiles</th>'
            '<th class="n">Recompiles</th><th class="n">Gained</th>'
            '<th class="n">Total s</th><th class="n">Change s</th><th class="n">p50 s</th>'
            '<th class="n">p95 s</th><th>What changed</th></tr></thead><tbody>')
        for r in rows:
            what = []
            for c in r["recompiles_by_cause"]:
                if c["base"] != c["new"]:
                    what.append(f'<div class="cause">{_chip(c["cause"])} '
                                f'{c["base"]} → <b>{c["new"]}</b></div>')
            for c in r["new_causes"]:
                what.append(f'<div class="cause new-cause"><b>new cause</b> '
                            f'<code>{_e(cause_text(c))}</code></div>')
            for h in r["new_hazards"]:
                title = f' title="hint: {_e(h["hint"])}"' if h["hint"] else ""
                what.append(f'<div class="cause new-hazard"{title}><b>new hazard</b> '
                            f'{_e(hazard_text(h))}</div>')
            change = r["total_s_change"]
            cls = "gain" if change > 0 else "loss" if change < 0 else ""
            add(f'<tr class="{_e(r["status"])}"><td><code>{_e(name(r))}</code></td>'
                f'<td class="mono" title="{_e(r["file"] or "")}">{_e(location(r))}</td>'
                f'<td class="n" data-v="{r["compiles"]["new"]}">{_pair(r["compiles"])}</td>'
                f'<td class="n" data-v="{r["recompiles"]["new"]}">'
                f'{_pair(r["recompiles"])}</td>'
                + _num(r["recompiles_gained"])
                + f'<td class="n" data-v="{r["total_s"]["new"]}">'
                  f'{_pair(r["total_s"], _fmt)}</td>'
                + f'<td class="n {cls}" data-v="{change}">{change:+.3f}</td>'
                + f'<td class="n">{_pair(r["p50_s"], _fmt)}</td>'
                + f'<td class="n">{_pair(r["p95_s"], _fmt)}</td>'
                + f'<td>{"".join(what)}</td></tr>')
        add("</tbody></table></div>")
        if len(diff.rows) > len(rows):
            add(f'<p class="muted">{len(diff.rows) - len(rows)} more functions with less '
                "compile time gained are not listed.</p>")
        add("</section>")
    add(f"</main><script>{_JS}</script></body></html>\n")
    return "".join(parts)
