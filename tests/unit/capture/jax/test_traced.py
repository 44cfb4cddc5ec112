"""``_capture._jax._traced``: argument trees as JAX's cache tells them apart, and the static
fields of a registered dataclass."""

from __future__ import annotations

import dataclasses

import jax

from otel_jax._capture._jax import _traced


@dataclasses.dataclass
class Layer:
    w: object
    width: int


jax.tree_util.register_dataclass(Layer, data_fields=["w"], meta_fields=["width"])


@dataclasses.dataclass
class Other:
    w: object
    width: int


jax.tree_util.register_dataclass(Other, data_fields=["w"], meta_fields=["width"])


def test_the_static_fields_a_dataclass_was_registered_with():
    assert _traced.dataclass_meta_fields(Layer) == ("width",)
    assert _traced.dataclass_meta_fields(int) is None


def test_trees_are_equal_only_when_their_hashes_agree_too():
    tree = jax.tree_util.tree_structure
    a, b = tree(({"x": 1},)), tree(({"x": 2},))
    assert _traced.trees_equal(a, b, _traced.tree_hash(a), _traced.tree_hash(b))
    c = tree(({"y": 1},))
    assert not _traced.trees_equal(a, c, _traced.tree_hash(a), _traced.tree_hash(c))
    # two dataclass types with the same fields: told apart, on every jaxlib
    la, lo = tree(Layer(1, 2)), tree(Other(1, 2))
    assert not _traced.trees_equal(la, lo, _traced.tree_hash(la), _traced.tree_hash(lo))
    assert isinstance(_traced.tree_hash(a), int)
