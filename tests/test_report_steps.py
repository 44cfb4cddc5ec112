"""``otel-jax report`` with ``jax.step`` lines: step counts, p50/p95, the steps that
compiled and their extra time, compile seconds over step seconds; the HTML page draws the
steps over the compiles on one time axis (checked in headless Chromium). Without step
lines the report is as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import pythonpath

from otel_jax import _cli

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"


def compile_line(second: float, count: int, compile_s: float) -> str:
    return json.dumps({
        "timestamp": f"2026-12-01T10:00:{second:09.6f}Z", "level": "info",
        "event": "jax.compile", "logger": "otel_jax", "function": "train_step",
        "file": "/src/train.py", "line": 60, "count": count, "is_recompile": count > 1,
        "cause_kind": "shape" if count > 1 else "first_compile",
        "cause": "x: f32[8] -> f32[5]" if count > 1 else "first compilation of train_step",
        "compile_s": compile_s})


def step_line(second: float, number: int, duration: float, *, compile_s: float = 0.0,
              steps: int = 1, steps_s: float | None = None, name: str = "train_step",
              nested: bool = False) -> str:
    return json.dumps({
        "timestamp": f"2026-12-01T10:00:{second:09.6f}Z", "level": "info",
        "event": "jax.step", "logger": "otel_jax", "step_name": name, "step_number": number,
        "duration_s": duration, "compiled": compile_s > 0, "compiles": int(compile_s > 0),
        "compile_s": compile_s, "nested": nested, "steps": steps,
        "steps_s": duration if steps_s is None else steps_s})


def run_log() -> str:
    """100 steps of 0.1 s; step 1 and step 60 compiled (0.5 s and 0.4 s of compiling)."""
    lines = [compile_line(1.6, 1, 0.5), step_line(1.7, 1, 0.7, compile_s=0.5),
             step_line(2.8, 11, 0.1, steps=10, steps_s=1.0),
             step_line(6.8, 51, 0.1, steps=40, steps_s=4.0),
             compile_line(7.6, 2, 0.4), step_line(7.8, 60, 0.6, compile_s=0.4, steps=9,
                                                  steps_s=1.4),
             step_line(11.8, 100, 0.12, steps=40, steps_s=4.0),
             step_line(11.8, 100, 0.05, name="forward", nested=True, steps=100, steps_s=5.0)]
    return "\n".join(lines) + "\n"


def report(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[str, str]:
    log = tmp_path / "run.log"
    log.write_text(text)
    assert _cli.main(["report", *extra, str(log)]) == 0
    out, err = capsys.readouterr()
    return out, err


def test_the_text_report_adds_the_steps(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out, err = report(tmp_path, run_log(), capsys)
    assert "2 jax.compile events, 6 jax.step events" in err and "skipped" not in err
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("STEP "))
    row = lines[head + 1].split()
    # 100 steps, 2 compiled, p50 of the others 0.1, 11.1 s of steps, 0.9 s compiling,
    # extra: (0.7 - 0.1) + (0.6 - 0.1)
    assert row == ["train_step", "100", "2", "0.100", "0.120", "11.100", "0.900", "1.100"]
    assert lines[head + 2].split()[:3] == ["forward", "(nested)", "100"]
    assert "compiling: 8% of step time (0.900 of 11.100 s" in out  # nested not counted twice
    compiled = out[out.index("steps that compiled"):]
    assert compiled.index("train_step #1: 0.700 s, compiling 0.500 s, extra 0.600 s") \
        < compiled.index("train_step #60: 0.600 s, compiling 0.400 s, extra 0.500 s")
    md, _ = report(tmp_path, run_log(), capsys, "--format", "markdown")
    assert "**Steps**" in md and "| train_step | 100 | 2 |" in md
    js, _ = report(tmp_path, run_log(), capsys, "--format", "json")
    assert isinstance(json.loads(js), list)  # the JSON output stays a list of rows


def test_without_step_lines_the_report_is_as_before(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only = "".join(ln + "\n" for ln in run_log().splitlines() if '"jax.compile"' in ln)
    out, err = report(tmp_path, only, capsys)
    assert "STEP" not in out and "step time" not in out and "jax.step" not in err
    page = tmp_path / "page.html"
    report(tmp_path, only, capsys, "--format", "html", "-o", str(page))
    html = page.read_text()
    assert 'id="steps"' not in html and "of the logged time compiling" in html


def test_bad_step_lines_are_skipped_and_names_are_capped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from otel_jax._report._steps import MAX_STEP_NAMES

    lines = [step_line(1.0, i, 0.1, name=f"s{i}") for i in range(MAX_STEP_NAMES + 10)]
    lines += [json.dumps({"event": "jax.step", "step_name": "x", "duration_s": "slow"}),
              json.dumps({"event": "jax.step", "duration_s": 1.0}), '{"event": "jax.step"']
    out, err = report(tmp_path, "\n".join(lines) + "\n", capsys)
    assert "skipped 3 lines" in err
    assert "(other)" in out and f"{MAX_STEP_NAMES + 10} jax.step events" in err


def test_the_page_draws_the_steps_over_the_compiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.html"
    report(tmp_path, run_log(), capsys, "--format", "html", "-o", str(page))
    html = page.read_text()
    assert '<a href="#steps">Steps</a>' in html
    assert '<div class="v">8%</div><div class="k">of step time compiling</div>' in html
    assert "of the logged time compiling" not in html
    assert 'id="steps-table"' in html and 'id="compiled-steps"' in html
    pytest.importorskip("matplotlib")
    assert 'id="steps-chart"' in html


# -- a real run, in headless Chromium ---------------------------------------------------

PROGRAM = textwrap.dedent("""
    import time
    import jax, jax.numpy as jnp
    import otel_jax

    @jax.jit
    def train_step(w, x):
        return w - 0.01 * jnp.tanh(x @ w).sum() * w

    w = jnp.ones((64, 64))
    for i in range(60):
        n = 32 if i < 40 else 24  # a new batch size: one recompile, in a slow step
        with otel_jax.step("train_step"):
            w = train_step(w, jnp.ones((n, 64)))
            w.block_until_ready()
            time.sleep(0.05)
""")


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
def test_a_real_run_s_page_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    from _browser import Browser

    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    page = tmp_path / "report.html"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "JAX_")) or k == "OTEL_JAX_HAZARDS"}
    env.update(PYTHONPATH=pythonpath(ROOT), OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
    proc = subprocess.run([sys.executable, "-m", "otel_jax", "run", "--log-output",
                           "none", "--html", str(page), str(script)], capture_output=True,
                          text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "of step time" in proc.stderr and "steps that compiled" in proc.stderr
    OUTPUT.mkdir(exist_ok=True)
    with Browser(chromium, width=1400) as browser:
        browser.open(page)
        found = browser.evaluate("""(() => {
            const img = document.getElementById("steps-chart");
            const rows = Array.from(document.querySelectorAll("#steps-table tbody tr"));
            return {chart: img ? img.naturalWidth : (
                        document.querySelector("#steps #charts-missing") ? -1 : 0),
                    rows: rows.map(r => Array.from(r.cells).map(c => c.textContent)),
                    compiled: document.querySelectorAll("#compiled-steps tbody tr").length,
                    share: Array.from(document.querySelectorAll(".card .k"))
                        .some(k => k.textContent === "of step time compiling")};
        })()""")
        browser.element_screenshot("steps", OUTPUT / "report_html_steps.png")
        console, requests = list(browser.console), list(browser.requests)
    assert console == []
    assert [u for u in requests if u != page.resolve().as_uri()
            and not u.startswith("data:")] == []
    assert found["chart"] != 0 and found["share"]
    assert found["rows"][0][:3] == ["train_step", "60", "2"]  # every step counted
    assert found["compiled"] == 2
