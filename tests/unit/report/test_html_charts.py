"""The HTML page's matplotlib charts (``_html_charts``): SVG ``data:`` URIs, one lane per
function up to :data:`MAX_LANES`, the same log drawing the same chart."""

from __future__ import annotations

import base64
import io
import json

import pytest

from otel_jax._report import _html_charts
from otel_jax._report._page_data import HtmlReport


def _compile(function: str, second: float, seconds: float) -> dict[str, object]:
    return {"timestamp": f"2026-12-01T10:00:{second:09.6f}Z", "level": "info",
            "event": "jax.compile", "function": function, "file": f"/src/{function}.py",
            "line": 1, "count": 1, "is_recompile": False, "cause_kind": "first_compile",
            "compile_s": seconds}


def _step(number: int, second: float, seconds: float, compiled: bool) -> dict[str, object]:
    return {"timestamp": f"2026-12-01T10:00:{second:09.6f}Z", "level": "info",
            "event": "jax.step", "step_name": "train", "step_number": number,
            "duration_s": seconds, "compiled": compiled, "compiles": int(compiled),
            "compile_s": 0.2 if compiled else 0.0, "nested": False}


def _report(events: list[dict[str, object]]) -> HtmlReport:
    report = HtmlReport()
    report.feed_lines(io.BytesIO("".join(json.dumps(e) + "\n" for e in events).encode()))
    return report


def _svg(uri: str) -> str:
    head = "data:image/svg+xml;base64,"
    assert uri.startswith(head)
    return base64.b64decode(uri[len(head):]).decode()


def _row_index(rows: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    index = {(r["function"], r["file"], r["line"], r["row_kind"]): i for i, r in enumerate(rows)}
    return lambda row: index.get((row.function, row.file, row.line, row.row_kind))


def test_clip_keeps_short_labels_and_ends_long_ones_with_an_ellipsis():
    assert _html_charts._clip("train_step", 42) == "train_step"
    assert _html_charts._clip("x" * 50, 10) == "x" * 9 + "…"


def test_the_timeline_draws_a_lane_per_function_and_the_rest_on_one():
    pytest.importorskip("matplotlib")
    n = _html_charts.MAX_LANES + 3
    report = _report([_compile(f"fn_{i:02d}", 1.0 + i, 0.1 + 0.01 * i) for i in range(n)])
    rows = report.rows()
    items = sorted(report.timeline, key=lambda t: t[2])
    uri = _html_charts._timeline_chart(report, items, _row_index(rows), rows)
    svg = _svg(uri)
    listed = [r["function"] for r in rows[:_html_charts.MAX_LANES]]
    assert all(name in svg for name in listed)
    assert "(other functions)" in svg
    assert "seconds since the first compile started" in svg
    # the same log draws the same bytes (no date, a fixed hash salt)
    assert _html_charts._timeline_chart(report, items, _row_index(rows), rows) == uri


def test_the_steps_chart_draws_the_steps_over_the_compiles():
    pytest.importorskip("matplotlib")
    events = [_compile("train_step", 1.0, 0.5)]
    events += [_step(s, 1.0 + s, 1.5 if s == 0 else 0.3, s == 0) for s in range(10)]
    report = _report(events)
    compiled, sampled = report.step_points()
    assert compiled and sampled
    rows = report.rows()
    svg = _svg(_html_charts._steps_chart(report, compiled, sampled, rows, _row_index(rows)))
    assert "step seconds" in svg and "step that compiled" in svg and "train_step" in svg
