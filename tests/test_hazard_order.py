"""Hazards are decided in compile order, not wall time: the same warnings at the same
compiles whether otel_jax's background thread keeps up or falls behind (a loaded machine,
small compiles back to back, two threads compiling one function).

The background thread is delayed here by a seam (each of its jobs first waits for the
program to end), so that every compile of a function happens before the record of the
first is made: the worst a loaded machine can do.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import clean_env, pythonpath

import otel_jax
from otel_jax._core import _vocab
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._pipeline._engine import ENGINE

pytestmark = [pytest.mark.hazards,
              pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")]

ROOT = Path(__file__).resolve().parent.parent
#: Runs of each program, delayed and not: every one must say the same.
_RUNS = 3


def _delayed(monkeypatch, until: threading.Event) -> None:
    """Each job of the background thread first waits for ``until`` (at most a minute): it
    falls behind every compile the program makes before that."""
    work = ENGINE._work

    def late() -> None:
        until.wait(60)
        work()

    monkeypatch.setattr(ENGINE, "_work", late)


def _fresh(name: str):
    """A new jitted function under its own name: its compiles counted from one."""
    def total(tokens):
        return jnp.cumsum(tokens).sum()

    total.__name__ = total.__qualname__ = name
    return jax.jit(total)


def _said(telemetry, name: str) -> list[tuple[int, str, str]]:
    """The hazards said of ``name``'s compiles: ``(count, kind, level)``."""
    otel_jax.flush()
    lines = [ln for ln in telemetry.log_lines() if ln["event"] == _vocab.EVENT_HAZARD
             and ln[_vocab.Field.FUNCTION] == name]
    return sorted((ln[_vocab.Field.COUNT], ln[_vocab.Field.HAZARD_KIND], ln["level"])
                  for ln in lines)


def _one_thread(step, lengths) -> None:
    for n in lengths:
        step(jnp.ones(n))  # small compiles, back to back


def _two_threads(step, lengths) -> None:
    halves = [lengths[0::2], lengths[1::2]]
    threads = [threading.Thread(target=_one_thread, args=(step, half)) for half in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


_LENGTHS = [13, 29, 7, 41, 22, 35, 18, 51]
#: Each new length is a compile: a note at the 3rd, a warning at the 5th, whatever the order
_EXPECTED = [(3, "shape", "info"), (5, "shape", "warning")]


@pytest.mark.parametrize("program", [_one_thread, _two_threads])
def test_the_same_hazards_at_the_same_compiles_with_the_background_thread_behind(
        telemetry, monkeypatch, program):
    said = {}
    for delayed in (False, True):
        for run in range(_RUNS):
            name = f"step_{program.__name__}_{delayed}_{run}"
            done = threading.Event()
            if delayed:
                _delayed(monkeypatch, done)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                program(_fresh(name), _LENGTHS)
                done.set()
                hazards = _said(telemetry, name)
            monkeypatch.undo()
            warned = [str(w.message) for w in caught
                      if issubclass(w.category, OtelJaxWarning) and name in str(w.message)]
            said[(delayed, run)] = (hazards, len(warned))
    # one warning each run, at the 5th compile, the note at the 3rd: delayed or not
    assert all(v == (_EXPECTED, 1) for v in said.values()), said


_MANY_LENGTHS = """
import jax, jax.numpy as jnp

@jax.jit
def encode(tokens):
    return jnp.cumsum(tokens).sum()

for n in range(3, 143):  # 140 calls, each with a new length
    encode(jnp.ones(n))
"""


#: Put on the program's path: otel_jax's background thread sleeps before each job, and
#: falls behind compiles that take less.
_LATE_WORKER = """
import time
from otel_jax._pipeline._engine import ENGINE

_work = ENGINE._work


def _late():
    time.sleep(1.0)
    _work()


ENGINE._work = _late
"""


@pytest.mark.slow
def test_a_new_length_at_each_of_140_calls_is_warned_under_otel_jax_run(tmp_path):
    script = tmp_path / "lengths.py"
    script.write_text(_MANY_LENGTHS)
    (tmp_path / "late").mkdir()
    (tmp_path / "late" / "sitecustomize.py").write_text(_LATE_WORKER)
    env = clean_env(OTEL_JAX_HAZARDS="on", OTEL_TRACES_EXPORTER="none",
                    OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                    PYTHONPATH=pythonpath(ROOT, tmp_path / "late"))
    result = subprocess.run([sys.executable, "-m", "otel_jax", "run", "--log-output", "none",
                             str(script)], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    warned = [ln for ln in result.stderr.splitlines() if "OtelJaxWarning" in ln]
    assert len(warned) == 1, result.stderr[-3000:]
    assert "encode will compile again (shape)" in warned[0]
    assert warned[0].startswith(f"{script}:9:")  # at the call line
