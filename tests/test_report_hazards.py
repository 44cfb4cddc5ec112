"""``otel-jax report`` lists each function's hazards: said, came true, not (yet).

A hazard came true when a later compile of the same function has the cause it predicted
(``_report._hazards.came_true``, the rule the hazard benchmark judges by): checked on the
rule itself, then on a real program's log in every format.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax import _cli
from otel_jax._report import _aggregate
from otel_jax._report._hazards import came_true


def _compile(kind: str, *changes: tuple[str, str]) -> dict:
    return {"cause_kind": kind, "diff": [{"path": p, "kind": k} for p, k in changes]}


def test_the_rule_a_later_compile_with_the_predicted_cause_at_the_named_path():
    hazard = {"kind": "weak_type", "path": "lr"}
    assert came_true(hazard, _compile("weak_type", ("lr", "weak_type")))
    assert came_true(hazard, _compile("weak_type", ("lr['decay']", "weak_type")))
    assert came_true(hazard, _compile("weak_type", ("lr.value", "weak_type")))
    assert not came_true(hazard, _compile("weak_type", ("lrs", "weak_type")))  # another name
    assert not came_true(hazard, _compile("shape", ("lr", "shape")))  # another cause
    assert not came_true(hazard, _compile("weak_type", ("lr", "dtype")))  # another change
    assert not came_true({"kind": "weak_type", "path": ""},
                         _compile("weak_type", ("lr", "weak_type")))
    # a new function object: the change is the function itself, whatever its path
    assert came_true({"kind": "function_identity", "path": ""},
                     _compile("function_identity", ("<function>", "function_identity")))
    assert not came_true({"kind": "function_identity", "path": ""}, _compile("shape"))


@jax.jit
def fed_back(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def fed_back_once(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@pytest.fixture
def hazard_log(telemetry) -> str:
    params, lr = jnp.ones(3), 0.1
    for _ in range(3):
        params, lr = fed_back(params, lr)  # said at #1, came true at #2
    params, lr = jnp.ones(3), 0.1
    for _ in range(1):
        params, lr = fed_back_once(params, lr)  # said; the program ended first
    otel_jax.flush()
    return telemetry.log.getvalue()


def _rows(log: str) -> dict[str, dict]:
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO(log.encode()))
    return {r["function"]: r for r in report.rows()}


@pytest.mark.hazards
@pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")
def test_each_functions_hazards_said_came_true_and_not_yet(hazard_log, tmp_path: Path,
                                                         capsys):
    rows = _rows(hazard_log)
    true, pending = rows["fed_back"]["hazards"], rows["fed_back_once"]["hazards"]
    assert (true["said"], true["came_true"], true["not_yet"]) == (1, 1, 0)
    [hazard] = true["list"]
    assert (hazard["kind"], hazard["path"], hazard["level"], hazard["count"],
            hazard["came_true_at"]) == ("weak_type", "lr", "warning", 1, 2)
    assert hazard["callsite"].startswith(f"{__file__}:") and "jnp.asarray" in hazard["hint"]
    assert (pending["said"], pending["came_true"], pending["not_yet"]) == (1, 0, 1)
    assert pending["list"][0]["came_true_at"] is None

    log = tmp_path / "app.log"
    log.write_text(hazard_log)

    def report(*args: str) -> str:
        assert _cli.main(["report", *args, str(log)]) == 0
        return capsys.readouterr().out

    text = report()
    assert "  hazards: 1 said, 1 came true, 0 not (yet)" in text
    assert "  ! weak_type (warning) lr, said at #1 (test_report_hazards.py:" in text
    assert ": came true at #2" in text and ": not (yet)" in text
    assert "      fix: pass it as an array" in text
    markdown = report("--format", "markdown")
    assert "hazards: 1 said, 0 came true, 1 not (yet)" in markdown
    assert "! weak_type (warning) lr, said at #1" in markdown
    rows_json = {r["function"]: r for r in json.loads(report("--format", "json"))}
    assert rows_json["fed_back"]["hazards"] == true
    page = tmp_path / "report.html"
    assert _cli.main(["report", "--format", "html", "-o", str(page), str(log)]) == 0
    html = page.read_text()
    assert '<section id="hazards">' in html and '<a href="#hazards">' in html
    assert "<td>at #2</td>" in html and "not (yet)" in html


def test_no_hazard_said_reads_none_and_adds_nothing(tmp_path: Path, capsys):
    log = tmp_path / "app.log"
    log.write_text(json.dumps({"event": "jax.compile", "function": "f", "file": "/a.py",
                               "line": 1, "count": 1, "cause_kind": "first_compile"}) + "\n")
    rows = _rows(log.read_text())
    assert rows["f"]["hazards"] is None
    assert _cli.main(["report", str(log)]) == 0
    assert "hazard" not in capsys.readouterr().out
    page = tmp_path / "report.html"
    assert _cli.main(["report", "--format", "html", "-o", str(page), str(log)]) == 0
    assert 'id="hazards"' not in page.read_text()


def test_hazards_are_bounded_per_function_and_hostile_lines_are_skipped():
    lines = [json.dumps({"event": "jax.compile.hazard", "level": "info", "function": "f",
                         "file": "/a.py", "line": 1, "count": 1, "hazard_kind": "shape",
                         "path": f"x{i}", "hazard": "h", "hint": "fix"}) for i in range(40)]
    lines += ['{"event": "jax.compile.hazard", "function": ["not", "a", "name"]}',
              '["jax.compile.hazard"]', '{"event": "jax.compile.hazard"']
    lines.append(json.dumps({"event": "jax.compile", "function": "f", "file": "/a.py",
                             "line": 1, "count": 2, "cause_kind": "shape",
                             "diff": [{"path": "x3[0]", "kind": "shape"}]}))
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO("\n".join(lines).encode()))
    [row] = report.rows()
    hazards = row["hazards"]
    assert hazards["said"] == 40 and hazards["more"] == 40 - len(hazards["list"])
    assert hazards["came_true"] == 1 and hazards["list"][3]["came_true_at"] == 2
    assert hazards["list"][0]["level"] == "info"
    assert report.skipped == 3
