"""Console lines: one short line per event for a person at a terminal, JSON for machines.

``install(log_format="auto")`` (the default) writes console lines when the log output is a
terminal, JSON lines otherwise; ``"json"`` and ``"console"`` force one or the other, as do
``OTEL_JAX_LOG_FORMAT`` and ``otel-jax run --log-format``. The terminal tests run real
programs with their stderr on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import clean_env, pythonpath

import otel_jax
from otel_jax._core._vocab import EVENT_COMPILE, EVENT_HAZARD, EVENT_STEP, EVENT_STORM
from otel_jax._emit._console import render_console
from otel_jax._setup._options import InstallOptions

ROOT = Path(__file__).resolve().parent.parent
ESC = "\033["

# Two compiles of one function, the second for a new shape, and a hazard said at the first.
PROGRAM = textwrap.dedent("""
    import jax, jax.numpy as jnp, otel_jax
    otel_jax.install()

    @jax.jit
    def train_step(x, lr):
        return x * lr, jnp.asarray(lr * 0.9, jnp.float32)

    lr = 0.1
    for n in (4, 4, 8):
        with otel_jax.step("train_step"):
            x, lr = train_step(jnp.ones(n), lr)
    print("done", flush=True)
""")


def _on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 240.0,
                   both: bool = False) -> tuple[int, str, str]:
    """Run ``argv`` with its stderr on a pseudo-terminal: (exit status, stdout, what the
    terminal showed). Waits for the program's end, boundedly. ``both``: stdout on the
    terminal too, as a person runs a program (``""`` for stdout)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=slave if both else subprocess.PIPE,
                                stderr=slave, env=env, cwd=ROOT)
    finally:
        os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None and not select.select([master], [], [], 0.5)[0]:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed (the program ended)
                break
            if not chunk:
                break
            shown += chunk
        out = proc.stdout.read().decode() if proc.stdout else ""
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, out, shown.decode("utf-8", "replace").replace("\r\n", "\n")


def _env(**extra: str) -> dict[str, str]:
    env = clean_env(PYTHONPATH=pythonpath(ROOT), OTEL_JAX_HAZARDS="true")
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def _program(tmp_path: Path) -> str:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    return str(script)


# --- what a line says --------------------------------------------------------------------------

COMPILE = {"function": "train_step", "count": 2, "callsite": "/work/app/train.py:110",
           "cause_kind": "weak_type", "cause": "lr: f32[] (weak) -> f32[]",
           "compile_s": 1.591883, "after_warmup": False, "hint": "build it with a dtype"}


def test_a_compile_is_function_count_cause_callsite_and_seconds():
    line = render_console(0.0, "info", EVENT_COMPILE, COMPILE, cwd="/work/app")
    assert line.endswith("[info   ] train_step #2  weak_type: lr: f32[] (weak) -> f32[]  "
                         "train.py:110  1.59 s\n")
    first = render_console(0.0, "info", EVENT_COMPILE,
                           {**COMPILE, "count": 1, "cause_kind": "first_compile",
                            "after_warmup": True}, cwd="/elsewhere")
    assert "train_step #1  first compile (after warm-up)  /work/app/train.py:110" in first
    assert ESC not in line + first  # no colors unless asked


def test_a_hazard_is_the_warning_it_is_and_a_storm_names_its_causes():
    hazard = render_console(0.0, "warning", EVENT_HAZARD, {
        "function": "train_step", "callsite": "train.py:110", "hazard_kind": "weak_type",
        "path": "lr", "hazard": "lr goes in weakly typed", "hint": "pass it as an array"},
        cwd="")
    # the hazard in full, as its warning words it: the one place a terminal reads it
    assert "[warning] train_step will compile again (weak_type): lr goes in weakly typed. " \
           "Fix: pass it as an array.  train.py:110" in hazard
    storm = render_console(0.0, "warning", EVENT_STORM, {
        "function": "f", "recompiles": 9, "threshold": 8, "causes": {"shape": 5, "weak_type": 4},
        "hint": "bucket shapes"}, cwd="")
    assert "f recompile storm  9 recompiles (threshold 8): shape x5, weak_type x4; " \
           "hint: bucket shapes" in storm


def test_long_causes_are_cut_and_steps_left_to_the_json_lines():
    line = render_console(0.0, "info", EVENT_COMPILE, {**COMPILE, "cause": "x" * 500}, cwd="")
    assert "x" * 159 + "…" in line and "x" * 160 not in line
    assert render_console(0.0, "info", EVENT_STEP, {"step_name": "s", "step_number": 1}) == ""


def test_one_line_whatever_the_names_hold_and_colors_only_when_asked():
    line = render_console(0.0, "info", EVENT_COMPILE,
                          {**COMPILE, "function": "evil\n\033[31mfake"}, cwd="", colors=False)
    assert line.count("\n") == 1 and "\033" not in line and "evil\\n\\x1b[31mfake" in line
    other = render_console(0.0, "info", "some\n.event\033[2J", {"keys": ["a"]}, cwd="")
    assert other.count("\n") == 1 and "\033" not in other and "event\\x1b[2J  keys=" in other
    colored = render_console(0.0, "warning", EVENT_COMPILE, COMPILE, cwd="", colors=True)
    assert ESC in colored and colored.count("\n") == 1


def test_format_characters_are_shown_escaped_in_console_and_json_lines():
    # A right-to-left override in a name shows the rest of the line reversed; a C1 control
    # or a line separator is a control of its own: none reaches a terminal raw.
    from otel_jax._emit._logs import render

    hostile = "step\u202eTSAF\x85\u2028x\u2066"
    line = render_console(0.0, "info", EVENT_COMPILE,
                          {**COMPILE, "function": hostile, "callsite": hostile}, cwd="")
    assert not set("\u202e\x85\u2028\u2066") & set(line), repr(line)
    assert "step\\u202eTSAF\\x85\\u2028x\\u2066 #2" in line
    as_json = render(0.0, 20, EVENT_COMPILE, {"function": hostile, "note": "é ∑"})
    assert not set("\u202e\x85\u2028\u2066") & set(as_json), repr(as_json)
    event = json.loads(as_json)
    assert event["function"] == hostile and event["note"] == "é ∑"  # the same values


def test_log_format_is_checked_and_read_from_the_environment():
    with pytest.raises(ValueError, match="log_format"):
        InstallOptions(log_format="pretty")  # type: ignore[arg-type]
    assert InstallOptions().log_format == "auto"
    read = InstallOptions().with_environment({"OTEL_JAX_LOG_FORMAT": " Console "})
    assert read.log_format == "console"


def test_a_stream_that_is_no_terminal_gets_json_and_console_when_asked():
    import jax
    import jax.numpy as jnp

    for log_format, is_json in (("auto", True), ("json", True), ("console", False)):
        stream = io.StringIO()
        otel_jax.uninstall()
        otel_jax.install(log_output=stream, log_format=log_format, hazards=False)
        try:
            jax.jit(lambda x: x + 1)(jnp.ones(3))
            otel_jax.uninstall()
        finally:
            otel_jax.uninstall()
        [line] = stream.getvalue().splitlines()
        assert line.startswith("{") is is_json, (log_format, line)
        if not is_json:
            assert "<lambda> #" in line and " tests/test_console.py:" in line and ESC not in line


# --- a real terminal ---------------------------------------------------------------------------

@pytest.mark.slow
def test_a_terminal_gets_console_lines_with_colors_unless_no_color(tmp_path: Path):
    script = _program(tmp_path)
    code, out, shown = _on_a_terminal([sys.executable, script], _env())
    assert code == 0 and out == "done\n", shown
    assert "{" not in shown.replace("{}", ""), shown  # no JSON line
    assert ESC in shown
    plain = shown.replace("\033[0m", "")
    for code_ in ("\033[1m", "\033[2m", "\033[32m", "\033[33m"):
        plain = plain.replace(code_, "")
    assert "train_step #1  first compile  " in plain
    assert "train_step #3  shape: x: f32[4] -> f32[8]" in plain
    assert "[warning] train_step will compile again (weak_type): lr goes in " in plain
    assert "step train_step" not in plain  # a step's line repeats its compiles'

    code, _, uncolored = _on_a_terminal([sys.executable, script], _env(NO_COLOR="1"))
    assert code == 0 and ESC not in uncolored and "train_step #3  shape: " in uncolored

    code, _, as_json = _on_a_terminal([sys.executable, script],
                                      _env(OTEL_JAX_LOG_FORMAT="json"))
    lines = [json.loads(ln) for ln in as_json.splitlines() if ln.startswith("{")]
    counts = [ln["count"] for ln in lines if ln["event"] == EVENT_COMPILE]
    assert code == 0 and counts == [1, 2, 3]


# Each call printed after it returns: a compile's lines belong before the next print.
ORDERED = PROGRAM.replace("        x, lr = train_step(jnp.ones(n), lr)\n",
                          "        x, lr = train_step(jnp.ones(n), lr)\n"
                          "    print(f'epoch {n}: loss', flush=True)\n")


@pytest.mark.slow
@pytest.mark.hazards
def test_on_a_terminal_the_lines_come_in_program_order_and_a_hazard_is_said_once(tmp_path):
    assert ORDERED != PROGRAM
    script = tmp_path / "prog.py"
    script.write_text(ORDERED)
    code, _, shown = _on_a_terminal([sys.executable, str(script)], _env(NO_COLOR="1"),
                                    both=True)
    assert code == 0, shown
    lines = [ln.split("] ", 1)[-1] for ln in shown.splitlines()
             if "train_step" in ln or ln.startswith(("epoch ", "done"))]
    # each compile's lines before the program's next output
    expected = ["train_step #1  first compile  ",
                "train_step will compile again (weak_type): lr goes in weakly typed ",
                "epoch 4: loss", "train_step #2  weak_type: lr: f32[] (weak) -> f32[]  ",
                "epoch 4: loss", "train_step #3  shape: x: f32[4] -> f32[8]  ",
                "epoch 8: loss", "done"]
    assert len(lines) == len(expected), shown
    assert all(line.startswith(start) for line, start in zip(lines, expected)), shown
    # the hazard, said once, in full: its line (the OtelJaxWarning is left to it)
    assert ". Fix: pass it as an array" in lines[1], shown
    assert shown.count("will compile again") == 1 and "OtelJaxWarning" not in shown, shown


@pytest.mark.slow
@pytest.mark.hazards
def test_a_file_or_pipe_gets_json_lines_only_with_the_hazard_among_them(tmp_path):
    script = _program(tmp_path)
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                          timeout=240, cwd=ROOT, env=_env())
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr
    events = [json.loads(line) for line in proc.stderr.splitlines()]  # each a JSON line
    [hazard] = [e for e in events if e["event"] == EVENT_HAZARD]
    assert hazard["hazard_kind"] == "weak_type" and hazard["hint"], hazard
    assert [e["count"] for e in events if e["event"] == EVENT_COMPILE] == [1, 2, 3]


@pytest.mark.slow
def test_otel_jax_run_on_a_terminal_shows_console_lines_and_still_summarises(tmp_path: Path):
    script = _program(tmp_path)
    run = [sys.executable, "-m", "otel_jax", "run"]
    code, out, shown = _on_a_terminal([*run, script], _env(NO_COLOR="1"))
    assert code == 0 and out == "done\n", shown
    assert "train_step #3  shape: x: f32[4] -> f32[8]" in shown
    assert '"event"' not in shown
    # the summary at exit reads the run's JSON files, whatever the terminal showed
    assert "otel-jax run: 3 compiles, 2 recompiles" in shown, shown

    code, _, forced = _on_a_terminal([*run, "--log-format", "json", script], _env())
    assert code == 0 and '"event": "jax.compile"' in forced
    assert "otel-jax run: 3 compiles, 2 recompiles" in forced
