"""``otel-jax report`` on the programs: each function's largest program by operations with
the line that makes most of it and what makes it large, and the programs kept in a folder,
in the JSON, the table and the HTML page; bounded, and absent where no line gave them."""

from __future__ import annotations

import io
import json
from typing import Any

from otel_jax._report import _aggregate, _html, _page_data, _programs, _text


def line(function: str, count: int, **fields: Any) -> str:
    event: dict[str, Any] = {
        "event": "jax.compile", "level": "info", "timestamp": "2026-12-06T03:00:00.000000Z",
        "function": function, "file": f"/src/{function}.py", "line": 3, "count": count,
        "is_recompile": count > 1, "eager_op": False,
        "cause_kind": "first_compile" if count == 1 else "shape", "compile_s": 1.0,
        **fields,
    }
    return json.dumps(event) + "\n"


FINDING = {"kind": "unrolled_loop", "line": "/src/step.py:12", "level": "warning",
           "text": "96% of the program's 25,003 operations are the same code repeated",
           "hint": "write the loop as lax.fori_loop or lax.scan"}
LOG = "".join([
    line("step", 1, program_ops=5003, program_file="/runs/p/step-aa.mlir.gz",
         program_top_lines=[{"line": "/src/step.py:12", "ops": 5000, "share": 0.9994}]),
    line("step", 2, program_ops=25003, program_file="/runs/p/step-bb.mlir.gz",
         program_top_lines=[{"line": "/src/step.py:12", "ops": 25000, "share": 0.9999},
                            {"line": "/src/step.py:20", "ops": 2, "share": 0.0001}],
         program_constant_bytes=8, program_findings=[FINDING]),
    line("step", 3, program_ops=5003, program_file="/runs/p/step-aa.mlir.gz"),
    line("plain", 1),  # no analysis: absent
])


def rows() -> dict[str, dict[str, Any]]:
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO(LOG.encode()))
    return {r["function"]: r for r in report.rows()}


def test_the_largest_program_and_the_files_kept_per_function():
    step = rows()["step"]
    assert step["program"] == {
        "count": 2, "ops": 25003, "at_least": False, "constant_bytes": 8,
        "top_lines": [{"line": "/src/step.py:12", "ops": 25000, "share": 0.9999},
                      {"line": "/src/step.py:20", "ops": 2, "share": 0.0001}],
        "findings": [FINDING]}
    assert step["program_files"] == [
        {"count": 1, "file": "/runs/p/step-aa.mlir.gz", "ops": 5003},
        {"count": 2, "file": "/runs/p/step-bb.mlir.gz", "ops": 25003}]  # each once
    plain = rows()["plain"]
    assert plain["program"] is None and plain["program_files"] == []


def test_the_table_says_the_program_its_fix_and_the_files():
    table = _text.render([rows()["step"]], "table").splitlines()
    assert "  program #2: 25,003 ops, 100% at step.py:12" in table
    assert ("      unrolled_loop at step.py:12; fix: write the loop as lax.fori_loop or "
            "lax.scan") in table
    assert "  kept #2 /runs/p/step-bb.mlir.gz (25,003 ops)" in table


def test_the_html_page_links_each_program_kept():
    report = _page_data.HtmlReport()
    report.feed_lines(io.BytesIO(LOG.encode()))
    page = _html.render_html(report, report.rows())
    assert '<section id="programs">' in page
    assert '<a href="/runs/p/step-bb.mlir.gz">#2 step-bb.mlir.gz</a>' in page
    assert "unrolled_loop warning" in page


def test_files_listed_are_bounded_and_the_rest_counted():
    log = "".join(line("f", i + 1, program_ops=10, program_file=f"/p/f-{i}.mlir.gz")
                  for i in range(_programs.MAX_PROGRAM_FILES + 5))
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO(log.encode()))
    [row] = report.rows()
    assert len(row["program_files"]) == _programs.MAX_PROGRAM_FILES
    assert row["program_files_more"] == 5
