"""``_capture._arg_texts``: what abstract values, placements and jit options read as."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
from conftest import needs_devices

from otel_jax._capture import _arg_texts
from otel_jax._capture._signature import UNCOMMITTED


def test_abstract_types_in_short_form():
    assert _arg_texts.aval_text(jax.typeof(jnp.ones((2, 3)))) == "f32[2,3]"
    assert _arg_texts.aval_text(jax.typeof(jnp.asarray(1.0))) == "f32[] (weak)"
    assert _arg_texts.aval_text(jax.typeof(jnp.int32(1))) == "i32[]"


def test_placements():
    assert _arg_texts.placement(jnp.ones(2)) is UNCOMMITTED
    assert _arg_texts.placement(1.0) is UNCOMMITTED  # a host value
    devices = needs_devices(2)
    committed = _arg_texts.placement(jax.device_put(jnp.ones(2), devices[1]))
    assert committed.text == f"committed {devices[1].platform}:1" and not committed.sharded

    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(devices[:2], ("data",))
    sharded = _arg_texts.placement(jax.device_put(jnp.ones(4), NamedSharding(mesh, P("data"))))
    assert sharded.sharded and sharded.spec == ("data",) and sharded.mesh == "data=2"
    assert sharded.text == f"sharded {P('data')} over mesh(data=2)"


def test_placements_of_all_leaves_match_each_leaf_s():
    devices = needs_devices(2)
    on_one = jax.device_put(jnp.ones(2), devices[1])
    flat = [jnp.ones(2), 1.0, on_one, jax.device_put(jnp.zeros(3), devices[1])]
    assert _arg_texts.placements_of(flat) == tuple(_arg_texts.placement(v) for v in flat)
    assert _arg_texts.placements_of([jnp.ones(2), jnp.ones(3)]) == (UNCOMMITTED,) * 2


def test_the_sharding_a_committed_sharded_placement_was_read_from():
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = needs_devices(2)
    by_rows = NamedSharding(Mesh(devices[:2], ("data",)), P("data"))
    placed = _arg_texts.placement(jax.device_put(jnp.ones(4), by_rows))
    assert _arg_texts.sharding_of(placed) == by_rows
    # placements alike read from shardings that are not equal (another device order):
    # which one an argument had is not known
    turned = NamedSharding(Mesh(np.array(devices[:2])[::-1], ("data",)), P("data"))
    assert _arg_texts.placement(jax.device_put(jnp.ones(4), turned)) == placed
    assert _arg_texts.sharding_of(placed) is None
    # not sharded, or not committed: none
    one = _arg_texts.placement(jax.device_put(jnp.ones(2), devices[1]))
    assert _arg_texts.sharding_of(one) is None and _arg_texts.sharding_of(UNCOMMITTED) is None


def test_option_texts_are_rendered_once_per_distinct_options():
    # a jit wrapper's options, as the attributes JAX keeps them under
    info = types.SimpleNamespace(donate_argnums=(0,), inline=True, keep_unused=False)
    texts = _arg_texts.option_texts(info)
    assert ("donate_argnums", "(0,)") in texts and ("inline", "True") in texts
    other = types.SimpleNamespace(donate_argnums=(0,), inline=True, keep_unused=False)
    assert _arg_texts.option_texts(other) is texts  # equal values: rendered once
    assert ("inline", "False") in _arg_texts.option_texts(
        types.SimpleNamespace(donate_argnums=(0,), inline=False))
    unhashable = types.SimpleNamespace(compiler_options_kvs=[("a", "1")])
    assert ("compiler_options", "[('a', '1')]") in _arg_texts.option_texts(unhashable)
