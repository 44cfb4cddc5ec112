"""Hazards on the benchmark's training programs (``benchmarks/hazard_programs/``), each run
in its own process with otel_jax installed, read from its JSON log lines and its stderr.

Each program is a pattern users write where a hazard was said and false, missed, or
located elsewhere than the user's call: a warning must come true (a later compile of the
function with the predicted cause), come at a compile before each recompile its
``EXPECT`` names, and be located at the call line the compile recorded, whichever thread
says it and whenever (a program's last compile is said after it returns, at ``flush()``).
"""

from __future__ import annotations

import sys

import pytest

from benchmarks import corpus_hazards

pytestmark = [pytest.mark.hazards, pytest.mark.slow]


def _run(name: str) -> dict:
    program = corpus_hazards.PROGRAMS / f"{name}.py"
    run = corpus_hazards.run_program(program, sys.executable)
    assert run["returncode"] == 0, run["stderr"]
    corpus = {"tests": {name: {"records": run["records"]}}}
    run["precision"] = corpus_hazards.precision(corpus)
    run["recall"] = corpus_hazards.recall({name: run},
                                          {name: corpus_hazards.expected(program)})
    return run


def _warnings(run: dict) -> list[tuple[int, str, str]]:
    return [(r["count"], h["kind"], h["path"]) for r in run["records"]
            for h in r["hazards"] if h["level"] == "warning"]


@pytest.mark.parametrize("name", [
    "weak_nnx",            # nnx.jit: a Python float fed back, as under jax.jit
    "weak_eqx",            # eqx.filter_jit holds the float static: it comes back an array
    "weak_helper",         # fed back through a helper the training loop calls
    "static_self_new",     # a static self made on the calling line
    "static_lambda_line",  # a lambda written on the calling line, passed as a static
    "jit_apply_loop",      # jax.jit(model.apply) made and called in the loop
    "jit_partial_loop",    # jax.jit(functools.partial(loss, ...)) made and called there
    "weak_jit",            # the hazard at the last compile but one: said at flush()
    "static_decode_position",  # a decoding position passed static: new at each step
    "static_step_counter",     # the step number passed static, for a warm-up schedule
    "static_policy_per_step",  # a remat policy built on each step, passed static
])
def test_a_recompile_the_program_shows_is_warned_before_it_at_the_call_line(name):
    run = _run(name)
    recall = run["recall"]
    assert recall["due"] and recall["warned"] == recall["due"], recall["missed"]
    assert not run["precision"]["unfollowed"] or all(
        h["level"] == "info" for h in run["precision"]["unfollowed"])
    assert run["warnings"], "no OtelJaxWarning said"
    assert not recall["mislocated"], recall["mislocated"]


@pytest.mark.parametrize("name", [
    "jit_cached_dict",    # jitted in the loop, on the first pass only, kept in a dict
    "eval_splits",        # full-batch evaluation on three fixed splits, every epoch
    "eval_splits_lines",  # the same, each split on its own line
    "eval_splits_four",   # four held-out sets in a comprehension
    "static_mode_cycle",  # a static train flag and split name, a few values each epoch
    "static_bucket_cycle",  # a static bucket size chosen from three per request
])
def test_a_pattern_that_does_not_compile_again_is_no_warning(name):
    run = _run(name)
    assert not _warnings(run) and not run["warnings"]


def test_a_local_function_a_wrapper_passes_as_its_static_is_no_note():
    # equinox passes the user's function as a static argument: the same object each call
    run = _run("eqx_local")
    assert [r["count"] for r in run["records"]] == [1]
    assert not [h for r in run["records"] for h in r["hazards"]]
