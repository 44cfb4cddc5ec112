"""``_explain._aux``: a pytree node's static data compared, read back by library."""

from __future__ import annotations

import dataclasses
import functools

import jax

from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _aux
from otel_jax._explain._model import ABSENT, Change, Detail


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w"],
                   meta_fields=["depth", "name"])
@dataclasses.dataclass
class Layer:
    w: object
    depth: int
    name: str


def aux(node_type, before, after):
    found: list[Change] = []
    _aux.aux_changes("layer", node_type, before, after, found.append)
    return found


def test_a_dataclass_static_field_by_name():
    a = jax.tree_util.tree_structure(Layer(1, 2, "enc")).node_data()
    b = jax.tree_util.tree_structure(Layer(1, 3, "enc")).node_data()
    assert aux(Layer, a[1], b[1]) == [
        Change("layer.depth", CauseKind.PYTREE_STRUCTURE, "static 2", "static 3",
               Detail.STATIC_FIELD, "int")]


def test_static_data_of_another_shape_is_shown_whole():
    class Node:
        pass

    assert aux(Node, "a", "b") == [
        Change("layer", CauseKind.PYTREE_STRUCTURE, "Node with static data 'a'",
               "Node with static data 'b'")]


def test_a_tree_util_partial_by_the_function_it_wraps():
    def f(x):
        return x

    def g(x):
        return x

    [change] = aux(jax.tree_util.Partial, f, g)
    assert change.path == "layer.func" and change.detail is Detail.STATIC_FUNCTION


def test_static_field_names_read_from_a_registered_dataclass():
    assert _aux._static_field_names(Layer, 2) == ["depth", "name"]
    assert _aux._static_field_names(Layer, 5) is None
    assert _aux._static_field_names(int, 1) is None


def test_keyed_statics_changed_added_and_removed():
    found: list[Change] = []
    _aux._keyed_paths_changes({"m.rate": 0.1, "m.gone": 1}, {"m.rate": 0.2, "m.new": 2},
                              found.append)
    assert found == [
        Change("m.rate", CauseKind.PYTREE_STRUCTURE, "static 0.1", "static 0.2",
               Detail.STATIC_FIELD, "float"),
        Change("m.new", CauseKind.PYTREE_STRUCTURE, ABSENT, "static 2", Detail.ADDED),
        Change("m.gone", CauseKind.PYTREE_STRUCTURE, "static 1", ABSENT, Detail.REMOVED),
    ]
