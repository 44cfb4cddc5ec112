"""Per-function state is bounded: past ``max_functions`` the least recently compiled
function's detail is dropped first, and counted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from conftest import Telemetry

import otel_jax
from otel_jax._core._vocab import Metric
from otel_jax._pipeline._engine import ENGINE
from otel_jax._pipeline._history import DEFAULT_MAX_FUNCTIONS


def _functions(n: int) -> list:
    space: dict = {}
    exec(compile("\n".join(f"def g{i}(x):\n    return x * {i} + 1" for i in range(n)),
                 "cap_functions.py", "exec"), space)
    return [space[f"g{i}"] for i in range(n)]


def test_past_max_functions_the_least_recently_compiled_detail_goes_first_and_is_counted():
    g = _functions(5)
    two, three = jnp.ones(2), jnp.ones(3)  # made before: no eager compile among the five
    otel_jax.uninstall()
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log, max_functions=3)
    try:
        before = ENGINE.history.dropped_functions  # what the cap dropped of earlier tests'
        # earlier tests' functions still kept (at most 3): the least recently compiled,
        # they go before any of these five
        earlier = len(ENGINE.history._functions)
        for f in g[:3]:
            jax.jit(f)(two)
        jax.jit(g[0])(three)  # g0 compiled again: now the most recent
        jax.jit(g[3])(two)
        jax.jit(g[4])(two)
        otel_jax.flush()
        assert ENGINE.history.dropped_functions - before == earlier + 2
        assert [len(otel_jax.compile_history(f)) for f in g] == [2, 0, 0, 1, 1]
        # the recompile kept its comparison; a dropped function's count stays exact
        assert otel_jax.compile_history(g[0])[-1].cause_kind == "shape"
        jax.jit(g[1])(three)
        assert [e.count for e in otel_jax.compile_history(g[1])] == [2]
        points = t.metric_points(Metric.FUNCTIONS_DROPPED)
        assert [p.value for p in points] == [ENGINE.history.dropped_functions]
    finally:
        otel_jax.uninstall()
    assert ENGINE.history.max_functions == DEFAULT_MAX_FUNCTIONS


def test_the_cap_is_read_from_its_variable(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_MAX_FUNCTIONS", "7")
    otel_jax.uninstall()
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log)
    try:
        assert ENGINE.history.max_functions == 7
    finally:
        otel_jax.uninstall()
