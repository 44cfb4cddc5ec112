"""The hazard gate: ``assert_no_hazards``, ``@pytest.mark.no_hazards`` and the plugin's
``--otel-jax-no-hazards`` option fail a test when a compile shows a recompile is coming.

Hazards are off in this project's tests unless marked (``conftest.py``): these tests are
not marked, so each also shows that the gate computes hazards where the program did not.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax._pipeline._engine import ENGINE
from otel_jax.testing import assert_no_hazards

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")


# A hazard is said once per function, at the compile that shows it: a function per test.
@jax.jit
def sgd_step(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def sgd_step_narrowed(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def sgd_step_elsewhere(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def sgd_step_installed(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def sgd_step_decorated(params, lr):
    return params - lr * params, lr * jnp.float32(0.999)


@jax.jit
def clean_step(params, lr):
    return params - lr * params, lr


def _line_of(marker: str) -> int:
    """The line of this file that holds ``marker``."""
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of" not in text)


def test_a_hazard_warning_fails_naming_the_hazard_its_line_and_its_fix():
    assert ENGINE.hazards is False  # as the program asked (this test is not marked)
    with pytest.raises(AssertionError) as failed:
        with assert_no_hazards():
            params, lr = jnp.ones(3), 0.1
            for _ in range(1):  # one step: the hazard is said before the recompile
                params, lr = sgd_step(params, lr)  # the calling line
    message = str(failed.value)
    assert message.startswith("expected no hazard, got 1 hazard:")
    assert "sgd_step #1 at " in message and "will compile again (weak_type)" in message
    assert f"{__file__}:{_line_of('# the calling line')}" in message
    assert "fix: " in message and "jnp.asarray" in message
    assert ENGINE.hazards is False  # the program's choice back


def test_no_hazard_passes_and_leaves_the_program_s_choice():
    with assert_no_hazards() as gate:
        params, lr = jnp.ones(3), jnp.float32(0.1)
        for _ in range(2):
            params, lr = clean_step(params, lr)
    assert gate.count == 1 and gate.hazards == []
    assert ENGINE.hazards is False


def test_fn_narrows_the_gate_to_one_function():
    with assert_no_hazards(fn=clean_step):
        params, lr = jnp.ones(4), 0.1
        for _ in range(1):
            params, lr = sgd_step_elsewhere(params, lr)  # another function's: not this gate's
        clean_step(params, jnp.float32(0.1))
    step = sgd_step_narrowed
    with pytest.raises(AssertionError, match=r"expected no hazard of sgd_step_narrowed"):
        with assert_no_hazards(fn=step):
            params, lr = jnp.ones(5), 0.1
            for _ in range(1):
                params, lr = step(params, lr)


def test_notes_fail_only_when_asked_for():
    def cast(x, dtype):
        return x.astype(dtype)

    def cast_again(x, dtype):
        return x.astype(dtype)

    with assert_no_hazards() as gate:  # a dtype static: a note, not a warning
        jax.jit(cast, static_argnums=1)(jnp.ones(2), jnp.dtype("bfloat16"))
    assert gate.hazards == [] and len(gate) == 1
    with pytest.raises(AssertionError, match=r"may compile again \(a note\) \(static_argument\)"):
        with assert_no_hazards(notes=True):
            jax.jit(cast_again, static_argnums=1)(jnp.ones(3), jnp.dtype("bfloat16"))


def test_the_gate_works_under_install_with_hazards_off(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     hazards=False)
    step = sgd_step_installed
    with pytest.raises(AssertionError, match="weak_type"):
        with assert_no_hazards():
            params, lr = jnp.ones(6), 0.1
            for _ in range(1):
                params, lr = step(params, lr)
    assert ENGINE.hazards is False


def test_as_a_decorator():
    step = sgd_step_decorated

    @assert_no_hazards()
    def smoke():
        params, lr = jnp.ones(7), 0.1
        for _ in range(1):
            params, lr = step(params, lr)

    with pytest.raises(AssertionError, match="weak_type"):
        smoke()


PROGRAM = """
    import jax, jax.numpy as jnp, pytest

    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    @jax.jit
    def other_step(params, lr):  # a hazard is said once per function
        return params - lr * params, lr * jnp.float32(0.999)

    def one_step(lr, step=step):
        params = jnp.ones(3)
        for _ in range(1):
            params, lr = step(params, lr)

    @pytest.mark.no_hazards
    def test_marked_fed_back():
        one_step(0.1)

    @pytest.mark.no_hazards(fn=step)
    def test_marked_clean():
        one_step(jnp.float32(0.1))

    def test_unmarked_fed_back():
        one_step(0.2, other_step)
"""


def test_the_marker_fails_a_test_that_says_a_hazard(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "test_marked_fed_back" in out and "will compile again (weak_type)" in out
    assert "fix: " in out
    assert "pytest_plugin.py" not in out  # a clean failure, not the plugin's traceback


@pytest.mark.hazards  # on in the program, as where otel_jax is installed with its defaults
def test_a_hazard_the_gate_fails_on_is_said_once_in_the_failure(pytester):
    """Not also as a warning: in pytest's warnings summary, or on stderr where pytest does
    not capture warnings. A hazard no gate fails on is still a warning."""
    pytester.makeconftest("import otel_jax\notel_jax.install(log_output=None)\n")
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    # pytest's short summary repeats a failure's message (whole where CI is set, cut to the
    # terminal's width elsewhere): the hazard is counted in what comes before it
    out = _before_summary(result.stdout.str()) + result.stderr.str()
    assert out.count("step #1 at ") == 1  # the failure
    assert "otel_jax: step will compile again" not in out  # no warning of the same
    assert out.count("otel_jax: other_step will compile again (weak_type)") == 1
    assert out.count("will compile again (weak_type)") == 2  # the failure's and that warning
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:warnings",
                                           "-k", "marked_fed_back and not unmarked")
    result.assert_outcomes(failed=1)
    assert "OtelJaxWarning" not in result.stdout.str() + result.stderr.str()
    out = _before_summary(result.stdout.str()) + result.stderr.str()
    assert out.count("will compile again") == 1


def _before_summary(stdout: str) -> str:
    return stdout.partition("short test summary info")[0]


def test_the_option_and_the_ini_gate_every_test(pytester):
    pytester.makepyfile(PROGRAM)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider",
                                           "--otel-jax-no-hazards")
    result.assert_outcomes(passed=1, failed=2)
    pytester.makeini("[pytest]\notel_jax_no_hazards = true\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
