"""Nothing of otel_jax keeps a user's array alive.

Each case builds a big array, lets JAX see it through one path that does not
compile (or compiles and is then dropped), deletes every reference of its own
and checks through a weak reference that the array is gone.
"""

from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import pytest

BIG = 64 * 1024 * 1024  # float32 elements: 256 MB


def _big():
    return jnp.ones((BIG,), jnp.float32)


def _trace(x):
    jax.jit(lambda a: a * 2).trace(x)


def _eval_shape_of_jitted(x):
    jax.eval_shape(jax.jit(lambda a: a + 1), x)


def _lower(x):
    jax.jit(lambda a: a - 1).lower(x)


def _trace_then_other_function(x):
    # a compile of another function on the same thread must not be needed
    jax.jit(lambda a: a * 3).trace(x)
    jnp.sin(jnp.ones(2)).block_until_ready()


def _jitted_call(x):
    jax.jit(lambda a: a.sum())(x).block_until_ready()


_offsets = iter(range(10_000))


def _eager_op(x):
    # An eager op JAX compiles for x (new static limits each time): its record is made on
    # otel_jax's background thread after the call, which must not hold x until then.
    k = next(_offsets)
    jax.lax.slice(x, (k,), (k + 4,)).block_until_ready()


PATHS = {
    "trace": _trace,
    "eval_shape(jitted)": _eval_shape_of_jitted,
    "lower": _lower,
    "trace then an eager op": _trace_then_other_function,
    "jitted call": _jitted_call,
    "eager op": _eager_op,
}


def _gone(ref) -> bool:
    for _ in range(3):
        gc.collect()
        if ref() is None:
            return True
    return False


@pytest.mark.parametrize("path", sorted(PATHS))
def test_an_argument_is_not_kept_alive(telemetry, path):
    x = _big()
    ref = weakref.ref(x)
    PATHS[path](x)
    del x
    assert _gone(ref), f"{path}: the argument outlived the call"


def test_default_argument_arrays_die_with_their_jitted_function(telemetry):
    def make():
        default = _big()

        def scaled(x, scale=default):
            return x * scale[0]

        jitted = jax.jit(scaled)
        jitted(jnp.ones(3)).block_until_ready()
        return weakref.ref(default)

    ref = make()
    jax.clear_caches()
    assert _gone(ref), "a default argument of a deleted jitted function is still alive"


def test_the_cache_of_option_texts_holds_no_jit_wrapper(telemetry):
    from otel_jax._capture import _arg_texts

    def scaled(x, scale=jnp.ones(2)):
        return x * scale[0]

    jax.jit(scaled)(jnp.ones(3))
    jax.jit(scaled, donate_argnums=0)(jnp.ones(3))
    for key in _arg_texts._options_text:
        assert not type(key).__name__ == "PjitInfo"


def test_a_trace_still_leaves_the_next_compile_explained(telemetry):
    @jax.jit
    def f(x):
        return x + 1

    f.trace(jnp.ones(3))
    f(jnp.ones(3))
    f(jnp.ones(4))
    span = telemetry.last("test_a_trace_still_leaves_the_next_compile_explained.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "shape"
