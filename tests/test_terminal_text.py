"""What otel_jax writes to a terminal is one line per message, whatever user code named.

A function's ``__name__``, a dict key or a file name comes from user code and may hold
control characters (an escape sequence that clears the screen, a carriage return, a
newline that forges a line of its own): every message otel_jax writes to a terminal (its
warnings, ``RecompileError``, the exit summary of ``otel-jax run``, the command line's own
messages) shows them as escapes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import Telemetry, clean_env, pythonpath

import otel_jax
from otel_jax import OtelJaxWarning
from otel_jax._pipeline._policy import RecompileError

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "evil\x1b[2J\rname\nINJECTED\u202e"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202e]")  # newlines are checked apart


def _hostile(fn):
    fn.__name__ = fn.__qualname__ = HOSTILE
    return fn


def _clean(text: str) -> None:
    assert not RAW.search(text), repr(text)
    assert not re.search(r"^INJECTED", text, re.MULTILINE), text


@pytest.fixture
def installed():
    otel_jax.uninstall()
    t = Telemetry()

    def install(**kwargs):
        otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                         log_output=t.log, warmup_steps=0, **kwargs)
    yield install
    otel_jax.uninstall()


def test_a_warning_about_a_function_with_control_characters_is_one_clean_line(installed):
    installed(on_recompile="warn")
    f = jax.jit(_hostile(lambda x: x + 1))
    f(jnp.ones(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(jnp.ones(3))
        otel_jax.flush()
    said = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert any("recompiled after warm-up" in m for m in said), said
    for message in said:
        _clean(message)
        assert "\n" not in message and "evil\\x1b[2J\\rname\\nINJECTED\\u202e" in message


def test_on_recompile_warn_made_an_error_by_the_filters_raises_from_the_jit_call(installed):
    # the warning is the user's to make an error (-W error::otel_jax.OtelJaxWarning)
    installed(on_recompile="warn")
    f = jax.jit(_hostile(lambda x: x * 5))
    f(jnp.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtelJaxWarning)
        with pytest.raises(OtelJaxWarning, match="recompiled after warm-up") as raised:
            f(jnp.ones(6))
    _clean(str(raised.value))


def test_recompile_error_is_one_clean_line(installed):
    installed(on_recompile="raise")
    f = jax.jit(_hostile(lambda x: x * 3))
    f(jnp.ones(2))
    with pytest.raises(RecompileError) as raised:
        f(jnp.ones(4))
    _clean(str(raised.value))
    assert "\n" not in str(raised.value)


def test_the_run_summary_warnings_and_messages_escape_control_characters(tmp_path):
    program = tmp_path / "train.py"
    program.write_text(textwrap.dedent(f"""
        import jax, jax.numpy as jnp

        def step(x):
            return x * 2
        step.__name__ = step.__qualname__ = {HOSTILE!r}
        f = jax.jit(step)
        for n in (2, 3, 4):
            f(jnp.ones(n))
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "otel_jax", "run", "--summary", "always", str(program)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=clean_env(PYTHONPATH=pythonpath(ROOT), OTEL_JAX_ON_RECOMPILE="warn", OTEL_JAX_WARMUP_STEPS="0",
                      OTEL_JAX_LOG_OUTPUT="none", OTEL_TRACES_EXPORTER="none",
                      OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none"))
    assert proc.returncode == 0, proc.stderr
    assert "recompiled after warm-up" in proc.stderr and "evil\\x1b" in proc.stderr
    _clean(proc.stderr)


def test_the_command_line_escapes_a_hostile_program_name(tmp_path):
    missing = str(tmp_path / "no\x1b[2J\nINJECTED" / "python3")
    proc = subprocess.run([sys.executable, "-m", "otel_jax", "run", missing, "x.py"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=clean_env(PYTHONPATH=pythonpath(ROOT)))
    assert proc.returncode == 127 and "cannot run" in proc.stderr, proc.stderr
    _clean(proc.stderr)


# A folder whose name drives a terminal and forges a JSON line of its own: the script's
# path reaches the ``FILE:LINE: OtelJaxWarning:`` prefix Python writes, the console lines
# and the JSON lines.
HOSTILE_DIR = 'a\x1b[31mred\x07\r\n{"event": "jax.compile", "function": "FAKE"}\n\u202e'
FORGED = '{"event": "jax.compile", "function": "FAKE"}'
HAZARD_PROGRAM = textwrap.dedent("""
    import jax, jax.numpy as jnp

    @jax.jit
    def train_step(x, lr):
        return x * lr, jnp.asarray(lr * 0.9, jnp.float32)

    lr = 0.1
    for n in (4, 4, 8):
        x, lr = train_step(jnp.ones(n), lr)
""")


def _in_a_hostile_folder(tmp_path: Path) -> Path:
    folder = tmp_path / HOSTILE_DIR
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(HAZARD_PROGRAM)
    return script


def _run(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "otel_jax", "run", "--summary", "never", str(script)],
        capture_output=True, text=True, timeout=300, cwd=script.parent.parent,
        env=clean_env(PYTHONPATH=pythonpath(ROOT), OTEL_JAX_HAZARDS="on",
                      OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                      OTEL_LOGS_EXPORTER="none", **env))
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_a_script_path_with_control_characters_reaches_stderr_escaped(tmp_path):
    script = _in_a_hostile_folder(tmp_path)
    # Python's own warnings: the hazard's and on_recompile="warn"'s, located in the script
    warned = _run(script, OTEL_JAX_LOG_OUTPUT="none", OTEL_JAX_ON_RECOMPILE="warn",
                  OTEL_JAX_WARMUP_STEPS="0").stderr
    assert "will compile again" in warned and "recompiled after warm-up" in warned, warned
    _clean(warned)
    assert FORGED not in warned.splitlines() and "\\x1b[31mred\\x07\\r\\n{" in warned
    # the JSON lines on a pipe: each a JSON line, nothing raw in them
    lines = _run(script).stderr
    _clean(lines)
    events = [json.loads(line) for line in lines.splitlines()]
    assert {e["event"] for e in events} == {"jax.compile", "jax.compile.hazard"}, lines
    assert all(e["function"] == "train_step" and e["file"] == str(script) for e in events)
