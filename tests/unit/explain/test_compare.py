"""``_explain._compare``: the per-part diff of two signatures of one function."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from conftest import needs_devices

from otel_jax._capture import _signature
from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _compare
from otel_jax._explain._model import ABSENT, MAX_CHANGES, TRANSFORMATION_PATH, Change, Detail

from ..signatures import build, static


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def changes(old, new):
    return list(_compare.diff(old, new).changes)


def test_a_shape_a_dtype_and_a_weak_type():
    old = build(sds((2,)), sds((3,)), 1.0, names=("x", "y", "lr"))
    new = build(sds((4,)), sds((3,), jnp.int32), jnp.float32(1.0), names=("x", "y", "lr"))
    assert changes(old, new) == [
        Change("x", CauseKind.SHAPE, "f32[2]", "f32[4]"),
        Change("y", CauseKind.DTYPE, "f32[3]", "i32[3]"),
        Change("lr", CauseKind.WEAK_TYPE, "f32[] (weak)", "f32[]"),
    ]
    assert _compare.diff(old, new).kind is CauseKind.DTYPE


def test_leaves_inside_a_tree_are_named_by_their_path():
    old = build({"x": sds((32, 8))}, names=("batch",))
    new = build({"x": sds((17, 8))}, names=("batch",))
    assert changes(old, new) == [
        Change("batch['x']", CauseKind.SHAPE, "f32[32,8]", "f32[17,8]")]


def test_a_device_and_a_sharding():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = needs_devices(4)[:4]
    x = jnp.ones((4, 4))
    on_0 = build(jax.device_put(x, devices[0]), names=("x",))
    on_1 = build(jax.device_put(x, devices[1]), names=("x",))
    platform = devices[0].platform
    assert changes(on_0, on_1) == [
        Change("x", CauseKind.DEVICE_PLACEMENT, f"committed {platform}:0",
               f"committed {platform}:1")]
    mesh = Mesh(np.array(devices).reshape(2, 2), ("a", "b"))
    rows = build(jax.device_put(x, NamedSharding(mesh, P("a"))), names=("x",))
    cols = build(jax.device_put(x, NamedSharding(mesh, P(None, "b"))), names=("x",))
    [change] = changes(rows, cols)
    assert (change.path, change.kind) == ("x", CauseKind.SHARDING)
    assert change.before == rows.placements[0].text and change.after == cols.placements[0].text


@dataclasses.dataclass(frozen=True)
class Config:
    lr: float
    name: str = "adam"


class ByIdentity:
    pass


def test_static_values():
    x = sds((2,))
    assert changes(build(x, statics=[static("n", 2)]), build(x, statics=[static("n", 3)])) == [
        Change("n", CauseKind.STATIC_ARGUMENT, "2", "3")]
    assert changes(build(x), build(x, statics=[static("n", 3)])) == [
        Change("n", CauseKind.STATIC_ARGUMENT, ABSENT, "3", Detail.ADDED)]
    assert changes(build(x, statics=[static("n", 3)]), build(x)) == [
        Change("n", CauseKind.STATIC_ARGUMENT, "3", ABSENT, Detail.REMOVED)]


def test_a_dataclass_static_by_its_fields():
    x = sds((2,))
    old = build(x, statics=[static("cfg", Config(0.1))])
    new = build(x, statics=[static("cfg", Config(0.2))])
    assert changes(old, new) == [Change("cfg.lr", CauseKind.STATIC_ARGUMENT, "0.1", "0.2")]


def test_a_static_passed_another_way_is_moved():
    x = sds((2,))
    old = build(x, statics=[static("n", 2)])
    new = build(x, statics=[static("n", 2, keyword=True)])
    assert changes(old, new) == [Change("n", CauseKind.STATIC_ARGUMENT, "passed positionally",
                                        "passed by keyword", Detail.MOVED)]


def test_a_new_instance_of_a_type_hashed_by_identity():
    x = sds((2,))
    old = build(x, statics=[static("opt", ByIdentity())])
    new = build(x, statics=[static("opt", ByIdentity())])
    [change] = changes(old, new)
    assert (change.path, change.kind, change.detail) == (
        "opt", CauseKind.STATIC_ARGUMENT, Detail.IDENTITY_HASHED)
    assert change.subject == "ByIdentity" or change.subject.endswith(".ByIdentity")
    assert change.after.startswith("new ") and "hashed by identity" in change.after


def adder(k):
    return lambda x: x + k


def test_another_function_object_of_the_same_source():
    made = [adder(1), adder(2)]
    old = build(sds((2,)), fun=made[0], bound=(("k", "1"),))
    new = build(sds((2,)), fun=made[1], bound=(("k", "2"),))
    assert changes(old, new) == [
        Change("<function>", CauseKind.FUNCTION_IDENTITY, "earlier function object",
               "new function object, same source", Detail.NEW_FUNCTION),
        Change("<function>.k", CauseKind.FUNCTION_IDENTITY, "1", "2", Detail.BOUND_VALUE, "k"),
    ]


def test_jit_options_and_tracing_context():
    x = sds((2,))
    old = build(x, options=(("donate_argnums", "()"),), context=(("jax_enable_x64", False),))
    new = build(x, options=(("donate_argnums", "(0,)"),), context=(("jax_enable_x64", True),))
    assert changes(old, new) == [
        Change("jit(donate_argnums)", CauseKind.JIT_OPTIONS, "()", "(0,)"),
        Change("jax_enable_x64", CauseKind.TRACING_CONTEXT, "False", "True"),
    ]


def test_a_transformation_is_the_whole_story():
    plain = build(sds((2,)))
    transformed = build(sds((3,)), transform=_signature.TRANSFORMED, program="1 inputs")
    assert changes(plain, transformed) == [
        Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY, _compare.CALLED_DIRECTLY,
               _compare.UNNAMED_TRANSFORMATION, Detail.TRANSFORMATION)]
    # named as applied where the transformations were read
    checked = dataclasses.replace(transformed, transformation="checkify()")
    assert changes(plain, checked) == [
        Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY, _compare.CALLED_DIRECTLY,
               "checkify()", Detail.TRANSFORMATION)]


def test_a_prng_key_of_another_style():
    typed = build(jax.random.key(0), names=("key",))
    raw = build(jax.random.PRNGKey(0), names=("key",))
    [change] = changes(typed, raw)
    assert (change.kind, change.detail) == (CauseKind.DTYPE, Detail.KEY_STYLE)


def test_the_diff_keeps_a_bounded_number_of_changes_and_counts_all():
    n = MAX_CHANGES + 5
    old = build(*[sds((1,))] * n)
    new = build(*[sds((2,))] * n)
    d = _compare.diff(old, new)
    assert len(d.changes) == MAX_CHANGES and d.total == n


def test_equal_signatures_have_no_difference():
    x = {"a": sds((2,)), "b": 1.0}
    d = _compare.diff(build(x, statics=[static("n", 2)]), build(x, statics=[static("n", 2)]))
    assert d.changes == () and d.total == 0
