"""``_core._walk``: a bounded walk, each object once, depth first."""

from __future__ import annotations

from otel_jax._core._walk import walk


def test_depth_first_in_the_order_children_are_given_and_each_object_once():
    graph = {"a": ["b", "c"], "b": ["d", "a"], "c": ["d"], "d": []}
    assert list(walk("a", graph.__getitem__, depth=5, budget=100)) == ["a", "b", "d", "c"]


def test_no_deeper_than_depth_and_no_more_than_budget_objects():
    chain = {i: [i + 1] for i in range(1000)}
    assert list(walk(0, chain.__getitem__, depth=3, budget=100)) == [0, 1, 2, 3]
    assert list(walk(0, chain.__getitem__, depth=999, budget=5)) == [0, 1, 2, 3, 4]
    cycle = {0: [1], 1: [0]}  # each object once: a cycle ends
    assert list(walk(0, cycle.__getitem__, depth=10**6, budget=10**6)) == [0, 1]


def test_children_that_raise_lead_nowhere_and_the_walk_goes_on():
    def children(value):
        if value == "bad":
            raise RuntimeError("a hostile attribute")
        return {"root": ["bad", "ok"], "ok": ["leaf"]}.get(value, [])

    assert list(walk("root", children, depth=5, budget=10)) == ["root", "bad", "ok", "leaf"]
