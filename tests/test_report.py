"""Tests for ``otel-jax report`` (otel_jax._report).

The report must give exact numbers for a known log, render all three formats,
read stdin, and stay within a small, constant amount of memory on a
1,000,000-line log.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from otel_jax import _cli
from otel_jax._report import _aggregate, _bounded, _read, _text

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The package directory whose report modules the memory test loads without its __init__.
PACKAGE_DIR = REPO_ROOT / "otel_jax"


def _env() -> dict[str, str]:
    """Environment for child interpreters: the repository root importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def compile_line(function: str, compile_s: float, **fields: Any) -> str:
    """One ``jax.compile`` log line shaped like otel_jax's structlog output."""
    event: dict[str, Any] = {
        "event": "jax.compile",
        "level": "info",
        "timestamp": "2026-11-30T03:30:00.123456Z",
        "logger": "otel_jax",
        "function": function,
        "file": f"/src/{function}.py",
        "line": 10,
        "callsite": "/src/main.py:120",
        "count": 1,
        "is_recompile": False,
        "eager_op": False,
        "persistent_cache_hit": False,
        "after_warmup": False,
        "cause_kind": "first_compile",
        "compile_s": compile_s,
        "trace_s": compile_s / 4,
        "lower_s": compile_s / 4,
        "backend_compile_s": compile_s / 2,
        "device_platform": "cpu",
        "device_kind": "cpu",
        "device_count": 1,
        "process_index": 0,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": "00f067aa0ba902b7",
    }
    event.update(fields)
    return json.dumps(event)


def shape_fields(before: str, after: str, count: int) -> dict[str, Any]:
    return {
        "count": count,
        "is_recompile": True,
        "cause_kind": "shape",
        "cause": f"batch['x']: {before} -> {after}",
        "diff": [{"path": "batch['x']", "kind": "shape", "before": before, "after": after}],
        "hint": "pad or bucket the batch to a few fixed shapes",
    }


SHAPE_HINT = "pad or bucket the batch to a few fixed shapes"
WEAK_HINT = "pass jnp.asarray(x, dtype) instead of a Python scalar"


def known_log() -> str:
    """train_step: 1 first + 3 shape + 2 weak_type recompiles; eval_step: 1
    first; one eager op; plus junk and a non-compile structlog line."""
    lines = [
        compile_line("train_step", 2.5),
        "this is not json",
        compile_line("train_step", 1.0, **shape_fields("f32[32,8]", "f32[17,8]", 2)),
        json.dumps({"event": "training step done", "level": "info", "step": 1}),
        compile_line("train_step", 1.5, **shape_fields("f32[32,8]", "f32[5,8]", 3),
                     after_warmup=True),
        "",
        compile_line("train_step", 1.0, **shape_fields("f32[32,8]", "f32[17,8]", 4),
                     after_warmup=True),
        # weak_type recompiles: no "diff" (the "cause" string is the fallback),
        # and the second one lacks "is_recompile" so "count" decides.
        compile_line("train_step", 0.5, count=5, is_recompile=True,
                     cause_kind="weak_type", cause="lr: weak f32[] -> f32[]",
                     hint=WEAK_HINT),
        compile_line("train_step", 0.75, count=6, cause_kind="weak_type",
                     cause="lr: weak f32[] -> f32[]", hint=WEAK_HINT),
        '{"event": "jax.compile", "function": "broken"',  # truncated line
        '["jax.compile"]',  # JSON, but not an object
        compile_line("eval_step", 0.25),
        compile_line("add", 10.0, eager_op=True),
    ]
    # the second weak_type line must not carry is_recompile
    weak = json.loads(lines[8])
    del weak["is_recompile"]
    lines[8] = json.dumps(weak)
    return "\n".join(lines) + "\n"


@pytest.fixture()
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.log"
    path.write_text(known_log())
    return path


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = _cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def json_report(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    rc, out, _ = run_main(capsys, "report", "--format", "json", *argv)
    assert rc == 0
    return json.loads(out)


# -- exact numbers -----------------------------------------------------------


def test_json_exact_numbers(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "report", "--format", "json", str(log_file))
    assert rc == 0
    rows = json.loads(out)

    # Sorted by total compile seconds; the eager aggregate is last even though
    # its 10 s would otherwise put it first.
    assert [r["function"] for r in rows] == ["train_step", "eval_step", "(eager ops)"]
    train, evals, eager = rows

    assert train["file"] == "/src/train_step.py" and train["line"] == 10
    assert train["row_kind"] == "function"
    assert train["compiles"] == 6
    assert train["first_compiles"] == 1
    assert train["recompiles"] == 5
    assert train["recompiles_after_warmup"] == 2
    assert train["total_s"] == pytest.approx(7.25)
    assert train["recompile_s"] == pytest.approx(4.75)
    assert train["backend_compile_s"] == pytest.approx(7.25 / 2)
    # nearest-rank p95 of [0.5, 0.75, 1.0, 1.0, 1.5, 2.5] is the 6th value
    assert train["p95_s"] == pytest.approx(2.5, rel=0.02)
    assert train["max_s"] == pytest.approx(2.5)

    causes = {c["cause"]: c for c in train["causes"]}
    assert list(causes) == ["shape", "weak_type"]  # most frequent first
    assert "first_compile" not in causes
    shape, weak = causes["shape"], causes["weak_type"]
    assert shape["count"] == 3
    assert shape["seconds"] == pytest.approx(3.5)
    assert shape["top_diff"] == "batch['x']: f32[32,8] -> f32[17,8]"
    assert shape["top_diff_count"] == 2
    assert shape["hint"] == SHAPE_HINT
    assert weak["count"] == 2
    assert weak["seconds"] == pytest.approx(1.25)
    assert weak["top_diff"] == "lr: weak f32[] -> f32[]"  # "cause" fallback
    assert weak["top_diff_count"] == 2
    assert weak["hint"] == WEAK_HINT

    assert evals["compiles"] == 1 and evals["recompiles"] == 0
    assert evals["total_s"] == pytest.approx(0.25)
    assert evals["p95_s"] == pytest.approx(0.25)
    assert evals["causes"] == []

    assert eager["row_kind"] == "eager_ops"
    assert eager["compiles"] == 1 and eager["total_s"] == pytest.approx(10.0)
    assert eager["file"] is None and eager["line"] is None

    # 4 skipped: not JSON, another event, truncated JSON, a JSON array; the
    # blank line is not counted.
    assert "8 jax.compile events" in err
    assert "skipped 4 lines" in err

    # Stable key order.
    assert list(train) == [
        "function", "file", "line", "row_kind", "compiles", "first_compiles",
        "recompiles", "recompiles_after_warmup", "persistent_cache_hits",
        "total_s", "recompile_s", "p50_s", "p95_s", "max_s", "trace_s", "lower_s",
        "backend_compile_s", "causes", "cause_paths", "hazards", "largest_program", "callsites",
        "ops", "ops_more",
        "program", "program_files", "program_files_more",
    ]
    # the keys ``otel-jax diff`` compares on: the median, and each recompile's cause kind
    # with the paths its diff changed (no values), the first example and call site kept
    assert train["p50_s"] == pytest.approx(1.0)
    assert train["cause_paths"] == [
        {"cause": "shape", "paths": ["batch['x']"], "count": 3,
         "example": "batch['x']: f32[32,8] -> f32[17,8]", "callsite": "/src/main.py:120"},
        {"cause": "weak_type", "paths": [], "count": 2,
         "example": "lr: weak f32[] -> f32[]", "callsite": "/src/main.py:120"}]
    assert train["hazards"] is None and evals["cause_paths"] == []
    assert train["largest_program"] is None  # no line gave XLA's memory analysis
    assert list(shape) == ["cause", "count", "seconds", "top_diff", "top_diff_count", "hint",
                           "memory_change", "memory_change_count"]
    assert shape["memory_change"] is None  # no line said a program needed more memory


def test_include_eager_top_and_function_filter(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = json_report(capsys, "--include-eager", str(log_file))
    assert [r["function"] for r in rows] == ["add", "train_step", "eval_step"]
    assert [r["row_kind"] for r in rows] == ["eager_op", "function", "function"]

    rows = json_report(capsys, "--top", "1", str(log_file))
    assert [r["function"] for r in rows] == ["train_step", "(eager ops)"]

    rows = json_report(capsys, "--function", "eval_step", str(log_file))
    assert [r["function"] for r in rows] == ["eval_step"]

    rows = json_report(capsys, "--function", "eval_step", "--function", "(eager ops)",
                       str(log_file))
    assert [r["function"] for r in rows] == ["eval_step", "(eager ops)"]

    rc, out, err = run_main(capsys, "report", "--function", "nope", "--format", "json",
                            str(log_file))
    assert rc == 0 and json.loads(out) == []
    assert "filtered out" in err


def test_the_eager_ops_row_names_the_lines_that_ran_them_not_causes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A primitive's params compared across two different ops read as a cause with a hint
    # meant for the user's own functions: the row keeps only where they ran.
    lines = [compile_line("broadcast_in_dim", 0.5, eager_op=True, count=2, is_recompile=True,
                          cause_kind="static_argument", cause="params.shape: (3,) -> (4,)",
                          hint="keep it to a few values", callsite=f"/src/main.py:{n}")
             for n in (7, 7, 7, 9, 11, 12, 13, 14)]
    lines.append(compile_line("add", 4.0, eager_op=True, callsite="/src/main.py:30"))
    log = tmp_path / "eager.log"
    log.write_text("\n".join(lines) + "\n")
    [row] = json_report(capsys, str(log))
    assert row["function"] == "(eager ops)" and row["compiles"] == 9
    # each op compiles apart: none is a recompile; counted by op instead
    assert row["recompiles"] == 0 and row["causes"] == [] and row["cause_paths"] == []
    assert row["ops"] == [{"op": "broadcast_in_dim", "compiles": 8, "seconds": 4.0},
                          {"op": "add", "compiles": 1, "seconds": 4.0}]
    assert row["ops_more"] == 0
    assert row["callsites"] == [
        {"callsite": "/src/main.py:30", "count": 1, "seconds": 4.0},
        {"callsite": "/src/main.py:7", "count": 3, "seconds": 1.5},
        {"callsite": "/src/main.py:11", "count": 1, "seconds": 0.5},
        {"callsite": "/src/main.py:12", "count": 1, "seconds": 0.5},
        {"callsite": "/src/main.py:13", "count": 1, "seconds": 0.5}]
    rc, out, _ = run_main(capsys, "report", str(log))
    assert rc == 0 and "  - at /src/main.py:7: 3 compiles (1.500 s)" in out.splitlines()
    assert "hint" not in out and "static_argument" not in out


def test_hazard_lines_are_listed_on_their_function(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def hazard(kind: Any, path: Any, level: Any = "warning", **fields: Any) -> str:
        return json.dumps({"level": level, "event": "jax.compile.hazard",
                           "function": "train_step", "file": "/src/train_step.py", "line": 10,
                           "hazard_kind": kind, "path": path, "hazard": f"{path} recompiles",
                           "hint": "fix", **fields})

    path = tmp_path / "hazards.log"
    path.write_text("\n".join([
        compile_line("train_step", 1.0), hazard("weak_type", "lr"), hazard("weak_type", "lr"),
        hazard("function_identity", "", level="info"), hazard("shape", 7, level="loud"),
        hazard(None, "x"), hazard("dtype", "y", function=""), '{"event": "jax.compile.hazard"',
        hazard("weak_type", "lr", function="eval_step"),
    ]) + "\n")
    rc, out, err = run_main(capsys, "report", "--format", "json", "--function", "train_step",
                            str(path))
    assert rc == 0 and "4 jax.compile.hazard events" in err and "skipped 3 lines" in err
    (row,) = json.loads(out)
    assert row["compiles"] == 1
    hazards = row["hazards"]
    assert (hazards["said"], hazards["came_true"], hazards["not_yet"]) == (4, 0, 4)
    assert [(h["kind"], h["path"], h["level"]) for h in hazards["list"]] == [
        ("weak_type", "lr", "warning"), ("weak_type", "lr", "warning"),
        ("function_identity", "", "info"), ("shape", "", "info")]


def test_function_cap_merges_into_other(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "many.log"
    path.write_text("".join(compile_line(f"f{i}", float(i + 1)) + "\n" for i in range(5)))
    rows = json_report(capsys, "--max-functions", "2", str(path))
    assert [r["function"] for r in rows] == ["f1", "f0", "(other)"]
    other = rows[-1]
    assert other["compiles"] == 3 and other["total_s"] == pytest.approx(3 + 4 + 5)
    assert other["p95_s"] == pytest.approx(5.0)


def test_eager_ops_call_sites_are_relative_to_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The program's own lines, as run from its folder: relative; a line elsewhere: whole.
    job = tmp_path / "job"
    lines = [compile_line("sin", 0.25, eager_op=True, callsite=f"{job / 'train.py'}:41"),
             compile_line("mul", 0.5, eager_op=True, callsite=f"{job / 'data' / 'io.py'}:7"),
             compile_line("add", 0.125, eager_op=True, callsite="/elsewhere/lib.py:3")]
    log = tmp_path / "eager.log"
    log.write_text("\n".join(lines) + "\n")
    job.mkdir()
    monkeypatch.chdir(job)
    rc, out, _ = run_main(capsys, "report", str(log))
    assert rc == 0
    assert out.splitlines() == [
        "no compiles of the program's functions",
        "JAX's eager ops (one primitive at a time, outside jit): 3 compiles, 0.875 s",
        "  by op: mul x1, sin x1, add x1",
        f"  - at {os.path.join('data', 'io.py')}:7: 1 compile (0.500 s)",
        "  - at train.py:41: 1 compile (0.250 s)",
        "  - at /elsewhere/lib.py:3: 1 compile (0.125 s)"]


# -- rendering ---------------------------------------------------------------


def test_table_output(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(capsys, "report", str(log_file))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split() == ["FUNCTION", "LOCATION", "COMPILES", "RECOMPILES",
                                "TOTAL_S", "P95_S", "RECOMPILE_S"]
    rows = [ln for ln in lines[1:] if not ln.startswith(" ")]
    # JAX's eager ops are no row: their one summary follows the table
    assert [r.split()[0] for r in rows[:2]] == ["train_step", "eval_step"]
    assert lines[-3:] == ["JAX's eager ops (one primitive at a time, outside jit): 1 compile, "
                          "10.000 s", "  by op: add x1",
                          "  - at /src/main.py:120: 1 compile (10.000 s)"]
    rows = rows[:2]
    assert rows[0].split() == ["train_step", "train_step.py:10", "6", "5", "7.250",
                               "2.500", "4.750"]
    assert rows[1].split() == ["eval_step", "eval_step.py:10", "1", "0", "0.250",
                               "0.250", "0.000"]
    # numbers are right-aligned: every row has the same length as the header
    # up to its last column
    assert len({len(r) for r in rows} | {len(lines[0])}) == 1
    assert "  - shape x3 (3.500 s): batch['x']: f32[32,8] -> f32[17,8] (x2)" in lines
    assert f"      hint: {SHAPE_HINT}" in lines
    assert "  - weak_type x2 (1.250 s): lr: weak f32[] -> f32[]" in lines


def test_table_fits_narrow_terminal(log_file: Path) -> None:
    with log_file.open("rb") as f:
        rows, _ = _aggregate.summarize(f)
    lines = _text.render_table(rows, width=50).splitlines()
    # function rows keep every number; cause and hint lines are clipped
    assert lines[1].split()[-5:] == ["6", "5", "7.250", "2.500", "4.750"]
    details = [ln for ln in lines if ln.startswith(" ")]
    assert details and all(len(ln) <= 50 for ln in details)
    assert any(ln.endswith("...") for ln in details)


def test_markdown_output(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(capsys, "report", "--format", "markdown", str(log_file))
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 2 + 2 + 5
    header, separator, *body = lines[:4]
    assert lines[4:] == ["", "**JAX's eager ops (one primitive at a time, outside jit): 1 "
                         "compile, 10.000 s**", "", "- by op: add x1",
                         "- at /src/main.py:120: 1 compile (10.000 s)"]
    n_cols = header.count("|") - 1
    assert n_cols == 9
    assert header.startswith("| Function | Location | Compiles |")
    cells = [c.strip() for c in separator.strip("|").split("|")]
    assert len(cells) == n_cols and all(set(c) <= set("-:") and "---" in c for c in cells)
    for row in body:
        # every row has the header's column count (escaped pipes excluded)
        assert row.startswith("| ") and row.endswith(" |")
        assert row.replace("\\|", "").count("|") - 1 == n_cols
    assert body[0].startswith("| train_step | train_step.py:10 | 6 | 5 | 7.250 | 2.500 | 4.750 |")
    assert "**shape** ×3 (3.500 s): `batch['x']: f32[32,8] -> f32[17,8]`" in body[0]
    assert SHAPE_HINT in body[0] and "<br>" in body[0]
    assert body[1].startswith("| eval_step |")


def test_markdown_escapes_pipes() -> None:
    rows, _ = _aggregate.summarize(io.BytesIO(
        (compile_line("f|g", 1.0, is_recompile=True, cause_kind="static_arg",
                      cause="mode: 'a|b' -> 'c'") + "\n").encode()
    ))
    out = _text.render(rows, "markdown")
    body = out.splitlines()[2]
    assert body.replace("\\|", "").count("|") - 1 == 9
    assert "f\\|g" in body and "'a\\|b'" in body


# -- inputs ------------------------------------------------------------------


def test_stdin_subprocess(log_file: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "otel_jax", "report", "--format", "json", "-"],
        input=log_file.read_bytes(), capture_output=True, cwd=REPO_ROOT, env=_env(),
        timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    rows = json.loads(proc.stdout)
    assert [r["function"] for r in rows] == ["train_step", "eval_step", "(eager ops)"]
    assert rows[0]["compiles"] == 6 and rows[0]["recompiles"] == 5
    assert b"skipped 4 lines" in proc.stderr

    # No file argument reads stdin too; the default format is the table.
    proc = subprocess.run(
        [sys.executable, "-m", "otel_jax", "report"],
        input=log_file.read_bytes(), capture_output=True, cwd=REPO_ROOT, env=_env(),
        timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines()[1].startswith("train_step ")


def test_gzip_input(log_file: Path, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    gz = tmp_path / "app.log.gz"
    gz.write_bytes(gzip.compress(log_file.read_bytes()))
    assert json_report(capsys, str(gz)) == json_report(capsys, str(log_file))


def test_bad_input_does_not_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_read, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "bad.log"
    weird = [
        b"\xff\xfe not utf-8 \"jax.compile\"",
        b'{"event": "jax.compile", "function": "x" ' + b"a" * 20000 + b"}",  # too long
        b'{"event": "jax.compile", "x": ' + b"[" * 3000 + b"]" * 3000 + b"}",  # too deep
        b'{"event": "jax.compile"}',  # nothing but the event
        b'{"event": "jax.compile", "function": 7, "line": "x", "compile_s": "slow",'
        b' "is_recompile": "yes", "count": 2.5, "diff": "oops", "cause_kind": 3}',
        b'{"event": "jax.compile", "function": "y", "compile_s": NaN, "count": 2,'
        b' "diff": [{"path": "a"}, 5, {"kind": "dtype"}]}',
        b'{"event": "jax.compile", "function": "y", "compile_s": -1, "trace_s": 0.5,'
        b' "count": true}',
        b'{"event": "jax.compile", "function": "y", "compile_s": true}',
        b'{"event": "jax.compile", "function": "z", "count": 4, "persistent_cache_hit": true,'
        b' "compile_s": 0.01}',
        b'{"event": "jax.compile", "function": "w", "is_recompile": true, "diff_total": 70,'
        b' "diff": [{"path": "p%d", "before": 1, "after": 2}, {"path": "q", "before": 1,'
        b' "after": 2}, {"path": "r", "before": 1, "after": 2}, {"path": "s", "before": 1,'
        b' "after": 2}, {"path": "t", "before": 1, "after": 2}]}',
        compile_line("ok", 1.0).encode(),
    ]
    path.write_bytes(b"\n".join(weird))  # no trailing newline on the last line
    rows = json_report(capsys, str(path))
    by_name = {r["function"]: r for r in rows}
    assert set(by_name) == {"(unknown)", "7", "y", "z", "w", "ok"}
    # a persistent-cache hit is not a recompile (when is_recompile is absent)
    assert by_name["z"]["recompiles"] == 0 and by_name["z"]["persistent_cache_hits"] == 1
    assert by_name["w"]["causes"][0]["top_diff"] == (
        "p%d: 1 -> 2; q: 1 -> 2; r: 1 -> 2; s: 1 -> 2; +66 more")
    assert by_name["ok"]["compiles"] == 1 and by_name["ok"]["total_s"] == 1.0
    y = by_name["y"]
    assert y["compiles"] == 3 and y["recompiles"] == 1
    assert y["total_s"] == pytest.approx(0.5)  # NaN ignored; phases used for -1
    assert y["causes"][0]["cause"] == "unknown"
    assert y["causes"][0]["top_diff"] == "a: changed; 5; dtype"
    assert by_name["7"]["recompiles"] == 0  # no usable recompile signal
    assert by_name["7"]["p95_s"] is None

    rc, _, err = run_main(capsys, "report", str(path))
    assert rc == 0 and "skipped 3 lines" in err

    rc, _, err = run_main(capsys, "report", str(tmp_path / "missing.log"))
    assert rc == 1 and "cannot open" in err
    assert run_main(capsys, "report", "--top", "0", str(path))[0] == 2
    assert run_main(capsys, "report", "--format", "xml", str(path))[0] == 2


# -- bounded estimators -------------------------------------------------------


def test_p95_histogram_accuracy() -> None:
    rng = random.Random(1234)
    values = [math.exp(rng.gauss(0.0, 2.0)) for _ in range(20000)]  # ~1e-3 .. 1e3 s
    q = _bounded._Quantiles()
    for v in values:
        q.add(v)
    assert q.samples is None  # past the exact range: histogram answer
    exact = sorted(values)[math.ceil(0.95 * len(values)) - 1]
    assert q.quantile(0.95) == pytest.approx(exact, rel=0.012)
    assert len(q.buckets) <= _bounded._N_BUCKETS + 2
    assert q.quantile(1.0) == max(values)

    q = _bounded._Quantiles()
    for v in (1e-7, 5e5, 5e5):
        q.add(v)
    assert q.quantile(0.0) == 1e-7 and q.quantile(0.95) == 5e5


def test_topk_is_bounded_and_keeps_heavy_hitter() -> None:
    top = _bounded._TopK(k=8)
    for i in range(10000):
        top.add(f"noise-{i}", None)
        if i % 4 == 0:
            top.add("heavy", "the hint")
    assert len(top.items) == 8
    key, count, hint = top.top()
    assert key == "heavy" and hint == "the hint"
    assert count >= 2500  # space-saving never under-counts a kept key


# -- one million lines, bounded memory ------------------------------------------

_DRIVER = r"""
import importlib, io, json, resource, sys, time, tracemalloc, types
package_dir, small_log, big_log = sys.argv[1:4]
# Load otel_jax._report with a bare package standing in for otel_jax, whose __init__ never
# runs: the measurement covers the report's own modules (and the vocabulary they read)
# alone, whatever the package's __init__ imports.
package = types.ModuleType("otel_jax")
package.__path__ = [package_dir]
sys.modules["otel_jax"] = package
mod = importlib.import_module("otel_jax._report")

def peak_rss():
    # Linux: VmHWM belongs to this process image; ru_maxrss would include
    # the peak of the parent that forked us, carried over by exec.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes vs KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale

def report(path):
    out, real = io.StringIO(), sys.stdout
    sys.stdout = out
    try:
        rc = mod.main(["--format", "json", path])
    finally:
        sys.stdout = real
    return rc, json.loads(out.getvalue())

report(small_log)  # warm up: interpreter, buffers and aggregates at full size
rss_small = peak_rss()
t0 = time.perf_counter()
rc, rows = report(big_log)
seconds = time.perf_counter() - t0
rss_big = peak_rss()
# tracemalloc slows allocation-heavy code several-fold, so it runs last (its
# own memory must not count in the RSS figures) and on the small log only.
tracemalloc.start()
report(small_log)
traced_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
loaded = sorted(m for m in sys.modules if m == "jax" or m.startswith(("jax.", "otel_jax.")))
print(json.dumps({"rc": rc, "rows": rows, "seconds": seconds, "rss_small": rss_small,
                  "rss_big": rss_big, "traced_peak": traced_peak, "loaded": loaded}))
"""

#: Compact but complete jax.compile lines; one block of 10 repeats 100,000 times.
_BLOCK_SPEC: list[tuple[str, float, dict[str, Any]]] = [
    ("train_step", 2.0, {}),
    *[("train_step", 1.0, shape_fields("f32[32,8]", "f32[17,8]", 2))] * 4,
    *[("train_step", 0.5, shape_fields("f32[32,8]", "f32[9,8]", 2))] * 2,
    ("train_step", 0.25, {"is_recompile": True, "count": 3, "cause_kind": "weak_type",
                          "cause": "lr: weak f32[] -> f32[]", "hint": WEAK_HINT}),
    ("eval_step", 0.125, {}),
    ("add", 2.0 ** -10, {"eager_op": True}),
]
_KEEP = ("event", "function", "file", "line", "count", "is_recompile", "eager_op",
         "cause_kind", "cause", "diff", "hint", "compile_s")


def _compact_line(function: str, compile_s: float, fields: dict[str, Any]) -> str:
    event = json.loads(compile_line(function, compile_s, **fields))
    return json.dumps({k: event[k] for k in _KEEP if k in event}, separators=(",", ":"))


def test_million_lines_bounded_memory(tmp_path: Path) -> None:
    chunk = "".join(_compact_line(*spec) + "\n" for spec in _BLOCK_SPEC) * 1000
    small = tmp_path / "small.log"  # 20,000 lines
    small.write_text(chunk * 2)
    big = tmp_path / "big.log"  # 1,000,000 compile lines + 2 others
    with big.open("w") as f:
        for _ in range(100):
            f.write(chunk)
        f.write('not json\n{"event": "checkpoint saved", "step": 7}\n')
    n_compiles = 10 * 1000 * 100
    assert n_compiles == 1_000_000

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(PACKAGE_DIR), str(small), str(big)],
        capture_output=True, timeout=120, check=False,
    )
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    mib = 1024 * 1024
    print(f"\n1M lines: report {result['seconds']:.2f} s (child total {wall:.2f} s); "
          f"max RSS {result['rss_small'] / mib:.1f} MiB after 20k lines, "
          f"{result['rss_big'] / mib:.1f} MiB after 1M lines; "
          f"tracemalloc peak {result['traced_peak'] / 1024:.0f} KiB (20k lines)")
    assert result["rc"] == 0
    # the text report reads and aggregates with the vocabulary alone: no jax, nothing of
    # the library's capture or export, not the HTML page
    outside = [m for m in result["loaded"] if not m.startswith("otel_jax._report")
               and m not in ("otel_jax._core", "otel_jax._core._vocab",
                                "otel_jax._core._units", "otel_jax._core._terminal")]
    assert outside == [], outside
    assert "otel_jax._report._read" in result["loaded"]
    assert not [m for m in result["loaded"] if m.startswith("otel_jax._report._html")
                or m.startswith("otel_jax._report._page_data")]
    assert b"1000000 jax.compile events" in proc.stderr
    assert b"skipped 2 lines" in proc.stderr

    rows = result["rows"]
    assert [r["function"] for r in rows] == ["train_step", "eval_step", "(eager ops)"]
    train, evals, eager = rows
    blocks = 100_000
    assert train["compiles"] == 8 * blocks
    assert train["first_compiles"] == blocks
    assert train["recompiles"] == 7 * blocks
    assert train["total_s"] == 7.25 * blocks  # binary fractions: sums are exact
    assert train["recompile_s"] == 5.25 * blocks
    assert train["p95_s"] == pytest.approx(2.0, rel=0.012)
    causes = {c["cause"]: c for c in train["causes"]}
    assert causes["shape"]["count"] == 6 * blocks
    assert causes["shape"]["seconds"] == 5.0 * blocks
    assert causes["shape"]["top_diff"] == "batch['x']: f32[32,8] -> f32[17,8]"
    assert causes["shape"]["top_diff_count"] == 4 * blocks
    assert causes["weak_type"]["count"] == blocks
    assert causes["weak_type"]["top_diff"] == "lr: weak f32[] -> f32[]"
    assert evals["compiles"] == blocks and evals["total_s"] == 0.125 * blocks
    assert eager["compiles"] == blocks and eager["total_s"] == blocks * 2.0 ** -10
    assert sum(r["compiles"] for r in rows) == n_compiles

    # Memory does not grow with the log: 50x more lines, (almost) no more RSS,
    # and the traced working set is a few hundred KiB.
    assert result["rss_big"] - result["rss_small"] < 4 * mib
    assert result["traced_peak"] < 2 * mib
