"""The differential corpus check (benchmarks/corpus.py): optax's own tests, run plain and
with otel_jax installed, must pass and fail alike, compile alike, and get causes no vaguer
than JAX's explanations; and the check's reading of JAX's explanations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import corpus

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 1200  # both runs of the subset take 2-4 minutes on a busy 2-core machine


def explanation(body: str, name: str = "f") -> str:
    return (f"TRACING CACHE MISS at /src/train.py:12 (main):\n"
            f"  for {name} defined at /src/train.py:3\n"
            f"  all previously seen cache keys differ. For the closest previous key:\n{body}")


def record(*changes: tuple[str, str, str], kind: str = "shape") -> dict:
    return {"qualname": "f", "cause_kind": kind, "cause": "",
            "diff": [{"path": p, "kind": kind, "before": b, "after": a}
                     for p, b, a in changes], "diff_total": len(changes)}


def test_jax_type_explanation_names_the_argument_and_its_new_type():
    parsed = corpus.parse_explanation(explanation(
        "  different input types:\n  * at p['w'], now i32[2] and before f32[2]"))
    assert (parsed.func_name, parsed.category) == ("f", "types")
    assert parsed.items == [{"name": "p['w']", "now": "i32[2]"}]
    assert corpus.missing_items(parsed, record(("p['w']", "f32[2]", "i32[2]"))) == []
    assert corpus.missing_items(parsed, record(("p", "f32[2]", "i32[2]"))) == [
        "argument p['w']"]
    assert corpus.missing_items(parsed, record(("p['w']", "f32[2]", "f32[3]"))) == [
        "p['w'] now i32[2] (otel_jax: f32[3])"]


def test_weak_type_explanation_compares_the_type_without_its_weak_mark():
    parsed = corpus.parse_explanation(explanation(
        "  different input types:\n  * at p, now f32[]{weak_type=False} and before "
        "f32[]{weak_type=True}https://docs.jax.dev/en/latest/type_promotion.html#weak-types"))
    assert corpus.missing_items(parsed, record(("p", "f32[] (weak)", "f32[]"))) == []


def test_jax_pytree_explanation_names_the_path_below_the_argument_and_changed_keys():
    parsed = corpus.parse_explanation(explanation(
        "  different input pytree:\n  * at input path [0][1], now <class 'dict'> with 2 "
        "children and before <class 'dict'> with 1 child, so the numbers of children do not "
        "match, with the symmetric difference of key sets: {'v'}"))
    assert parsed.category == "pytree"
    assert corpus.missing_items(parsed, record(("p['v']", "<absent>", "f32[]"))) == []
    assert corpus.missing_items(parsed, record(("p['w']", "f32[2]", "f32[3]"))) == [
        "key 'v' at input path [0][1]"]
    # The key set as JAX 0.10 prints it (joined with spaces): each key is its own item.
    both = corpus.parse_explanation(explanation(
        "  different input pytree:\n  * at input path [1], now <class 'dict'> with 2 "
        "children and before <class 'dict'> with 0 child, so the numbers of children do not "
        "match, with the symmetric difference of key sets: {'x' 'y'}"))
    by_keyword = record(("x", "passed positionally (i32[1,2])", "passed by keyword (i32[1,2])"),
                        ("y", "passed positionally (i32[])", "passed by keyword (i32[])"),
                        kind="pytree_structure")
    assert corpus.missing_items(both, by_keyword) == []
    assert corpus.missing_items(both, record(("x", "a", "b"))) == ["key 'y' at input path [1]"]
    assert corpus.key_names("'a', 'b'") == corpus.key_names("'a' 'b'") == ["a", "b"]
    assert corpus.key_names("0, 1") == ["0", "1"]
    keyword = corpus.parse_explanation(explanation(
        "  different input pytree:\n  * at input path [1]['k']['a'], now pytree leaf and "
        "before <class 'list'>, so their Python types differ"))
    assert corpus.missing_items(keyword, record(("k['a']", "[f32[]]", "f32[]"))) == []
    assert corpus.missing_items(keyword, record(("k['b']", "[f32[]]", "f32[]"))) == [
        "input path [1]['k']['a']"]


def test_context_explanation_names_the_config():
    parsed = corpus.parse_explanation(explanation(
        "  Tracing context doesn't match, e.g. due to config or context manager.\n"
        "  * jax_enable_x64 differs: now True and before False"))
    assert parsed.category == "context"
    assert corpus.missing_items(parsed, record(("jax_enable_x64", "False", "True"))) == []
    assert corpus.missing_items(parsed, record(("x", "f32[3]", "f64[3]"))) == [
        "config jax_enable_x64"]


def test_never_seen_explains_nothing_unless_another_function_shares_the_line():
    text = ("TRACING CACHE MISS at /src/t.py:9 (test):\n  never seen function:\n"
            "    fn id=1404 defined at /src/t.py:4")
    assert corpus.parse_explanation(text).category == "never_seen"
    again = text + ("\n  but seen another function defined on the same line; maybe the "
                    "function is\n  being re-defined repeatedly, preventing caching?")
    assert corpus.parse_explanation(again).category == "identity"
    assert corpus.parse_explanation(explanation(
        "  cache miss explanation unavailable")).category == "unavailable"


def test_each_compile_gets_the_last_top_level_explanation_of_its_function():
    def explain(name: str, nested: bool = False) -> dict:
        return {"type": "explain", "nested": nested, "text": explanation(
            f"  different input types:\n  * at x, now f32[{name}] and before f32[1]", name)}

    events = [explain("g"), explain("f", nested=True), {"type": "compile", "fun_name": "jit(g)"},
              {"type": "compile", "fun_name": "jit(f)"},  # a trace-cache hit: JAX says nothing
              explain("f"), explain("f"),  # the first was never compiled (an eval_shape)
              {"type": "compile", "fun_name": "jit(broadcast_in_dim)"},
              {"type": "compile", "fun_name": "jit(f)"}]
    found = corpus.explanations_of_compiles(events)
    assert [e.func_name if e else None for e in found] == ["g", None, None, "f"]
    assert found[3] is not None and found[3].text == events[5]["text"]


@pytest.mark.slow
def test_optax_subset_runs_alike_with_otel_jax_installed(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "corpus.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    assert "corpus: " in done.stdout.splitlines()[-1], output[-5000:]
    assert done.returncode == 0, output[-20000:]


def run_of(tests: dict) -> dict:
    return {"jax": "x", "wall_s": 2.0, "tests": tests}


def test_outcomes_counts_and_unknown_causes_are_all_reported():
    compile_f = {"type": "compile", "fun_name": "jit(f)"}
    shape = explanation("  different input types:\n  * at x, now f32[4] and before f32[3]")
    plain = run_of({"t::a": {"outcome": "passed", "events": [compile_f, compile_f],
                             "records": []},
                    "t::b": {"outcome": "passed", "events": [compile_f], "records": []}})
    first = {"qualname": "f", "file": "t.py", "line": 1, "count": 1,
             "cause_kind": "first_compile", "cause": "", "diff": [], "diff_total": 0,
             "eager_op": False}
    unknown = {**first, "count": 2, "cause_kind": "unknown", "cause": "same signature"}
    otel = run_of({
        "t::a": {"outcome": "passed", "records": [first, unknown],
                 "events": [compile_f, {"type": "explain", "text": shape}, compile_f]},
        "t::b": {"outcome": "failed", "events": [compile_f, compile_f], "records": [first]}})
    result = corpus.compare(plain, otel)
    assert [d["test"] for d in result["outcome_diffs"]] == ["t::b"]
    assert [(d["test"], d["listener"], d["records"]) for d in result["count_diffs"]] == [
        ("t::b", 2, 1)]
    assert [d["test"] for d in result["listener_diffs"]] == ["t::b"]
    assert [(d["test"], d["missing"]) for d in result["vaguer"]] == [
        ("t::a", ["a cause (unknown)"])]
    assert [d["test"] for d in result["unknowns"]] == ["t::a"]
    assert [d["test"] for d in result["wrong_first_compile"]] == ["t::b"]
    # an unknown JAX does not explain is listed, not counted (a real eviction says so)
    assert result["wall_ratio"] == 1.0 and corpus.problems(result) == 5
    assert corpus.summary(result).startswith("corpus: 2 tests; outcome differences 1;")
