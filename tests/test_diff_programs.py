"""``otel-jax diff`` on program size: each function's largest program in operations, BASE
against NEW, and ``--max-program-growth PCT`` failing a run whose program grew past it (from
logs and from reports' JSON alike); runs without the analysis compare as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_jax import _cli


def log(path: Path, ops: dict[str, int | None]) -> str:
    lines = []
    for function, n in ops.items():
        event: dict[str, Any] = {
            "timestamp": "2026-12-06T03:30:00.123456Z", "level": "info",
            "event": "jax.compile", "function": function, "file": "/proj/train.py",
            "line": 10, "count": 1, "is_recompile": False, "eager_op": False,
            "cause_kind": "first_compile", "compile_s": 1.0}
        if n is not None:
            event["program_ops"] = n
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = _cli.main(["diff", *argv])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    return rc, out


def test_a_program_that_grew_past_the_threshold_fails_and_is_named(tmp_path, capsys):
    base = log(tmp_path / "base.jsonl", {"step": 5003, "eval": 300, "old": None})
    new = log(tmp_path / "new.jsonl", {"step": 25003, "eval": 310, "old": 900})
    rc, out = diff(capsys, base, new)
    assert rc == 0  # opt-in: no threshold, no failure
    assert "  program 5,003 -> 25,003 ops" in out.splitlines()
    rc, out = diff(capsys, "--max-program-growth", "20%", base, new)
    assert rc == 1
    assert "- 1 programs grew by more than 20%: step 5,003 -> 25,003 ops (+400%)" in out
    rc, out = diff(capsys, "--max-program-growth", "500%", base, new)
    assert rc == 0
    rc, out = diff(capsys, "--format", "json", "--max-program-growth", "20%", base, new)
    rows = {r["function"]: r for r in json.loads(out)["functions"]}
    assert rows["step"]["program_ops"] == {"base": 5003, "new": 25003}
    assert rows["step"]["program_ops_growth"] == round(25003 / 5003 - 1, 6)
    assert rows["old"]["program_ops_growth"] is None  # BASE gave none: never a failure


def test_reports_json_compare_the_same(tmp_path, capsys):
    paths = []
    for side, ops in (("base", 1000), ("new", 1500)):
        report = tmp_path / f"{side}.json"
        assert _cli.main(["report", "--format", "json", "-o", str(report),
                          log(tmp_path / f"{side}.jsonl", {"step": ops})]) == 0
        paths.append(str(report))
    capsys.readouterr()
    rc, out = diff(capsys, "--max-program-growth", "25", *paths)
    assert rc == 1 and "step 1,000 -> 1,500 ops (+50%)" in out
