"""The differential corpus check's test of names (benchmarks/corpus_names.py): a record
compared with a compile JAX names after another function is false, and so is one function
whose compiles JAX names differently."""

from __future__ import annotations

from benchmarks import corpus, corpus_names


def compile_of(name: str) -> dict:
    return {"type": "compile", "fun_name": name}


def record(count: int, kind: str = "first_compile", compared_with: int | None = None,
           qualname: str = "_filter_jit_cache.<locals>.fun_wrapped") -> dict:
    return {"qualname": qualname, "file": "equinox/_jit.py", "line": 43, "count": count,
            "cause_kind": kind, "cause": "", "diff": [], "diff_total": 0, "eager_op": False,
            "compared_with": compared_with}


def test_a_record_compared_with_another_functions_compile_is_false():
    tests = {
        "t::a": {"outcome": "passed", "events": [compile_of("jit(Linear)")],
                 "records": [record(1)]},
        "t::b": {"outcome": "passed",
                 "events": [compile_of("jit(M)"), compile_of("jit(M)")],
                 "records": [record(2, "jit_options", 1), record(3, "shape", 2)]},
    }
    found = corpus_names.check(tests, ["t::a", "t::b"])
    assert [(d["test"], d["count"], d["jax"], d["jax_before"])
            for d in found["false_comparisons"]] == [("t::b", 2, "jit(M)", "jit(Linear)")]
    assert [(d["function"], d["jax_names"]) for d in found["shared_names"]] == [
        ("_filter_jit_cache.<locals>.fun_wrapped", ["jit(Linear)", "jit(M)"])]
    assert found["paired"] == 3


def test_one_function_one_name_is_clean_and_eager_ops_are_left_out():
    eager = {**record(1, qualname="broadcast_in_dim"), "eager_op": True}
    tests = {"t::a": {"outcome": "passed",
                      "events": [compile_of("jit(f)"), compile_of("jit(broadcast_in_dim)"),
                                 compile_of("jit(f)")],
                      "records": [record(1, qualname="f"), eager,
                                  record(2, "shape", 1, qualname="f")]},
             # unequal counts: not paired, so not judged
             "t::b": {"outcome": "passed", "events": [compile_of("jit(g)")], "records": []}}
    found = corpus_names.check(tests, ["t::a", "t::b"])
    assert found == {"false_comparisons": [], "shared_names": [], "paired": 2}


def test_the_corpus_comparison_counts_and_prints_them():
    events = [compile_of("jit(Linear)"), compile_of("jit(M)")]
    records = [record(1), record(2, "static_argument", 1)]
    run = {"jax": "x", "wall_s": 1.0,
           "tests": {"t::a": {"outcome": "passed", "events": events, "records": records}}}
    result = corpus.compare(None, run)
    assert len(result["names"]["false_comparisons"]) == 1
    assert len(result["names"]["shared_names"]) == 1
    assert corpus.problems(result) == 2 + len(result["misnamed"])
    text = corpus.render(result, 10)
    assert "records compared with a compile JAX names after another function: 1" in text
    assert "functions whose compiles JAX names differently: 1" in text


def test_jaxs_placeholder_for_a_callable_it_cannot_name_is_no_other_function():
    # jax.jit of a callable object (JAX: "<unnamed function>") and equinox's filter_jit of
    # the same one (JAX: its type's name): one user function, no false comparison
    tests = {"t::a": {"outcome": "passed",
                      "events": [compile_of("jit(<unnamed function>)"),
                                 compile_of("jit(filter_custom_vjp)")],
                      "records": [record(1, qualname="f"),
                                  record(2, "function_identity", 1, qualname="f")]}}
    found = corpus_names.check(tests, ["t::a"])
    assert found == {"false_comparisons": [], "shared_names": [], "paired": 2}
