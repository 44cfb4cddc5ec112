"""``_capture._jax._values``: PRNG keys, meshes and committed arrays, read off real values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from otel_jax._capture._jax import _values


def test_typed_and_legacy_prng_keys():
    assert _values.prng_key_impl(jax.random.key(0)) == "threefry2x32"
    assert _values.prng_key_impl(jnp.ones(2)) is None
    assert _values.prng_key_impl(object()) is None
    assert _values.is_raw_key_data(jax.random.PRNGKey(0))
    assert not _values.is_raw_key_data(jnp.ones(2))
    assert not _values.is_raw_key_data(object())


def test_a_mesh_is_its_axes_and_its_devices():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    fields = dict(_values.mesh_fields(mesh))
    assert fields["axis_names"] == "('batch',)" and fields["axis_sizes"] == "(1,)"
    assert fields["devices"] == f"ids {jax.devices()[0].id}"
    assert _values.mesh_fields(object()) is None
    assert not _values.interned_by_jax(object())


def test_committed_flags_of_arrays_none_for_other_values():
    device = jax.devices()[0]
    loose, placed = jnp.ones(2), jax.device_put(jnp.ones(2), device)
    assert _values.committed_flags([loose, placed]) == [False, True]
    assert _values.committed_flags([]) == []
    assert _values.committed_flags([np.ones(2)]) is None
    assert _values.is_committed(placed) is True and _values.is_committed(1.0) is None
