"""``_capture._jax._pmap``: the user's view of the arguments of the function ``jax.pmap``
jits (JAX names them ``flat_args[i]`` or ``args[i]``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from otel_jax._capture._jax import _pmap


def test_the_users_parameter_names_and_static_arguments_are_read_back(misses):
    @functools.partial(jax.pmap, static_broadcasted_argnums=(2,))
    def scaled(weights, batch, factor):
        return weights["w"] * batch * factor

    devices = jax.local_device_count()
    scaled({"w": jnp.ones((devices, 2))}, jnp.ones((devices, 2)), 3.0)
    read = [r for m in misses if (r := _pmap.pmap_arguments(m.fun, 2)) is not None]
    assert len(read) == 1
    paths, statics, _ = read[0]
    assert paths == ("weights['w']", "batch")
    assert statics == (("factor", 3.0),)


def test_a_function_that_is_not_pmaps_reads_as_none():
    def plain(x):
        return x

    assert _pmap.pmap_arguments(plain, 1) is None
    assert _pmap.pmap_arguments(functools.partial(plain, 1), 0) is None
    assert _pmap._static_positions((0, 2), (object(),)) == {1}
