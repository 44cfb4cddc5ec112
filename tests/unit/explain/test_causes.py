"""``_explain._causes``: the cause of one compile in words, with its kind and hint."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from otel_jax._capture import _signature, _statics
from otel_jax._capture._source import FunctionInfo
from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _causes
from otel_jax._explain._hints import hint_for
from otel_jax._explain._model import Change, Detail, Diff

from ..signatures import build

INFO = FunctionInfo("train_step", "train.py", 12)
F32_3 = jax.ShapeDtypeStruct((3,), jnp.float32)
F32_4 = jax.ShapeDtypeStruct((4,), jnp.float32)


def test_the_first_compile():
    cause = _causes.explain(INFO, 1, [], build(F32_3))
    assert cause.kind is CauseKind.FIRST_COMPILE
    assert cause.text == "first compilation of train_step"
    assert cause.hint == hint_for(CauseKind.FIRST_COMPILE) and cause.compared_with is None


def test_a_recompile_is_explained_against_the_closest_earlier_compile():
    earlier = [(1, build(F32_4, names=("x",))), (2, build(F32_3, F32_3, names=("x", "y")))]
    cause = _causes.explain(INFO, 3, earlier, build(F32_3, names=("x",)))
    assert cause.kind is CauseKind.SHAPE
    assert cause.text == "x: f32[4] -> f32[3]"
    assert cause.compared_with == 1
    assert cause.hint == hint_for(CauseKind.SHAPE)


def test_the_same_signature_again_names_no_eviction_without_evidence():
    cause = _causes.explain(INFO, 2, [(1, build(F32_3))], build(F32_3))
    assert cause.kind is CauseKind.UNKNOWN and cause.compared_with == 1
    assert cause.text.startswith("same signature as compile #1")
    assert "the difference was not found" in cause.text and "evict" not in cause.text


def test_the_same_signature_after_a_seen_cache_clear_names_it():
    old = dataclasses.replace(build(F32_3), cache_clears=0)
    new = dataclasses.replace(build(F32_3), cache_clears=2)
    cause = _causes.explain(INFO, 2, [(1, old)], new)
    assert cause.kind is CauseKind.UNKNOWN and cause.compared_with == 1
    assert cause.text.endswith("jax.clear_caches() was called 2 times since, which dropped "
                               "the compiled program")
    unwatched = _causes.explain(INFO, 2, [(1, build(F32_3))],
                                dataclasses.replace(build(F32_3), cache_clears=3))
    assert "not found" in unwatched.text  # no count at the earlier compile: no evidence


def test_nothing_to_compare_with_is_unknown():
    assert _causes.explain(INFO, 2, [], build(F32_3)).kind is CauseKind.UNKNOWN
    uncaptured = _causes.explain(INFO, 2, [(1, build(F32_3))], _signature.uncaptured())
    assert uncaptured.kind is CauseKind.UNKNOWN and "not captured" in uncaptured.text
    none_kept = _causes.explain(INFO, 3, [(1, _signature.uncaptured())], build(F32_3))
    assert "no earlier signature was captured" in none_kept.text


def test_the_top_change_first_and_how_many_more():
    d = Diff((Change("y", CauseKind.WEAK_TYPE, "f32[] (weak)", "f32[]"),
              Change("x", CauseKind.SHAPE, "f32[2]", "f32[3]")), 5)
    assert _causes.describe(d) == "x: f32[2] -> f32[3] (+4 more)"
    assert _causes.describe(Diff((), 0)) == ""


def test_a_new_function_object_names_what_it_binds():
    d = Diff((Change("<function>", CauseKind.FUNCTION_IDENTITY, "earlier function object",
                     "new function object, same source", Detail.NEW_FUNCTION),
              Change("<function>.k", CauseKind.FUNCTION_IDENTITY, "2", "3",
                     Detail.BOUND_VALUE, "k")), 2)
    assert _causes.describe(d) == (
        "a new function object for the same source; bound k: 2 -> 3 (jax.jit caches per "
        "function object: a jax.jit(lambda ...) or functools.partial re-created each call)")


def test_an_identity_hashed_static_names_its_type_and_fields():
    d = Diff((Change("opt", CauseKind.STATIC_ARGUMENT, "Opt() (a Opt hashed by identity)",
                     "new Opt instance (hashed by identity)", Detail.IDENTITY_HASHED, "Opt"),
              Change("opt.lr", CauseKind.STATIC_ARGUMENT, "0.1", "0.2",
                     Detail.FIELD_OF_IDENTITY)), 2)
    assert _causes.describe(d) == (
        "static argument opt: a new Opt instance; Opt hashes by identity (no "
        "__eq__/__hash__), so every new instance compiles again; its fields differ too: "
        "lr: 0.1 -> 0.2")


def test_the_hint_follows_the_top_change_s_detail():
    earlier = [(1, build(F32_3, statics=[_statics.static_arg("n", 2)]))]
    moved = build(F32_3, statics=[_statics.static_arg("n", 2, keyword=True)])
    cause = _causes.explain(INFO, 2, earlier, moved)
    assert cause.kind is CauseKind.STATIC_ARGUMENT
    assert cause.hint == hint_for(CauseKind.STATIC_ARGUMENT, detail=Detail.MOVED.value)


def test_failures_are_unknown_with_what_went_wrong():
    assert "ZeroDivisionError" in _causes.diff_failed(ZeroDivisionError(), 3).text
    assert _causes.history_failed().kind is CauseKind.UNKNOWN
