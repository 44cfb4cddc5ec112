"""The corpus check's reading of hints against what happened later in the same test
(benchmarks/corpus_hints.py): the facts read while the values live, and the check."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import otel_jax
from benchmarks import corpus_hints


def record(count: int, hint: str = "", *changes: tuple[str, str, str],
           equal: tuple[tuple[str, int], ...] = (), by_value: tuple[str, ...] = ()) -> dict:
    diff = [{"path": p, "kind": "static_argument", "before": b, "after": a}
            for p, b, a in changes]
    return {"qualname": "cast", "file": "t.py", "line": 1, "count": count,
            "cause_kind": "static_argument" if diff else "first_compile", "cause": "",
            "diff": diff, "diff_total": len(diff), "eager_op": False, "hint": hint,
            "equal_to_earlier": [list(e) for e in equal], "compared_by_value": list(by_value)}


EQUAL = f"every distinct value compiles once (later calls with an {corpus_hints.EQUAL_HITS})"


def test_an_equal_value_that_compiled_again_contradicts_the_hint():
    tests = {"t::a": {"records": [
        record(1),
        record(2, EQUAL, ("dtype", "<class 'bfloat16'>", "dtype(bfloat16)")),
        record(3, EQUAL, ("dtype", "dtype(bfloat16)", "'bfloat16'"), equal=(("dtype", 2),)),
    ]}}
    found = corpus_hints.check(tests)["hints_contradicted"]
    assert [(d["count"], d["by"]) for d in found] == [(2, 3), (3, 3)]
    assert "dtype == its value at compile #2" in found[0]["why"]
    assert corpus_hints.format_entry(found[0]).startswith("t::a: cast #2 says")


def test_an_equal_value_of_another_type_does_not_contradict_a_same_type_claim():
    typed = ("every distinct value compiles once (later calls with the same type and an "
             f"{corpus_hints.EQUAL_HITS})")
    tests = {"t::a": {"records": [
        record(1),
        record(2, typed, ("n", "2", "3")),
        record(3, "", ("n", "3", "2.0"), equal=(("n", 1, False),)),  # 2.0 == 2, a float
    ]}, "t::b": {"records": [
        record(1),
        record(2, typed, ("n", "2", "3")),
        record(3, "", ("n", "3", "2"), equal=(("n", 1, True),)),  # 2 again, yet compiled
    ]}}
    found = corpus_hints.check(tests)["hints_contradicted"]
    assert [(d["test"], d["count"], d["by"]) for d in found] == [("t::b", 2, 3)]


def test_an_equal_value_with_something_else_changed_contradicts_nothing():
    tests = {"t::a": {"records": [
        record(1),
        record(2, EQUAL, ("n", "1", "2")),
        # n is back to an equal value, but the shape changed too: not n's miss
        record(3, "", ("n", "2", "1"), ("x", "f32[3]", "f32[4]"), equal=(("n", 1),)),
    ]}, "t::b": {"records": [  # another test's compile #1 is not in this test
        record(4, EQUAL, ("n", "1", "2"), equal=(("n", 1),)),
    ]}}
    assert corpus_hints.check(tests)["hints_contradicted"] == []


def test_never_hits_said_of_a_value_compared_by_value_is_contradicted():
    never = "a new one never hits the cache: pass a value that equals itself"
    tests = {"t::a": {"records": [
        record(1),
        record(2, never, ("self", "<M>", "<M>"), by_value=("self",)),
    ]}, "t::b": {"records": [record(2, never, ("eps", "nan", "nan"))]}}
    found = corpus_hints.check(tests)["hints_contradicted"]
    assert [(d["test"], d["claim"]) for d in found] == [("t::a", "never hits the cache")]


def test_the_recorder_reads_equal_values_while_they_live_and_the_hints_hold():
    otel_jax.uninstall()
    otel_jax.install(log_output=None)
    recorder = corpus_hints.Recorder().__enter__()
    try:
        @functools.partial(jax.jit, static_argnames="compute_dtype")
        def cast(x, compute_dtype):
            return x.astype(compute_dtype)

        half = jnp.ones(3, jnp.bfloat16)
        for dtype in (jnp.bfloat16, half.dtype, "bfloat16", jnp.float32, jnp.float32):
            cast(jnp.ones(3), compute_dtype=dtype)
        otel_jax.flush()
        taken = []
        for r in recorder.records:
            taken.append({"qualname": r.function.qualname, "file": r.function.file,
                          "line": r.function.line, "count": r.count, "cause": r.cause,
                          "diff": [c.as_dict() for c in r.diff.changes],
                          "diff_total": r.diff.total, "eager_op": r.eager_op,
                          **corpus_hints.record_facts(recorder, r)})
    finally:
        recorder.__exit__()
        otel_jax.uninstall()
    assert [r["count"] for r in taken] == [1, 2, 3, 4]
    # dtype(bfloat16) == jnp.bfloat16 (compile 1); "bfloat16" == dtype(bfloat16) (compile 2)
    assert ["compute_dtype", 1, False] in taken[1]["equal_to_earlier"]  # types apart
    assert ["compute_dtype", 2, False] in taken[2]["equal_to_earlier"]
    assert taken[3]["equal_to_earlier"] == []
    assert all("compute_dtype" in r["compared_by_value"] for r in taken)
    assert corpus_hints.check({"t": {"records": taken}})["hints_contradicted"] == []
    # what the check catches: the hint these compiles got before hints were checked
    for r in taken[1:3]:
        r["hint"] = EQUAL
    assert len(corpus_hints.check({"t": {"records": taken}})["hints_contradicted"]) == 2
