"""The HTML page's two charts, drawn by matplotlib as SVG images inlined as ``data:`` URIs:
the compile timeline (one lane per function) and the steps over time with the compiles
under them.

Its own module because it is the only part of the page that needs matplotlib (the extra
``otel_jax[report]``), imported inside each function only when a page with a chart is
rendered; :mod:`._html` writes the sections around the charts and what the page says when
matplotlib is missing.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from ._aggregate import _Row
from ._html_style import _AFTER_WARMUP, _FIRST, _colour, _location
from ._page_data import HtmlReport
from ._text import printable

#: Functions on the timeline's lanes.
MAX_LANES = 24


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
