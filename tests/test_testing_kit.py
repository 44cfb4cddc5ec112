"""Compile budgets, the pytest plugin, the steady-state guard and fix hints, on real JAX."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax import CAUSE_KINDS, hint_for
from otel_jax._explain._hints import HINTS
from otel_jax.testing import assert_max_compiles, record_compiles

pytest_plugins = ["pytester"]


def test_budget_passes_at_the_limit_without_install():
    otel_jax.uninstall()

    @jax.jit
    def f(x):
        return x + 1

    with assert_max_compiles(2) as budget:
        f(jnp.ones(2))
        f(jnp.ones(3))
        for _ in range(10):
            f(jnp.ones(3))
    assert budget.count == 2


def test_budget_fails_above_the_limit_naming_the_cause():
    @jax.jit
    def g(x):
        return x * 2

    with pytest.raises(AssertionError) as excinfo:
        with assert_max_compiles(1):
            g(jnp.ones(4))
            g(jnp.ones(5))
    message = str(excinfo.value)
    assert "expected at most 1 compilation, got 2" in message
    assert "#2 shape: x: f32[4] -> f32[5]" in message
    assert "hint: pad or bucket" in message


def test_budget_for_one_function_ignores_others_and_eager_ops():
    @jax.jit
    def target(x):
        return x - 1

    @jax.jit
    def other(x):
        return x + 1

    with assert_max_compiles(1, fn=target) as budget:
        target(jnp.ones(6))
        other(jnp.ones(6))
        other(jnp.ones(7))
        jnp.cos(jnp.ones((9, 11)))  # eager op-by-op compiles
    assert budget.count == 1


def test_budget_counts_compiles_not_traces():
    @jax.jit
    def h(x):
        return x + 3

    with assert_max_compiles(0):
        jax.eval_shape(h, jnp.ones(3))  # traces, never compiles


def test_budget_as_decorator():
    @jax.jit
    def k(x):
        return x / 2

    @assert_max_compiles(1)
    def run():
        k(jnp.ones(2))
        k(jnp.ones(8))

    with pytest.raises(AssertionError, match="got 2"):
        run()


def test_record_compiles_lists_records():
    @jax.jit
    def r(x):
        return x

    with record_compiles(r) as rec:
        r(jnp.ones(2))
        r(jnp.ones(2, dtype=jnp.int32))
    assert [x.cause_kind for x in rec] == ["first_compile", "dtype"]


def test_pytest_marker_fails_a_recompiling_test(pytester):
    pytester.makepyfile("""
        import jax, jax.numpy as jnp, pytest

        @jax.jit
        def step(x):
            return x * 2

        @pytest.mark.max_compiles(1)
        def test_recompiles():
            step(jnp.ones(3))
            step(jnp.ones(4))

        @pytest.mark.max_compiles(1)
        def test_steady():
            for _ in range(5):
                step(jnp.ones(5))

        def test_fixture(jax_compiles):
            step(jnp.ones(6))
            assert len(jax_compiles) == 1
            assert [r.cause_kind for r in jax_compiles] == ["shape"]
    """)
    # The plugin is registered through the pytest11 entry point: nothing to enable.
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "expected at most 1 compilation, got 2" in out
    assert "step #2 shape: x: f32[3] -> f32[4]" in out
    assert "pytest_plugin.py" not in out  # a clean failure, not the plugin's traceback


def test_guard_raises_only_after_warmup(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=2, on_recompile="raise")
    try:
        @jax.jit
        def step(x):
            return x + 1

        step(jnp.ones(2)); otel_jax.step()
        step(jnp.ones(3)); otel_jax.step()  # a recompile during warm-up: fine
        step(jnp.ones(3))  # a cache hit after warm-up: fine
        with pytest.raises(otel_jax.RecompileError, match="recompiled after warm-up"):
            step(jnp.ones(4))
    finally:
        otel_jax.uninstall()
    spans = telemetry.compiles("test_guard_raises_only_after_warmup.<locals>.step")
    assert [s.attributes["jax.compile.after_warmup"] for s in spans] == [False, False, True]
    points = [p for p in telemetry.metric_points("jax.compilations.after_warmup")
              if p.attributes["code.function.name"].endswith("step")]
    assert sum(p.value for p in points) == 1


def test_guard_warn_policy_and_mark_warmup_done(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     on_recompile="warn")
    try:
        @jax.jit
        def step(x):
            return x + 1

        step(jnp.ones(2))
        otel_jax.mark_warmup_done()
        with pytest.warns(otel_jax.OtelJaxWarning, match="weak_type|shape") as caught:
            call_line = inspect.currentframe().f_lineno + 1
            assert step(jnp.ones(5)).shape == (5,)
    finally:
        otel_jax.uninstall()
    line = telemetry.log_lines()[-1]
    assert line["after_warmup"] is True and line["cause_kind"] == "shape"
    # One warning, and it points at the user's call, not at a listener inside JAX.
    [warning] = [w for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)]
    assert (warning.filename, warning.lineno) == (__file__, call_line)


def test_a_hint_for_every_cause_kind():
    assert set(HINTS) == set(CAUSE_KINDS)
    assert "jnp.float32" in hint_for("weak_type")
    # true whether a loop or a function called again made it anew: no loop is named
    assert "once" in hint_for("function_identity")
    assert "loop" not in hint_for("function_identity")
    assert "pad or bucket" in hint_for("shape")
    assert "__eq__" in hint_for("static_argument") and "tuple" in hint_for("static_argument")
    assert hint_for("no-such-kind") == hint_for("unknown")


def test_every_finer_hint_is_keyed_by_a_cause_kind_and_a_kind_of_change():
    from otel_jax._core._vocab import CauseKind
    from otel_jax._explain._diff import Detail
    from otel_jax._explain._hints import DETAIL_HINTS

    details = {d.value for d in Detail}
    for kind, detail in DETAIL_HINTS:
        assert isinstance(kind, CauseKind) and detail in details, (kind, detail)
        assert hint_for(kind.value, detail=detail) == DETAIL_HINTS[kind, detail]


def test_hint_in_log_line(telemetry):
    @jax.jit
    def w(x):
        return x * jnp.float32(2)

    w(w(1.0))
    line = [ln for ln in telemetry.log_lines() if ln["function"].endswith(".w")][-1]
    assert line["cause_kind"] == "weak_type" and line["hint"] == hint_for("weak_type")


def test_a_refused_recompile_retried_reads_as_the_same_compile(telemetry, caplog):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=1, on_recompile="raise", storm_threshold=2)
    try:
        @jax.jit
        def step(x):
            return x + 1

        step(jnp.ones(2)); otel_jax.step()
        for _ in range(4):  # a loop that retries the refused call
            with pytest.raises(otel_jax.RecompileError):
                step(jnp.ones(5))
    finally:
        otel_jax.uninstall()
    spans = telemetry.compiles(
        "test_a_refused_recompile_retried_reads_as_the_same_compile.<locals>.step")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 2, 2, 2]
    assert {s.attributes["jax.compile.cause.kind"] for s in spans[1:]} == {"shape"}
    # refused compiles did not happen: the history keeps the first one only (read after
    # uninstall(): with the warning that nothing records any more)
    with pytest.warns(otel_jax.OtelJaxWarning, match="not recording compiles"):
        assert [e.count for e in otel_jax.compile_history(step)] == [1]
    otel_jax.flush()
    assert "jax.recompile_storm" not in telemetry.log.getvalue()
