"""otel_jax never changes what JAX compiles.

Each program of tests/_compile_count_programs.py runs plain and with ``otel_jax.install()``
(records made later, on the background thread), each in a fresh interpreter, and JAX's
backend compiles are counted by a ``jax.monitoring`` listener of the programs' own. Anything
of JAX's or the user's that otel_jax held from a compile until its record is made (a
function, the ``HashablePartial`` JAX jits per op under ``pmap``, a static value) would keep
an entry of JAX's weak-keyed caches alive and turn a later compile into a cache hit. The
installed programs run twice: with the defaults, and with the background thread held until
each program ends, so that every record is made as late as it can be (the window in which
something held shows does not depend on how busy the machine is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).with_name("_compile_count_programs.py")
TIMEOUT_S = 300
MODES = ("plain", "installed", "installed_held")
NAMES = ("pmap_under_disable_jit", "eager_grad", "recreated_jit_under_grad",
         "identity_hashed_statics", "value_equal_functions", "collected_before_record")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    # Two CPU devices: pmap under disable_jit runs each op through shard_map's
    # HashablePartials over a real mesh.
    env.update(JAX_PLATFORMS="cpu", PYTHONHASHSEED="0",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    # install() as a user has it: hazards on (their checks run at every compile too).
    env["OTEL_JAX_HAZARDS"] = "on"
    root = str(Path(__file__).resolve().parent.parent)  # this checkout's otel_jax first
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="module")
def counts() -> dict[str, dict[str, int]]:
    """``{mode: {program: backend compiles}}``, the modes run side by side."""
    procs = {mode: subprocess.Popen(
        [sys.executable, str(PROGRAMS), mode], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True)
        for mode in MODES}
    out: dict[str, dict[str, int]] = {}
    try:
        for mode, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
            lines = [ln for ln in stdout.splitlines() if ln.startswith("COUNTS ")]
            assert proc.returncode == 0 and lines, (
                f"{mode} run failed ({proc.returncode}):\n{stdout}\n{stderr[-4000:]}")
            out[mode] = json.loads(lines[-1].removeprefix("COUNTS "))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.mark.parametrize("mode", MODES[1:])
@pytest.mark.parametrize("program", NAMES)
def test_installed_compiles_as_often_as_plain(counts, program, mode):
    plain, installed = counts["plain"][program], counts[mode][program]
    assert plain > 0
    assert installed == plain, (
        f"{program}: {plain} backend compiles plain, {installed} with otel_jax {mode}")


def test_every_program_is_compared(counts):
    assert all(set(counts[mode]) == set(NAMES) for mode in MODES)
