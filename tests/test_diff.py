"""Tests for ``otel-jax diff BASE NEW`` (otel_jax._report._compare_runs).

Two real runs of the demo, one from a copy at another path with a line that adds a
recompile: the diff names the function, the new cause and its line, and exits 1 under
``--max-new-recompiles 0``; the same log twice is no change and exit 0; a report's JSON
and a ``.gz`` log compare like the log.  Then the comparison on small hand-made logs
(matching across checkouts, thresholds, hazards) and on inputs it cannot read.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from otel_jax import _cli
from otel_jax._report import _read
from otel_jax._report._compare_runs import _compare

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = _cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def diff_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    rc, out, err = run(capsys, "diff", "--format", "json", *argv)
    assert rc in (0, 1), err
    return rc, json.loads(out)


def compile_line(function: str, compile_s: float, *, root: str = "/home/a/proj",
                 file: str = "src/train.py", line: int = 10, count: int = 1,
                 **fields: Any) -> str:
    event: dict[str, Any] = {
        "timestamp": "2026-11-30T03:30:00.123456Z", "level": "info", "event": "jax.compile",
        "logger": "otel_jax", "function": function, "file": f"{root}/{file}", "line": line,
        "callsite": f"{root}/src/main.py:120", "count": count, "is_recompile": count > 1,
        "eager_op": False, "cause_kind": "first_compile" if count == 1 else "unknown",
        "compile_s": compile_s,
    }
    event.update(fields)
    return json.dumps(event)


def shape(before: str, after: str, **fields: Any) -> dict[str, Any]:
    return {"cause_kind": "shape", "cause": f"batch['x']: {before} -> {after}",
            "diff": [{"path": "batch['x']", "kind": "shape", "before": before,
                      "after": after}], **fields}


def hazard_line(function: str, kind: str, path: str, *, level: str = "warning",
                root: str = "/home/a/proj") -> str:
    return json.dumps({"level": level, "event": "jax.compile.hazard", "function": function,
                       "file": f"{root}/src/train.py", "line": 10, "count": 1,
                       "hazard_kind": kind, "path": path, "hazard": f"{path} will recompile",
                       "hint": "fix it"})


def step_line(seconds: float, compile_s: float = 0.0) -> str:
    return json.dumps({"event": "jax.step", "step_name": "train", "duration_s": seconds,
                       "compiled": compile_s > 0, "compile_s": compile_s})


def base_log(root: str = "/home/a/proj") -> list[str]:
    """step: a first compile and a shape recompile; eval: one compile; a hazard; steps."""
    return [
        compile_line("step", 2.0, root=root),
        hazard_line("step", "weak_type", "lr", root=root),
        step_line(2.1, 2.0),
        compile_line("step", 1.0, root=root, count=2, **shape("f32[32,8]", "f32[17,8]")),
        step_line(1.1, 1.0),
        step_line(0.01),
        compile_line("eval", 0.5, root=root, file="src/eval.py", line=30),
    ]


def write(path: Path, lines: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# -- the comparison on hand-made logs ---------------------------------------------------


def test_the_same_log_twice_is_no_change_and_exit_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "a.log", base_log())
    gates = ("--max-new-recompiles", "0", "--max-compile-time-increase", "0%",
             "--compile-time-floor", "0", "--fail-on-new-hazards")
    rc, d = diff_json(capsys, *gates, log, log)
    assert rc == 0
    assert d["changed"] is False and d["regressed"] is False and d["regressions"] == []
    assert [(r["function"], r["file"], r["status"]) for r in d["functions"]] == [
        ("eval", "eval.py", "both"), ("step", "train.py", "both")]
    for r in d["functions"]:
        assert r["recompiles_gained"] == 0 and r["new_causes"] == [] and \
            r["new_hazards"] == [] and r["total_s_change"] == 0
    assert d["summary"]["steps"]["base"] == d["summary"]["steps"]["new"]
    assert d["summary"]["steps"]["new"]["share"] == pytest.approx(3.0 / 3.21, abs=1e-3)
    rc, out, _ = run(capsys, "diff", *gates, log, log)
    assert rc == 0 and "no change in compiles" in out and "(exit 0)" in out


def test_a_new_recompile_is_named_with_its_cause_paths_and_call_site_across_checkouts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """BASE and NEW at different absolute paths; NEW has a shape recompile with other values
    (not a new cause) and a dtype recompile of batch['x'] (a new cause)."""
    base = write(tmp_path / "base.log", base_log("/home/a/proj"))
    new_root = "/ci/build/checkout"
    new = write(tmp_path / "new.log", base_log(new_root) + [
        compile_line("step", 1.0, root=new_root, count=3, **shape("f32[32,8]", "f32[5,8]")),
        compile_line("step", 0.7, root=new_root, count=4, cause_kind="dtype",
                     callsite=f"{new_root}/src/main.py:77",
                     diff=[{"path": "batch['x']", "kind": "dtype", "before": "f32[32,8]",
                            "after": "bf16[32,8]"}]),
    ])
    rc, d = diff_json(capsys, "--max-new-recompiles", "0", base, new)
    assert rc == 1
    step = next(r for r in d["functions"] if r["function"] == "step")
    assert d["functions"][0] is not None and d["functions"][0]["function"] == "step"
    assert step["status"] == "both" and step["file"] == "train.py"
    assert step["recompiles"] == {"base": 1, "new": 3} and step["recompiles_gained"] == 2
    assert {c["cause"]: (c["base"], c["new"]) for c in step["recompiles_by_cause"]} == {
        "shape": (1, 2), "dtype": (0, 1)}
    assert step["new_causes"] == [{
        "cause": "dtype", "paths": ["batch['x']"], "count": 1,
        "example": "batch['x']: f32[32,8] -> bf16[32,8]", "callsite": "main.py:77"}]
    assert d["summary"]["functions"] == {"base": 2, "new": 2, "both": 2, "new_only": 0,
                                         "gone": 0, "moved": 0}
    assert d["regressions"] == [
        "2 recompiles gained (at most 0 allowed): step +2"]
    assert diff_json(capsys, "--max-new-recompiles", "2", base, new)[0] == 0
    rc, out, _ = run(capsys, "diff", "--max-new-recompiles", "0", base, new)
    assert rc == 1
    assert "+ new cause dtype [batch['x']] x1 at main.py:77" in out
    assert "recompiles by cause: shape 1 -> 2, dtype 0 -> 1" in out
    assert "regressed (exit 1):" in out


def test_functions_are_matched_by_name_file_and_order_not_by_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def log(root: str, shift: int, *, gone: bool = False, extra: bool = False) -> list[str]:
        lines = [compile_line("f", 1.0, root=root, file="pkg/a/model.py", line=10 + shift),
                 compile_line("f", 1.0, root=root, file="pkg/a/model.py", line=50 + shift),
                 compile_line("g", 1.0, root=root, file="pkg/a/model.py", line=70 + shift)]
        if not gone:
            lines.append(compile_line("f", 1.0, root=root, file="pkg/b/model.py", line=10))
        if extra:
            lines.append(compile_line("h", 1.0, root=root, file="pkg/b/model.py", line=90))
        return lines

    base = write(tmp_path / "base.log", log("/home/a/src", 0))
    new = write(tmp_path / "new.log", log("/tmp/ckout", 3, gone=True, extra=True))
    _, d = diff_json(capsys, base, new)
    got = sorted((r["function"], r["file"], r["line"]["base"], r["line"]["new"], r["status"])
                 for r in d["functions"])
    assert got == [("f", "a/model.py", 10, 13, "both"), ("f", "a/model.py", 50, 53, "both"),
                   ("f", "b/model.py", 10, None, "gone"), ("g", "a/model.py", 70, 73, "both"),
                   ("h", "b/model.py", None, 90, "new")]
    assert d["summary"]["functions"]["new_only"] == 1 and d["summary"]["functions"]["gone"] == 1


def test_a_renamed_file_is_matched_by_name_not_read_as_every_function_new_and_gone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train.py renamed train_v2.py (eval.py unchanged): by default its functions are
    matched by name, as ``--match name`` does; ``--match file`` keeps them apart."""
    base = write(tmp_path / "base.log", base_log())
    new = write(tmp_path / "new.log", [line.replace("src/train.py", "src/train_v2.py")
                                       for line in base_log()])
    gates = ("--max-new-recompiles", "0", "--fail-on-new-hazards")
    for match in ((), ("--match", "auto"), ("--match", "name")):
        rc, d = diff_json(capsys, *match, *gates, base, new)
        assert rc == 0 and d["changed"] is False and d["regressions"] == []
        assert d["match"] == (match[1] if match else "auto")
        assert [(r["function"], r["file"], r["moved_from"], r["status"])
                for r in d["functions"]] == [("eval", "eval.py", None, "both"),
                                             ("step", "train_v2.py", "train.py", "both")]
        assert d["summary"]["functions"] == {"base": 2, "new": 2, "both": 2, "new_only": 0,
                                             "gone": 0, "moved": 1}
        assert d["summary"]["recompiles_gained"] == 0
    rc, out, _ = run(capsys, "diff", *gates, base, new)
    assert rc == 0 and "train_v2.py:10 (was train.py)" in out
    assert "matched in another file: 1" in out
    # by file only, as before: step gone and new again, its recompile "gained"
    rc, d = diff_json(capsys, "--match", "file", *gates, base, new)
    assert rc == 1 and d["summary"]["functions"]["gone"] == 1
    assert sorted((r["function"], r["status"]) for r in d["functions"]) == [
        ("eval", "both"), ("step", "gone"), ("step", "new")]
    assert run(capsys, "diff", "--match", "path", base, new)[0] == 2


def test_auto_matching_never_guesses_between_functions_of_one_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two functions named f left unmatched in NEW and one in BASE: ``auto`` pairs none of
    them, ``name`` pairs them in order of file and line (the same file first)."""
    base = write(tmp_path / "base.log", [
        compile_line("f", 1.0, file="src/old.py", line=5),
        compile_line("f", 1.0, file="src/keep.py", line=5)])
    new = write(tmp_path / "new.log", [
        compile_line("f", 1.0, file="src/keep.py", line=5),
        compile_line("f", 1.0, file="src/a.py", line=7),
        compile_line("f", 1.0, file="src/b.py", line=9)])
    _, d = diff_json(capsys, base, new)
    assert sorted((r["file"], r["moved_from"], r["status"]) for r in d["functions"]) == [
        ("a.py", None, "new"), ("b.py", None, "new"), ("keep.py", None, "both"),
        ("old.py", None, "gone")]
    _, d = diff_json(capsys, "--match", "name", base, new)
    assert sorted((r["file"], r["moved_from"], r["status"]) for r in d["functions"]) == [
        ("a.py", "old.py", "both"), ("b.py", None, "new"), ("keep.py", None, "both")]


def test_library_files_match_across_environments() -> None:
    base, new = _compare.file_keys(
        {"/usr/lib/python3/dist-packages/flax/linen/module.py", "/home/a/proj/train.py",
         "/home/a/proj/models/mlp.py"},
        {"/venv/lib/python3.12/site-packages/flax/linen/module.py",
         "/ci/w/proj/train.py", "/ci/w/proj/models/mlp.py", "/ci/w/proj/models/new.py"})
    assert base == {"/usr/lib/python3/dist-packages/flax/linen/module.py":
                    "<lib>/flax/linen/module.py",
                    "/home/a/proj/train.py": "train.py",
                    "/home/a/proj/models/mlp.py": "models/mlp.py"}
    assert new["/venv/lib/python3.12/site-packages/flax/linen/module.py"] == \
        "<lib>/flax/linen/module.py"
    assert new["/ci/w/proj/models/new.py"] == "models/new.py"
    # one file each: its base name
    assert _compare.file_keys({"/a/x/t.py"}, {"/b/y/t.py"}) == ({"/a/x/t.py": "t.py"},
                                                             {"/b/y/t.py": "t.py"})


def test_compile_time_increase_past_the_ratio_and_the_floor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.log", [compile_line("f", 10.0), compile_line("g", 0.01)])
    slower = write(tmp_path / "slower.log", [compile_line("f", 13.0), compile_line("g", 0.01),
                                             compile_line("new_fn", 50.0, file="src/n.py")])
    rc, d = diff_json(capsys, "--max-compile-time-increase", "20%", base, slower)
    assert rc == 1 and d["summary"]["matched_compile_s_ratio"] == pytest.approx(0.2998, abs=1e-3)
    assert d["regressions"][0].startswith("compile time of the functions in both runs up 3.000 s")
    # a new function's seconds are not in the ratio: 30 % < 40 %
    assert diff_json(capsys, "--max-compile-time-increase", "40", base, slower)[0] == 0
    # under the floor, never a failure
    assert diff_json(capsys, "--max-compile-time-increase", "20%", "--compile-time-floor",
                     "5", base, slower)[0] == 0
    tiny = write(tmp_path / "tiny.log", [compile_line("f", 10.0), compile_line("g", 0.05)])
    assert diff_json(capsys, "--max-compile-time-increase", "0%", base, tiny)[0] == 0
    # rows sorted by compile seconds gained
    _, d = diff_json(capsys, base, slower)
    assert [r["function"] for r in d["functions"]] == ["new_fn", "f", "g"]


def test_new_hazards_fail_with_the_flag_and_notes_never(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.log", base_log())
    note = write(tmp_path / "note.log", base_log() + [
        hazard_line("step", "function_identity", "", level="info")])
    warned = write(tmp_path / "warned.log", base_log() + [
        hazard_line("step", "static_argument", "n")])
    assert diff_json(capsys, "--fail-on-new-hazards", base, note)[0] == 0
    assert diff_json(capsys, base, warned)[0] == 0
    rc, d = diff_json(capsys, "--fail-on-new-hazards", base, warned)
    assert rc == 1 and d["summary"]["new_hazards"] == 1
    step = next(r for r in d["functions"] if r["function"] == "step")
    assert [(h["kind"], h["path"], h["level"]) for h in step["new_hazards"]] == [
        ("static_argument", "n", "warning")]
    assert d["regressions"] == ["1 new hazards: step (static_argument n)"]
    # the hazard already in BASE is not new
    assert diff_json(capsys, "--fail-on-new-hazards", warned, warned)[0] == 0


def test_report_json_and_gz_inputs_compare_like_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.log", base_log())
    new = write(tmp_path / "new.log", base_log() + [
        compile_line("step", 0.7, count=3, cause_kind="dtype",
                     diff=[{"path": "batch['x']", "kind": "dtype", "before": "f32",
                            "after": "bf16"}]),
        hazard_line("step", "shape", "batch")])
    report = tmp_path / "new.json"
    assert _cli.main(["report", "--format", "json", "-o", str(report), new]) == 0
    gz = tmp_path / "new.log.gz"
    gz.write_bytes(gzip.compress(Path(new).read_bytes()))
    capsys.readouterr()
    args = ("--max-new-recompiles", "0", "--fail-on-new-hazards")
    rc, from_log = diff_json(capsys, *args, base, new)
    for other in (str(report), str(gz)):
        rc2, d = diff_json(capsys, *args, base, other)
        assert rc2 == rc == 1
        assert d["functions"] == from_log["functions"]
        assert d["regressions"] == from_log["regressions"]
    assert d["new"]["kind"] == "log" and diff_json(capsys, base, str(report))[1]["new"][
        "kind"] == "report JSON"
    # a report's JSON has no steps: the share is the log's only, and the text says why
    assert diff_json(capsys, base, str(report))[1]["summary"]["steps"]["new"] is None
    _, text, _ = run(capsys, "diff", base, str(report))
    [steps] = [ln for ln in text.splitlines() if ln.startswith("steps:")]
    assert steps == ("steps: compiling 93% of step time in BASE (NEW: a report's JSON holds "
                     "no steps)"), text
    # a report from before cause_paths and hazards: causes compare on their kinds
    old = tmp_path / "old.json"
    rows = json.loads(report.read_text())
    for r in rows:
        del r["cause_paths"], r["hazards"], r["p50_s"]
    old.write_text(json.dumps(rows))
    rc, d = diff_json(capsys, "--max-new-recompiles", "0", base, str(old))
    step = next(r for r in d["functions"] if r["function"] == "step")
    assert rc == 1 and [(c["cause"], c["paths"]) for c in step["new_causes"]] == [
        ("dtype", None)]
    assert step["p50_s"]["new"] is None and step["new_hazards"] == []


def test_a_report_json_past_the_row_cap_is_folded_into_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_jax._report._compare_runs import _read as _runs_read

    monkeypatch.setattr(_runs_read, "DEFAULT_MAX_FUNCTIONS", 3)
    rows = [{"function": f"f{i}", "file": "/src/a.py", "line": i, "row_kind": "function",
             "compiles": 2, "recompiles": 1, "total_s": 1.0,
             "causes": [{"cause": "shape", "count": 1, "seconds": 0.5}]} for i in range(10)]
    report = tmp_path / "many.json"
    report.write_text(json.dumps(rows + [{"function": "no counts"}]))
    run_ = _runs_read.load_run(str(report), "BASE")
    assert [r["function"] for r in run_.rows] == ["f0", "f1", "f2", "(other)"]
    other = run_.rows[-1]
    assert (other["compiles"], other["recompiles"], other["total_s"]) == (14, 7, 7.0)
    assert other["causes"] == [{"cause": "shape", "count": 7, "seconds": 3.5}]
    assert run_.skipped == 1 and run_.kind == "report JSON"


def test_stdin_and_a_pipe_read_like_files(tmp_path: Path) -> None:
    base = write(tmp_path / "base.log", base_log())
    new = write(tmp_path / "new.log", base_log() + [
        compile_line("step", 0.7, count=3, cause_kind="dtype")])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for stdin_file, argv in ((new, [base, "-"]), (base, ["-", new])):
        with open(stdin_file, "rb") as stdin:
            proc = subprocess.run([sys.executable, "-m", "otel_jax", "diff", "--format", "json",
                                   "--max-new-recompiles", "0", *argv], stdin=stdin,
                                  capture_output=True, timeout=120, env=env)
        assert proc.returncode == 1, proc.stderr
        assert json.loads(proc.stdout)["summary"]["recompiles_gained"] == 1
    proc = subprocess.run([sys.executable, "-m", "otel_jax", "diff", "-", "-"],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120, env=env)
    assert proc.returncode == 2 and b"cannot both be stdin" in proc.stderr


HUGE = 1 << 16


@pytest.mark.parametrize("case", ["missing", "directory", "binary", "empty", "huge line",
                                  "deep log line", "deep report JSON", "not rows",
                                  "corrupt gz", "big report JSON"])
def test_unreadable_input_is_exit_2_and_one_line(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_read, "MAX_LINE_BYTES", 4096)
    good = write(tmp_path / "good.log", base_log())
    bad = tmp_path / ("bad.log.gz" if case == "corrupt gz" else "bad.log")
    if case == "directory":
        bad.mkdir()
    elif case == "binary":
        bad.write_bytes(bytes(range(256)) * 400 + b"\n\xff\xfe\x00" * 100)
    elif case == "empty":
        bad.write_bytes(b"\n  \n")
    elif case == "huge line":
        bad.write_bytes(b'{"event": "jax.compile", "diff": [' + b"1, " * HUGE + b"1]}\n")
    elif case == "deep log line":
        bad.write_bytes(b'{"event": "jax.compile", "x": ' + b"[" * 5000 + b"]" * 5000
                        + b"}\n")
    elif case == "deep report JSON":
        bad.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    elif case == "not rows":
        bad.write_text(json.dumps([{"function": "f"}, 3, "x"]))
    elif case == "corrupt gz":
        data = gzip.compress("\n".join(base_log() * 200).encode())
        bad.write_bytes(data[:40] + bytes(300) + data[340:])
    elif case == "big report JSON":
        from otel_jax._report._compare_runs import _read as _runs_read

        monkeypatch.setattr(_runs_read, "MAX_REPORT_JSON_BYTES", 1000)
        bad.write_text(json.dumps([json.loads(compile_line("f", 1.0))] * 50))
    for argv in ((str(bad), good), (good, str(bad))):
        rc, out, err = run(capsys, "diff", *argv)
        assert rc == 2, (case, err)
        assert out == "" and "Traceback" not in err
        assert len(err.splitlines()) == 1 and err.startswith("otel-jax diff: ")
        assert ("BASE" if argv[0] == str(bad) else "NEW") in err


def test_usage_errors_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good.log", base_log())
    for argv in ((good,), ("--max-new-recompiles", "-1", good, good),
                 ("--max-compile-time-increase", "lots", good, good),
                 ("--format", "xml", good, good)):
        assert run(capsys, "diff", *argv)[0] == 2


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.refs += [v or "" for k, v in attrs if k in ("src", "href")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_markdown_and_html_name_the_change_and_escape_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = 'evil<script>alert(1)</script>\x1b[2J|*x*'
    base = write(tmp_path / "base.log", base_log())
    new = write(tmp_path / "new.log", base_log() + [
        compile_line(evil, 0.3),
        compile_line("step", 0.7, count=3, cause_kind="dtype",
                     diff=[{"path": "batch['x']", "kind": "dtype", "before": "f32",
                            "after": "bf16"}])])
    rc, table, _ = run(capsys, "diff", base, new)
    assert rc == 0 and "\x1b" not in table and "evil<script>alert(1)</script>\\x1b[2J" in table
    assert table.count("\n+ ") == 0 and "(new)" in table
    rc, md, _ = run(capsys, "diff", "--format", "markdown", "--max-new-recompiles", "0",
                    base, new)
    assert rc == 1 and "**new cause** `dtype [batch['x']] x1 at main.py:120" in md
    assert "<script>" not in md and "\x1b" not in md and "evil&lt;script>alert" in md
    # an arrow reads as one, in the Markdown as on the page: with every < escaped, > opens
    # nothing
    assert "&gt;" not in md and "| 2 -> 3 | 1 -> 2 |" in md and "compiles 3 -> 5" in md
    page = tmp_path / "diff.html"
    assert _cli.main(["diff", "--format", "html", "-o", str(page), "--max-new-recompiles",
                      "0", base, new]) == 1
    text = page.read_text()
    parser = _Page()
    parser.feed(text)
    assert parser.tags.count("script") == 1  # the page's own, its hash in the policy
    assert "default-src 'none'" in text and "\x1b" not in text
    assert [r for r in parser.refs if not r.startswith("#")] == []  # nothing fetched
    body = "".join(parser.text)
    assert "regressed" in body and "new cause" in body and "dtype [batch['x']]" in body
    assert "evil<script>alert(1)</script>" in body  # shown as text, never as markup
    assert re.search(r'id="diff-table"', text) and re.search(r'id="verdict"', text)


# -- the demo, twice ----------------------------------------------------------------------


def _demo(copy: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen([sys.executable, str(copy), "--epochs", "2", "--samples",
                                 "360"], stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                cwd=copy.parent)


@pytest.mark.slow
def test_two_runs_of_the_demo_one_with_an_added_recompile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo as it is, and a copy in another checkout whose loop also calls train_step
    with a bfloat16 batch: the diff names train_step, the dtype cause of batch['x'] and the
    line of that call; the evaluation lambda, whose line moved down by one, is still matched."""
    source = (ROOT / "examples" / "train.py").read_text()
    anchor = "            # A jit re-created every epoch"
    assert source.count(anchor) == 1
    added = ('            train_step(params, {**batch, "x": batch["x"].astype(jnp.bfloat16)}, '
             "lr, config)\n")
    changed = source.replace(anchor, added + anchor)
    line = changed.splitlines().index(added.rstrip("\n")) + 1
    base_copy = tmp_path / "base" / "examples" / "train.py"
    new_copy = tmp_path / "other" / "checkout" / "examples" / "train.py"
    for path, text in ((base_copy, source), (new_copy, changed)):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_JAX_HAZARDS": "on"}
    base, new = tmp_path / "base.log", tmp_path / "new.log"
    procs = [_demo(base_copy, base, env), _demo(new_copy, new, env)]
    for proc, log in zip(procs, (base, new)):
        assert proc.wait(timeout=600) == 0, log.read_text()[-2000:]

    rc, out, err = run(capsys, "diff", "--max-new-recompiles", "0", str(base), str(new))
    assert rc == 1, err
    assert re.search(rf"\+ new cause dtype \[batch\['x'\]\] x\d at train\.py:{line}", out)
    rc, d = diff_json(capsys, "--max-new-recompiles", "0", "--fail-on-new-hazards",
                      str(base), str(new))
    by_name = {r["function"]: r for r in d["functions"]}
    step = by_name["train_step"]
    assert rc == 1 and step["status"] == "both" and step["recompiles_gained"] >= 1
    assert {(c["cause"], tuple(c["paths"] or ()), c["callsite"])
            for c in step["new_causes"]} == {("dtype", ("batch['x']",), f"train.py:{line}")}
    assert d["regressions"][0].endswith(f"train_step +{step['recompiles_gained']}")
    # the same hazard (the weakly typed learning rate) in both runs is not new
    assert step["new_hazards"] == [] and d["summary"]["new_hazards"] == 0
    for log in (base, new):
        assert '"event": "jax.compile.hazard"' in log.read_text()
    lam = by_name["main.<locals>.<lambda>"]
    assert lam["status"] == "both" and lam["line"]["new"] == lam["line"]["base"] + 1
    assert d["summary"]["steps"]["new"]["share"] is not None

    # the same log twice: no change, exit 0, whatever the thresholds
    rc, out, _ = run(capsys, "diff", "--max-new-recompiles", "0", "--fail-on-new-hazards",
                     "--max-compile-time-increase", "0%", str(new), str(new))
    assert rc == 0 and "no change in compiles" in out

    # NEW as a report's JSON, and gzipped: the same verdict and functions
    report = tmp_path / "new.json"
    assert _cli.main(["report", "--format", "json", "-o", str(report), str(new)]) == 0
    gz = tmp_path / "new.log.gz"
    with new.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    capsys.readouterr()
    for other in (report, gz):
        rc2, d2 = diff_json(capsys, "--max-new-recompiles", "0", str(base), str(other))
        assert rc2 == 1 and d2["functions"] == d["functions"]


PROGRAM = """
import jax
import jax.numpy as jnp

import otel_jax

otel_jax.install()


@jax.jit
def step(x):
    return x * 2


def evaluate(x):
    return jax.jit(lambda y: y + 1)(x)


for n in (4, 5, 6):
    step(jnp.ones(n))
evaluate(jnp.ones(3))
# every line written before the exit, however loaded the machine
assert otel_jax.flush(timeout=None)
"""


@pytest.mark.slow
def test_one_program_run_from_two_file_names_is_no_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same program run as prog.py, then renamed prog_v2.py: its functions are the
    same, nothing is gained (exit 0 under every threshold); matched by file only, every
    function reads as gone and new again, its recompiles gained."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    logs = []
    for name in ("prog.py", "prog_v2.py"):
        (tmp_path / name).write_text(PROGRAM)
        log = tmp_path / f"{name}.log"
        with log.open("wb") as stderr:
            proc = subprocess.run([sys.executable, name], stdout=subprocess.DEVNULL,
                                  stderr=stderr, env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, log.read_text()[-2000:]
        logs.append(str(log))
    gates = ("--max-new-recompiles", "0", "--fail-on-new-hazards")
    rc, d = diff_json(capsys, *gates, *logs)
    assert rc == 0 and d["regressions"] == [] and d["summary"]["recompiles_gained"] == 0
    functions = {(r["function"], r["file"], r["moved_from"], r["status"])
                 for r in d["functions"] if r["row_kind"] == "function"}
    assert functions == {("step", "prog_v2.py", "prog.py", "both"),
                         ("evaluate.<locals>.<lambda>", "prog_v2.py", "prog.py", "both")}
    step = next(r for r in d["functions"] if r["function"] == "step")
    assert step["recompiles"] == {"base": 2, "new": 2}
    rc, d = diff_json(capsys, "--match", "file", *gates, *logs)
    assert rc == 1 and d["summary"]["recompiles_gained"] == 2
    assert {r["status"] for r in d["functions"] if r["row_kind"] == "function"} == {
        "new", "gone"}


# -- the page in a real browser -----------------------------------------------------------

INJECTED = ('evil<script>window.__owned=1</script><img src=x onerror="window.__owned=2">')


@pytest.fixture(scope="module")
def chromium() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _browser import find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium; `make test` installs it "
                    "where it can)")
    return binary


@pytest.mark.slow
def test_the_diff_page_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    """The page of a diff with a new function whose name is an injected script, rendered by
    headless Chromium: no console error (a Content Security Policy violation would be one),
    no request, the verdict and the table are there, the table sorts, the script never ran."""
    from _browser import Browser

    base = write(tmp_path / "base.log", base_log())
    new = write(tmp_path / "new.log", base_log() + [
        compile_line(INJECTED, 4.0),
        compile_line("step", 0.7, count=3, cause_kind="dtype",
                     diff=[{"path": "batch['x']", "kind": "dtype", "before": "f32",
                            "after": "bf16"}]),
        hazard_line("step", "static_argument", "n")])
    page = tmp_path / "diff.html"
    assert _cli.main(["diff", "--format", "html", "-o", str(page), "--fail-on-new-hazards",
                      base, new]) == 1
    with Browser(chromium) as browser:
        browser.open(page)
        found = browser.evaluate("""(() => {
            const q = (s) => document.querySelectorAll(s).length;
            return {rows: q("#diff-table tbody tr"), causes: q(".new-cause"),
                    hazards: q(".new-hazard"), regressions: q("#regressions li"),
                    verdict: document.getElementById("verdict").textContent,
                    owned: typeof window.__owned, injected: q("script") + q("img"),
                    evilText: document.body.textContent.includes("evil<script>")};
        })()""")
        column = ("Array.from(document.querySelectorAll('#diff-table tbody tr'))"
                  ".map(r => Number(r.cells[6].getAttribute('data-v')))")
        click = "document.querySelectorAll('#diff-table th')[6].click()"
        browser.evaluate(click)
        descending = browser.evaluate(column)
        browser.evaluate(click)
        ascending = browser.evaluate(column)
        console, requests = list(browser.console), list(browser.requests)

    assert console == []
    page_url = page.resolve().as_uri()
    assert [u for u in requests if u != page_url and not u.startswith("data:")] == []
    assert found["rows"] == 3 and found["causes"] == 1 and found["hazards"] == 1
    assert found["regressions"] == 1 and found["verdict"].startswith("regressed")
    assert found["owned"] == "undefined" and found["injected"] == 1  # the page's script only
    assert found["evilText"]
    assert descending == sorted(descending, reverse=True) and ascending == sorted(descending)
    assert len(set(descending)) > 1
