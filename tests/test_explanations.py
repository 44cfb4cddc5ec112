"""Causes that name what really happened: calling conventions, the closest earlier
signature inside one argument, static values field by field, what a re-created
partial or closure captured, and warnings that point at the user's code."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from conftest import diff_of


def only_change(span) -> dict:
    changes = diff_of(span)
    assert len(changes) == 1, changes
    return changes[0]


# --- positional vs keyword ----------------------------------------------------------

def test_static_argument_by_keyword_then_positionally(telemetry):
    @functools.partial(jax.jit, static_argnames="n")
    def power(x, n):
        return x ** n

    power(jnp.ones(3), n=2)
    power(jnp.ones(3), 2)  # the same value, passed positionally: JAX compiles again
    span = telemetry.last(
        "test_static_argument_by_keyword_then_positionally.<locals>.power")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert only_change(span) == {"path": "n", "kind": "static_argument",
                                 "before": "passed by keyword",
                                 "after": "passed positionally"}
    assert span.attributes["jax.compile.cause"] == "n: passed by keyword -> passed positionally"
    hint = span.attributes["jax.compile.hint"]
    assert "same way every call" in hint and "identity" not in hint


def test_static_argument_positionally_then_by_keyword_with_a_new_value(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    power(jnp.ones(3), 2)
    power(jnp.ones(3), n=3)
    span = telemetry.last("test_static_argument_positionally_then_by_keyword_with_a_new_"
                          "value.<locals>.power")
    assert only_change(span) == {"path": "n", "kind": "static_argument",
                                 "before": "passed positionally (2)",
                                 "after": "passed by keyword (3)"}


def test_array_argument_by_keyword_then_positionally_reads_in_that_direction(telemetry):
    @jax.jit
    def add(x, y):
        return x + y

    add(jnp.ones(3), y=jnp.ones(3))
    add(jnp.ones(3), jnp.ones(3))
    span = telemetry.last("test_array_argument_by_keyword_then_positionally_reads_in_that_"
                          "direction.<locals>.add")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "y", "kind": "pytree_structure",
                                 "before": "passed by keyword (f32[3])",
                                 "after": "passed positionally (f32[3])"}


# --- warnings point at the user's code ------------------------------------------------

def test_on_recompile_warn_points_at_the_users_call(telemetry):
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(jnp.ones(5))  # the line the warning must name
    finally:
        otel_jax.uninstall()
    ours = [w for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ours[0].filename == __file__
    import inspect

    source = inspect.getsource(test_on_recompile_warn_points_at_the_users_call)
    first = test_on_recompile_warn_points_at_the_users_call.__code__.co_firstlineno
    call_line = first + next(i for i, text in enumerate(source.splitlines())
                             if "step(jnp.ones(5))" in text)
    assert ours[0].lineno == call_line


def test_compile_history_warns_when_nothing_records():
    otel_jax.uninstall()

    @jax.jit
    def lonely(x):
        return x * 2

    lonely(jnp.ones(2))
    with pytest.warns(otel_jax.OtelJaxWarning, match="not recording") as record:
        assert otel_jax.compile_history(lonely) == []
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        otel_jax.compile_history(lonely)  # once is enough


def test_compile_history_is_quiet_while_recording(telemetry):
    @jax.jit
    def busy(x):
        return x * 2

    busy(jnp.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(otel_jax.compile_history(busy)) == 1
