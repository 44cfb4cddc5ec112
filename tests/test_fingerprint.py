"""The signature fingerprint: equal for the same call in another process, different otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp

import otel_jax

_PROGRAM = textwrap.dedent("""
    import io, json, sys
    import jax, jax.numpy as jnp
    import otel_jax
    out = io.StringIO()
    otel_jax.install(log_output=out)
    class Config:  # hashed by identity: a new object in every process
        pass
    def step(params, batch, cfg, n):
        return params["w"] * batch["x"].sum() + n
    f = jax.jit(step, static_argnums=(2, 3))
    x = jax.device_put(jnp.ones((int(sys.argv[1]), 3)), jax.devices()[-1])
    f({"w": jnp.ones(2)}, {"x": x}, Config(), 2)
    otel_jax.uninstall()
    lines = [json.loads(l) for l in out.getvalue().splitlines()]
    print([l["fingerprint"] for l in lines
           if l["function"] == "step" and l["event"] == "jax.compile"][0])
""")


def _fingerprint_in_a_new_process(rows: int, devices: int, tmp_path) -> str:
    # Another directory, hash seed and device count: none may change the fingerprint.
    program = tmp_path / f"run_{devices}" / "train.py"
    program.parent.mkdir()
    program.write_text(_PROGRAM)
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": str(rows + devices),
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu"}  # the device count is the CPU's, on any machine
    if os.environ.get("PYTHONPATH"):  # where the machine's packages may come from
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    out = subprocess.run([sys.executable, str(program), str(rows)], capture_output=True,
                         text=True, env=env, timeout=300, cwd=program.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_same_call_same_fingerprint_across_processes_paths_and_devices(tmp_path):
    a = _fingerprint_in_a_new_process(4, 1, tmp_path)
    b = _fingerprint_in_a_new_process(4, 2, tmp_path)
    c = _fingerprint_in_a_new_process(5, 3, tmp_path)
    assert len(a) == 16 and a == b
    assert c != a


def test_fingerprint_on_span_and_log_line_and_stable_in_process(telemetry):
    @jax.jit
    def f(x, scale):
        return x * scale

    f(jnp.ones(3), 2.0)
    f(jnp.ones(4), 2.0)
    f.clear_cache()
    f(jnp.ones(3), 2.0)  # the first signature again
    spans = telemetry.compiles("test_fingerprint_on_span_and_log_line_and_stable_in_process"
                               ".<locals>.f")
    prints = [s.attributes["jax.compile.fingerprint"] for s in spans]
    assert prints[0] != prints[1] and prints[0] == prints[2]
    otel_jax.flush()
    lines = [json.loads(line) for line in telemetry.log.getvalue().splitlines()
             if '"jax.compile"' in line and "<locals>.f" in line]
    assert [line["fingerprint"] for line in lines] == prints
    assert otel_jax.CauseKind.UNKNOWN.value == spans[2].attributes["jax.compile.cause.kind"]


def test_one_process_without_a_persistent_cache_skips_the_program_fingerprint(telemetry):
    @jax.jit
    def alone(x):
        return x + 1

    alone(jnp.ones(2))
    [span] = telemetry.compiles("test_one_process_without_a_persistent_cache_skips_the_program"
                                "_fingerprint.<locals>.alone")
    assert "jax.compile.program_fingerprint" not in span.attributes
    assert len(span.attributes["jax.compile.fingerprint"]) == 16


def test_program_fingerprint_tells_a_retraced_program_from_a_new_signature(
        telemetry, persistent_cache):
    def make(double):  # a new function object each time, as after a code change
        def step(x):
            return x * 2 if double else x + 2
        return jax.jit(step)

    make(False)(jnp.ones(3))
    make(True)(jnp.ones(3))  # same signature, another program
    make(True)(jnp.ones(4))  # another signature
    spans = telemetry.compiles("test_program_fingerprint_tells_a_retraced_program_from_a_new"
                               "_signature.<locals>.make.<locals>.step")
    sigs = [s.attributes["jax.compile.fingerprint"] for s in spans]
    progs = [s.attributes["jax.compile.program_fingerprint"] for s in spans]
    assert sigs[0] == sigs[1] != sigs[2]
    assert progs[0] != progs[1] and len(progs[0]) == 16
