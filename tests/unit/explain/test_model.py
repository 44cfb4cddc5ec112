"""``_explain._model``: changes, the diff's kind, its JSON form and its bound."""

from __future__ import annotations

import json

from otel_jax._core._vocab import DIFF_TRUNCATED, CauseKind
from otel_jax._explain._model import ABSENT, Change, Detail, Diff, added, removed


def test_the_diff_kind_is_the_most_significant_change():
    # in the order of the contract's difference kinds: what a fix must address first
    changes = (Change("y", CauseKind.WEAK_TYPE, "f32[] (weak)", "f32[]"),
               Change("x", CauseKind.SHAPE, "f32[2]", "f32[3]"),
               Change("z", CauseKind.SHARDING, "uncommitted", "sharded"))
    assert Diff(changes, 3).kind is CauseKind.SHAPE
    assert Diff(changes[::-1], 3).kind is CauseKind.SHAPE
    static = Change("n", CauseKind.STATIC_ARGUMENT, "2", "3")
    assert Diff((*changes, static), 4).kind is CauseKind.STATIC_ARGUMENT
    assert Diff((), 0).kind is CauseKind.UNKNOWN


def test_a_change_as_data_and_as_text():
    change = Change("batch['x']", CauseKind.DTYPE, "f32[2]", "i32[2]")
    assert change.as_dict() == {"path": "batch['x']", "kind": "dtype", "before": "f32[2]",
                                "after": "i32[2]"}
    assert str(change) == "batch['x']: f32[2] -> i32[2]"
    assert change.detail is Detail.VALUE


def test_added_and_removed_say_absent_on_the_other_side():
    a = added("mask", CauseKind.PYTREE_STRUCTURE, "f32[2]")
    r = removed("mask", CauseKind.PYTREE_STRUCTURE, "f32[2]")
    assert (a.before, a.after, a.detail) == (ABSENT, "f32[2]", Detail.ADDED)
    assert (r.before, r.after, r.detail) == ("f32[2]", ABSENT, Detail.REMOVED)


def test_json_lists_every_kept_change_and_counts_the_rest():
    changes = tuple(Change(f"x{i}", CauseKind.SHAPE, "f32[1]", "f32[2]") for i in range(3))
    assert json.loads(Diff(changes, 3).to_json()) == [c.as_dict() for c in changes]
    # more found than kept: a final entry says how many are not shown
    out = json.loads(Diff(changes, 10).to_json())
    assert out[:3] == [c.as_dict() for c in changes]
    assert out[3]["kind"] == DIFF_TRUNCATED and out[3]["after"] == "7 more changes not shown"


def test_json_stays_within_its_limit():
    changes = tuple(Change(f"p{i}", CauseKind.SHAPE, "b" * 100, "a" * 100) for i in range(100))
    text = Diff(changes, 100).to_json(limit=2000)
    assert len(text) <= 2000
    out = json.loads(text)
    assert out[-1]["kind"] == DIFF_TRUNCATED
    assert out[-1]["after"] == f"{100 - (len(out) - 1)} more changes not shown"
