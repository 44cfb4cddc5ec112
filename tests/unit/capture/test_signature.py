"""``_capture._signature``: what a compile saw, as plain data."""

from __future__ import annotations

import jax

from otel_jax._capture import _signature
from otel_jax._capture._signature import UNCOMMITTED, Placement, StaticArg, StaticKind


def test_static_kinds_keep_the_texts_fingerprints_hash():
    assert [k.value for k in StaticKind] == ["static_argument", "pytree_structure",
                                             "graph_node"]


def test_not_captured_stands_in_for_a_compile_without_a_miss():
    sig = _signature.uncaptured()
    assert not sig.captured and sig.num_leaves == 0


def test_same_object_is_told_by_the_numbers_taken_while_alive():
    def arg(obj_id: int) -> StaticArg:
        return StaticArg(name="o", type="T", repr="<T>", hash=1, identity_hashed=True,
                         obj_id=obj_id)

    assert arg(7).same_object_as(arg(7)) is True
    assert arg(7).same_object_as(arg(8)) is False
    assert arg(0).same_object_as(arg(7)) is None  # not numbered: unknown
    assert arg(7) == arg(8)  # the number is no part of equality: JAX's hash decides


def test_a_placement_reads_as_its_text_and_compares_as_a_tuple():
    sharded = Placement("sharded P('data') over mesh(data=2)", True, ("data",), "data=2")
    assert str(sharded) == sharded.text and str(UNCOMMITTED) == "uncommitted"
    assert sharded == Placement(sharded.text, True, ("data",), "data=2") != UNCOMMITTED


def test_as_dict_shows_what_a_person_reads():
    treedef = jax.tree_util.tree_structure(((0,), {}))
    static = StaticArg(name="n", type="int", repr="3", hash=3, identity_hashed=False)
    structure = StaticArg(name="tree", type="PyTreeDef", repr="PyTreeDef(*)", hash=None,
                          identity_hashed=False, kind=StaticKind.PYTREE_STRUCTURE)
    by_identity = StaticArg(name="f", type="function", repr="<function f>", hash=1,
                            identity_hashed=True)
    sig = _signature.Signature(
        function_ref=None, function_id=0, options=(("donate_argnums", "()"),
                                                   ("inline", "True")),
        context=(), treedef=treedef, avals=(), top_names=("x",), paths=("x",),
        types=("f32[3]",), placements=(UNCOMMITTED,),
        statics=(static, structure, by_identity))
    assert sig.as_dict() == {
        "arguments": {"x": {"type": "f32[3]", "placement": "uncommitted"}},
        "static_arguments": {"n": "3", "f": "<function f> (hashed by identity)"},
        "pytree_structure": repr(treedef),
        "jit_options": {"inline": "True"},
    }
