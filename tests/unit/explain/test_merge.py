"""``_explain._merge``: related changes folded into the one a person would name."""

from __future__ import annotations

from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _merge
from otel_jax._explain._model import Change, Detail, added, removed

TREE, STATIC = CauseKind.PYTREE_STRUCTURE, CauseKind.STATIC_ARGUMENT


def test_a_path_gone_and_back_as_something_else_is_replaced():
    changes = [removed("model.n", TREE, "static 2"), added("model.n", TREE, "f32[]"),
               added("other", TREE, "f32[3]")]
    assert _merge.merge_gone_and_back(changes) == [
        Change("model.n", TREE, "static 2", "f32[]", Detail.REPLACED),
        added("other", TREE, "f32[3]")]


def test_nothing_to_merge_is_left_as_it_is():
    changes = [removed("a", TREE, "f32[2]"), added("b", TREE, "f32[2]")]
    assert _merge.merge_gone_and_back(changes) is changes
    assert _merge.merge_traced_and_static(changes) is changes
    assert _merge.merge_moved_arguments(changes, {"a"}) is changes


def test_what_appeared_under_a_path_that_appeared_is_implied():
    changes = [added("model.l3", TREE, "Linear"), added("model.l3.kernel", TREE, "f32[2,2]"),
               added("model.l3b", TREE, "f32[2]"), removed("cfg[0]", TREE, "leaf"),
               removed("cfg", TREE, "tuple")]
    assert _merge.drop_implied(changes) == [
        added("model.l3", TREE, "Linear"), added("model.l3b", TREE, "f32[2]"),
        removed("cfg", TREE, "tuple")]


def test_what_was_under_a_replaced_path_is_implied():
    changes = [Change("m", TREE, "Linear", "Conv", Detail.REPLACED),
               added("m.kernel_size", TREE, "static 3")]
    assert _merge.drop_implied(changes) == changes[:1]


def test_a_traced_array_that_became_a_static_value_is_one_change():
    changes = [removed("scale", TREE, "f32[]"), added("scale", STATIC, "2.0")]
    assert _merge.merge_traced_and_static(changes) == [
        Change("scale", STATIC, "f32[] (traced)", "2.0 (static)", Detail.TRACED_STATIC)]
    back = [removed("scale", STATIC, "2.0"), added("scale", TREE, "f32[]")]
    assert _merge.merge_traced_and_static(back) == [
        Change("scale", STATIC, "2.0 (static)", "f32[] (traced)", Detail.TRACED_STATIC)]


def test_an_argument_moved_from_positional_to_keyword():
    changes = [removed("y", TREE, "f32[2]"), added("y", TREE, "f32[2]")]
    assert _merge.merge_moved_arguments(changes, {"x", "y"}) == [
        Change("y", TREE, "passed positionally (f32[2])", "passed by keyword (f32[2])",
               Detail.MOVED)]
    assert _merge.merge_moved_arguments(changes, {"x"}) == [
        Change("y", TREE, "passed by keyword (f32[2])", "passed positionally (f32[2])",
               Detail.MOVED)]
