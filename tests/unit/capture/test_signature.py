"""``_capture._signature``: what a compile saw, as plain data."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

import otel_jax
from otel_jax._capture import _signature
from otel_jax._capture._signature import UNCOMMITTED, StaticKind


def test_abstract_types_in_short_form():
    assert _signature.aval_text(jax.typeof(jnp.ones((2, 3)))) == "f32[2,3]"
    assert _signature.aval_text(jax.typeof(jnp.asarray(1.0))) == "f32[] (weak)"
    assert _signature.aval_text(jax.typeof(jnp.int32(1))) == "i32[]"


def test_placements():
    assert _signature.placement(jnp.ones(2)) is UNCOMMITTED
    assert _signature.placement(1.0) is UNCOMMITTED  # a host value
    devices = jax.devices()
    committed = _signature.placement(jax.device_put(jnp.ones(2), devices[1]))
    assert committed.text == "committed cpu:1" and not committed.sharded

    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(devices[:2], ("data",))
    sharded = _signature.placement(jax.device_put(jnp.ones(4), NamedSharding(mesh, P("data"))))
    assert sharded.sharded and sharded.spec == ("data",) and sharded.mesh == "data=2"
    assert sharded.text == f"sharded {P('data')} over mesh(data=2)"


@dataclasses.dataclass(frozen=True)
class Optim:
    lr: float
    name: str = "adam"
    secret: str = dataclasses.field(default="s3cr3t", repr=False)


def test_a_static_argument_as_recorded():
    cfg = Optim(0.1)  # held: a static value is referenced weakly
    s = _signature._static_arg("cfg", cfg)
    assert (s.name, s.kind, s.identity_hashed, s.keyword) == (
        "cfg", StaticKind.STATIC_ARGUMENT, False, False)
    assert s.hash == hash(Optim(0.1)) and s.fields == _signature.static_fields(Optim(0.1))
    assert s.value is not None and s.value.get() is cfg
    structure = _signature._static_arg("tree", jax.tree_util.tree_structure((1, 2)),
                                       kind=StaticKind.PYTREE_STRUCTURE)
    assert structure.tree is not None and structure.fields == () and structure.value is None


class ByIdentity:
    pass


def test_an_identity_hashed_static_is_told_apart_by_object():
    one = ByIdentity()
    a, b = _signature._static_arg("o", one), _signature._static_arg("o", one)
    assert a.identity_hashed and a.same_object_as(b) is True
    assert a.same_object_as(_signature._static_arg("o", ByIdentity())) is False


def test_static_kinds_keep_the_texts_fingerprints_hash():
    assert [k.value for k in StaticKind] == ["static_argument", "pytree_structure",
                                             "graph_node"]


def test_a_compile_s_signature_built_from_its_miss(telemetry):
    @functools.partial(jax.jit, static_argnames="n")
    def step(batch, lr, n):
        return batch["x"] * lr * n

    step({"x": jnp.ones((2, 3)), "y": jnp.zeros(2, jnp.int32)}, 0.1, n=3)
    sig = otel_jax.compile_history(step)[-1]._signature
    assert sig.captured and sig.top_names == ("batch", "lr")
    assert list(sig.paths) == ["batch['x']", "batch['y']", "lr"]
    assert list(sig.types) == ["f32[2,3]", "i32[2]", "f32[] (weak)"]
    assert all(p is UNCOMMITTED for p in sig.placements)
    [n] = sig.statics
    assert (n.name, n.repr, n.kind, n.keyword) == ("n", "3", StaticKind.STATIC_ARGUMENT, True)
    assert sig.function_ref() is not None
    assert sig.as_dict()["static_arguments"] == {"n": "3"}


def test_not_captured_stands_in_for_a_compile_without_a_miss():
    sig = _signature.uncaptured()
    assert not sig.captured and sig.num_leaves == 0


def test_a_long_static_text_is_cut_and_its_longer_form_kept():
    s = _signature._static_arg("v", "x" * 10_000)
    assert s.repr.endswith(" chars)") and s.detail.endswith(" chars)")
    assert len(s.repr) < len(s.detail) < 2 * _signature.DETAIL_LIMIT
    assert s.detail.startswith(s.repr.partition("...")[0])


def test_an_unhashable_static_has_no_hash():
    assert _signature._static_arg("v", [1, 2]).hash is None
