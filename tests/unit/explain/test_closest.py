"""``_explain._closest``: how far apart two signatures are, and the closest earlier one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from conftest import needs_devices

from otel_jax._capture import _signature
from otel_jax._explain import _closest

from ..signatures import build, static


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def test_equal_signatures_are_no_distance_apart():
    assert _closest.distance(build(f32(2, 3)), build(f32(2, 3))) == 0
    assert _closest.distance(build(f32(2, 3)), build(f32(2, 4))) > 0


def test_one_difference_is_closer_than_two():
    new = build(f32(8), f32(4))
    one = build(f32(8), f32(5))
    two = build(f32(9), f32(5))
    assert _closest.distance(one, new) < _closest.distance(two, new)
    assert _closest.closest([one, two], new) == (0, one)


def test_fewer_dimensions_apart_wins_a_tie_of_shapes():
    new = build(f32(8, 5))
    near, far = build(f32(8, 4)), build(f32(2, 5 + 1))
    assert _closest.closest([near, far], new) == (0, near)


def test_a_weak_type_alone_is_the_telling_difference():
    # f(1.0) after f(jnp.float32(1)) and f(jnp.int32(1)): the weak type is the story
    plain_float, plain_int = build(jnp.float32(1)), build(jnp.int32(1))
    new = build(1.0)
    assert new.types[0] == "f32[] (weak)"
    assert _closest.closest([plain_float, plain_int], new) == (0, plain_float)


def test_latest_wins_a_tie():
    new = build(f32(3))
    a, b = build(f32(4)), build(f32(5))
    assert _closest.closest([a, b], new) == (1, b)


def test_an_identical_earlier_signature_is_found_past_a_close_one():
    # a cache eviction: the identical one, even when a later one is one change away
    new = build(f32(3))
    same, close = build(f32(3)), build(f32(4))
    assert _closest.closest([same, close], new) == (0, same)


def test_signatures_not_captured_are_skipped():
    new = build(f32(3))
    assert _closest.closest([_signature.uncaptured()], new) is None
    kept = build(f32(4))
    assert _closest.closest([kept, _signature.uncaptured()], new) == (0, kept)


def test_another_transformed_program_is_never_close():
    plain = build(f32(3))
    transformed = build(f32(3), transform=_signature.TRANSFORMED, program="1 inputs")
    assert _closest.distance(transformed, plain) > _closest.distance(build(f32(9, 9, 9)), plain)
    assert _closest.closest([plain, transformed], build(f32(4))) == (0, plain)


def test_statics_count_by_name_and_by_field():
    new = build(f32(3), statics=[static("n", 2), static("mode", "train")])
    one = build(f32(3), statics=[static("n", 3), static("mode", "train")])
    two = build(f32(3), statics=[static("n", 3), static("mode", "eval")])
    assert _closest.distance(one, new) < _closest.distance(two, new)


def test_a_sharding_is_closer_to_a_sharding_than_to_one_device():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = needs_devices(4)[:4]
    mesh = Mesh(np.array(devices).reshape(2, 2), ("a", "b"))
    x = jnp.ones((4, 4))
    new = build(jax.device_put(x, NamedSharding(mesh, P("b"))))
    rows = build(jax.device_put(x, NamedSharding(mesh, P("a"))))
    one_device = build(jax.device_put(x, devices[0]))
    assert new.types == rows.types and new.placements != rows.placements
    assert _closest.distance(rows, new) < _closest.distance(one_device, new)
    assert _closest.closest([rows, one_device], new) == (0, rows)
