"""``_capture._statics``: a signature's statics entries, made from values."""

from __future__ import annotations

import dataclasses

import jax

from otel_jax._capture import _statics
from otel_jax._capture._reprs import DETAIL_LIMIT, static_fields
from otel_jax._capture._signature import StaticKind


@dataclasses.dataclass(frozen=True)
class Optim:
    lr: float
    name: str = "adam"
    secret: str = dataclasses.field(default="s3cr3t", repr=False)


def test_a_static_argument_as_recorded():
    cfg = Optim(0.1)  # held: a static value is referenced weakly
    s = _statics.static_arg("cfg", cfg)
    assert (s.name, s.kind, s.identity_hashed, s.keyword) == (
        "cfg", StaticKind.STATIC_ARGUMENT, False, False)
    assert s.hash == hash(Optim(0.1)) and s.fields == static_fields(Optim(0.1))
    assert s.value is not None and s.value.get() is cfg
    structure = _statics.static_arg("tree", jax.tree_util.tree_structure((1, 2)),
                                    kind=StaticKind.PYTREE_STRUCTURE)
    assert structure.tree is not None and structure.fields == () and structure.value is None


class ByIdentity:
    pass


def test_an_identity_hashed_static_is_told_apart_by_object():
    one = ByIdentity()
    a, b = _statics.static_arg("o", one), _statics.static_arg("o", one)
    assert a.identity_hashed and a.same_object_as(b) is True
    assert a.same_object_as(_statics.static_arg("o", ByIdentity())) is False


def test_an_identity_hashed_static_shows_its_instance_attributes():
    one = ByIdentity()
    one.rate = 0.5  # type: ignore[attr-defined]
    assert _statics.static_arg("o", one).fields == (("rate", "0.5"),)


def test_a_long_static_text_is_cut_and_its_longer_form_kept():
    s = _statics.static_arg("v", "x" * 10_000)
    assert s.repr.endswith(" chars)") and s.detail.endswith(" chars)")
    assert len(s.repr) < len(s.detail) < 2 * DETAIL_LIMIT
    assert s.detail.startswith(s.repr.partition("...")[0])


def test_an_unhashable_static_has_no_hash():
    assert _statics.static_arg("v", [1, 2]).hash is None


class Graph:
    """What ``_wrappers`` reads of a library's graph node argument."""

    def __init__(self) -> None:
        self.nodes = [("model", "Linear", "Linear (2 items)")]
        self.statics = [("model.deterministic", True)]


def test_a_graph_s_nodes_then_attributes_read_once_per_graph():
    graph = Graph()
    node, attribute = entries = _statics.graph_args(graph)  # type: ignore[arg-type]
    assert (node.name, node.type, node.repr, node.kind) == (
        "model", "Linear", "Linear (2 items)", StaticKind.GRAPH_NODE)
    assert (attribute.name, attribute.kind, attribute.hash) == (
        "model.deterministic", StaticKind.PYTREE_STRUCTURE, hash(True))
    assert "True" in attribute.repr and attribute.repr.startswith("static ")
    assert _statics.graph_args(graph) is entries  # type: ignore[arg-type]


def test_a_fallback_structure_is_compared_only_at_diff_time():
    tree = {"a": 1}
    s = _statics.fallback_arg("model", tree)
    assert s.fallback and s.tree is tree and s.hash is None and s.repr == ""
    assert s.kind is StaticKind.PYTREE_STRUCTURE
