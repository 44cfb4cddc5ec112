"""``_explain._trees``: two argument trees walked together, reported where they part."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import pytest

from otel_jax._capture import _wrappers
from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _trees
from otel_jax._explain._model import ABSENT, Change, Detail

from ..signatures import build

X = jax.ShapeDtypeStruct((2,), jnp.float32)


def structure(old, new):
    found: list[Change] = []
    _trees.structure_changes(old, new, found.append)
    return found


def test_a_dict_key_added_and_one_removed():
    old = build({"x": X, "y": X}, names=("batch",))
    new = build({"x": X, "mask": X}, names=("batch",))
    assert structure(old, new) == [
        Change("batch['y']", CauseKind.PYTREE_STRUCTURE, "f32[2]", ABSENT, Detail.REMOVED),
        Change("batch['mask']", CauseKind.PYTREE_STRUCTURE, ABSENT, "f32[2]", Detail.ADDED),
    ]


def test_none_that_became_an_array():
    old = build(X, None, names=("x", "mask"))
    new = build(X, X, names=("x", "mask"))
    assert structure(old, new) == [Change("mask", CauseKind.PYTREE_STRUCTURE, "None", "f32[2]")]


def test_a_positional_argument_added():
    old = build(X, names=("x", "y"))
    new = build(X, X, names=("x", "y"))
    assert structure(old, new) == [
        Change("y", CauseKind.PYTREE_STRUCTURE, ABSENT, "f32[2]", Detail.ADDED)]


def test_an_argument_passed_by_keyword_after_positionally_is_one_change():
    old = build(X, X, names=("x", "y"))
    new = build(X, names=("x", "y"), kwargs={"y": X})
    assert structure(old, new) == [
        Change("y", CauseKind.PYTREE_STRUCTURE, "passed positionally (f32[2])",
               "passed by keyword (f32[2])", Detail.MOVED)]


class Batch(NamedTuple):
    x: jax.ShapeDtypeStruct
    y: jax.ShapeDtypeStruct


Before = Batch


class Batch(NamedTuple):  # the class defined again, with a field more
    x: jax.ShapeDtypeStruct
    y: jax.ShapeDtypeStruct
    mask: jax.ShapeDtypeStruct


def test_a_named_tuple_field_added_is_named_by_its_field():
    old = build(Before(X, X), names=("batch",))
    new = build(Batch(X, X, X), names=("batch",))
    assert structure(old, new) == [
        Change("batch.mask", CauseKind.PYTREE_STRUCTURE, ABSENT, "f32[2]", Detail.ADDED)]


def test_a_list_that_grew_is_summarised_whole():
    old = build([X, X], names=("xs",))
    new = build([X, X, X], names=("xs",))
    assert structure(old, new) == [
        Change("xs", CauseKind.PYTREE_STRUCTURE, "list with 2 leaves", "list with 3 leaves")]


def test_tree_changes_of_two_bare_treedefs():
    a = jax.tree_util.tree_structure({"w": 1, "b": 2})
    b = jax.tree_util.tree_structure({"w": 1, "b": (2, 3)})
    found: list[Change] = []
    _trees.tree_changes("params", a, b, found.append)
    assert found == [Change("params['b']", CauseKind.PYTREE_STRUCTURE, "leaf",
                            "tuple with 2 leaves")]


def test_an_equinox_static_field_by_its_name():
    eqx = pytest.importorskip("equinox")

    class Net(eqx.Module):
        w: jax.Array
        activation: str = eqx.field(static=True)

    old = build(Net(jnp.ones(2), "relu"), names=("net",))
    new = build(Net(jnp.ones(2), "gelu"), names=("net",))
    assert structure(old, new) == [
        Change("net.activation", CauseKind.PYTREE_STRUCTURE, "static 'relu'", "static 'gelu'",
               Detail.STATIC_FIELD, "str")]


def test_an_nnx_module_attribute_added():
    nnx = pytest.importorskip("flax.nnx")

    class Model(nnx.Module):
        def __init__(self, extra):
            self.w = nnx.Param(jnp.ones(2))
            if extra:
                self.b = nnx.Param(jnp.ones(2))

    old = build(Model(False), names=("model",))
    new = build(Model(True), names=("model",))
    found = structure(old, new)
    node_type, aux = jax.tree_util.tree_structure(Model(True)).node_data()
    if _wrappers.nnx_pytree_aux(node_type, aux) is not None:
        # the attributes matched by name: the one added is named
        assert [(c.path, c.kind, c.detail) for c in found] == [
            ("model.b", CauseKind.PYTREE_STRUCTURE, Detail.ADDED)]
    else:  # a flax whose Module pytrees this reader does not know: the node whole
        assert [(c.path, c.kind, c.detail) for c in found] == [
            ("model", CauseKind.PYTREE_STRUCTURE, Detail.VALUE)]


@pytest.mark.parametrize(("leaf", "path", "key"), [
    ("state.ema_params['b']", "state", "state.ema_params"),
    ("state[1]['b']", "state", "state[1]"),
    ("batch['a.b]']['c']", "batch", "batch['a.b]']"),
    ("batch[\"it's\"]", "batch", "batch[\"it's\"]"),
    ("batch['x\\'y'][0]", "batch", "batch['x\\'y']"),
    ("state.step", "state", "state.step"),
    ("other.step", "state", None),
    ("state", "state", None),
    ("statement.x", "state", None),
])
def test_the_key_after_a_path_is_read_from_a_leaf_path(leaf, path, key):
    assert _trees.key_after(leaf, path) == key
