"""``otel-jax report``'s largest program per function: the compile whose program needed
the most device memory (XLA's analysis on its JSON lines), in every format; none where no
line gave an analysis."""

from __future__ import annotations

import io
import json
from typing import Any

from otel_jax._report import _aggregate, _html, _page_data, _text

MiB = 1 << 20


def line(function: str, count: int, change: str | None = None, **sizes: int) -> str:
    event: dict[str, Any] = {
        "event": "jax.compile", "level": "info", "timestamp": "2026-12-06T03:00:00.000000Z",
        "function": function, "file": f"/src/{function}.py", "line": 3, "count": count,
        "is_recompile": count > 1, "eager_op": False,
        "cause_kind": "first_compile" if count == 1 else "shape", "compile_s": 1.0,
    }
    event.update({f"memory_{k}_bytes": v for k, v in sizes.items() if k != "limit"})
    if "limit" in sizes:
        event["device_memory_limit_bytes"] = sizes["limit"]
    if change is not None:
        event["memory_change"] = change
    return json.dumps(event) + "\n"


LOG = "".join([
    line("step", 1, argument=MiB, output=MiB, temp=2 * MiB, generated_code=0),
    line("step", 2, "temp 2.0 MiB -> 40.0 MiB, arguments 1.0 MiB -> 2.0 MiB",
         argument=2 * MiB, output=2 * MiB, temp=40 * MiB, generated_code=0, limit=16 << 30),
    line("step", 3, "temp 2.0 MiB -> 3.0 MiB", argument=MiB, output=MiB, temp=3 * MiB,
         generated_code=0),
    line("plain", 1),  # a line of a backend without the analysis
    line("only_temp", 1, temp=5 * MiB),
])


def report(**kwargs: Any) -> _aggregate.Report:
    r = _aggregate.Report(**kwargs)
    r.feed_lines(io.BytesIO(LOG.encode()))
    return r


def test_the_largest_program_per_function_with_its_sizes():
    rows = {r["function"]: r for r in report().rows()}
    assert rows["step"]["largest_program"] == {
        "count": 2, "total_bytes": 44 * MiB, "argument_bytes": 2 * MiB,
        "output_bytes": 2 * MiB, "temp_bytes": 40 * MiB, "generated_code_bytes": 0,
        "device_memory_limit_bytes": 16 << 30}
    assert rows["plain"]["largest_program"] is None  # absent, never zeros
    assert rows["only_temp"]["largest_program"]["argument_bytes"] is None


def test_a_cause_shows_the_largest_program_that_grew_under_it():
    [step] = [r for r in report().rows() if r["function"] == "step"]
    [shape] = step["causes"]
    assert shape["count"] == 2
    assert shape["memory_change"] == "temp 2.0 MiB -> 40.0 MiB, arguments 1.0 MiB -> 2.0 MiB"
    assert shape["memory_change_count"] == 2
    table = _text.render([step], "table")
    assert ("      memory: temp 2.0 MiB -> 40.0 MiB, arguments 1.0 MiB -> 2.0 MiB (#2)"
            in table.splitlines())
    assert "; memory: temp 2.0 MiB -> 40.0 MiB" in _text.render([step], "markdown")


def test_the_other_row_keeps_the_largest_of_what_it_merges():
    rows = {r["function"]: r for r in report(max_functions=1).rows()}
    assert rows["(other)"]["largest_program"]["total_bytes"] == 5 * MiB


def test_every_format_shows_it_in_human_units():
    rows = report().rows()
    table = _text.render(rows, "table")
    assert ("  largest program #2: 44.0 MiB (temp 40.0 MiB, arguments 2.0 MiB, outputs "
            "2.0 MiB, code 0 B; device 16.0 GiB)") in table
    assert "  largest program 5.0 MiB (temp 5.0 MiB)" not in table  # its count is known
    assert "  largest program #1: 5.0 MiB (temp 5.0 MiB)" in table
    markdown = _text.render(rows, "markdown")
    assert "| Largest program |" in markdown
    assert "| #2: 44.0 MiB (temp 40.0 MiB, arguments 2.0 MiB, outputs 2.0 MiB, code 0 B; " \
           "device 16.0 GiB) |" in markdown
    assert json.loads(_text.render(rows, "json"))[0]["largest_program"]["temp_bytes"] \
        == 40 * MiB
    page_report = _page_data.HtmlReport()
    page_report.feed_lines(io.BytesIO(LOG.encode()))
    page = _html.render_html(page_report, page_report.rows())
    assert "Largest<br>program" in page
    assert f'data-v="{44 * MiB}" title="#2: 44.0 MiB (temp 40.0 MiB' in page
