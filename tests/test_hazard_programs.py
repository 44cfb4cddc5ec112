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
    "jit_in_predict",      # jax.jit(self._forward) in predict(), called per request
    "jit_in_call_linen",   # jax.jit(model.apply) in an evaluator's __call__, per batch
    "jit_in_handler_thread",  # a handler a thread pool calls: a note, then a warning
    "sweep_lr_factory",    # jax.jit(make_step(lr)) for each learning rate
    "sweep_lr_partial_optax",  # jax.jit(partial(step, wd)) over np.logspace, optax
    "weak_max_clamp",      # lr = max(lr, 1e-3) after the step, optax
    "weak_dict_unpacked",  # out = step(...), then lr = out["lr"]
    "weak_attr_sampler",   # a sampler's NamedTuple, temperature read off it
    "weak_running_mean",   # a Python running mean passed to a jitted logger
    "jit_in_call_nnx_queue",  # nnx.jit of a lambda in __call__, requests from a queue
    "jit_in_generate_eqx",  # a filter_jit decode step made per generate() call
    "weak_jit",            # the hazard at the last compile but one: said at flush()
    "static_decode_position",  # a decoding position passed static: new at each step
    "static_step_counter",     # the step number passed static, for a warm-up schedule
    "static_policy_per_step",  # a remat policy built on each step, passed static
    "fixpt_dtype_bf16_sgd",    # bfloat16 parameters updated in float32, fed back
    "fixpt_dtype_ema",         # a float32 decay makes a bfloat16 average float32
    "fixpt_struct_key_gained",  # a state dict gains a key inside the step
    "fixpt_struct_metrics",    # metrics summed into a dict started empty
    "fixpt_struct_optional_none",  # a NamedTuple field that starts None
    "fixpt_struct_lazy_opt_state",  # a momentum None until the first step, on an object
    "fixpt_struct_unpacked_history",  # the grown optimizer state taken out of a dict result
    "fixpt_dtype_batch_stats",  # bfloat16 running statistics updated from a float32 batch
    "fixpt_shape_grows",       # a sequence grown by concatenation, fed back
    "fixpt_list_grows",        # a Python list of losses appended to each step
    "fixpt_list_kv_cache",     # a decoding cache kept as a Python list
    "sweep_optax_adam_lr",  # optax.adam(lr) per rate, a step made from it jitted per rate
    "sweep_trainer_init",   # a trainer per rate jitting its bound method in __init__
    "sweep_trainer_eqx",    # the same under eqx.filter_jit
    "fixpt_shard_replicated_params",  # weights split by "model" returned replicated
    "fixpt_shard_transposed_state",   # a state XLA's propagation places by columns
])
def test_a_recompile_the_program_shows_is_warned_before_it_at_the_call_line(name):
    run = _run(name)
    recall = run["recall"]
    assert recall["due"] and recall["warned"] == recall["due"], recall["missed"]
    assert not run["precision"]["unfollowed"] or all(
        h["level"] == "info" for h in run["precision"]["unfollowed"])
    assert run["warnings"], f"no OtelJaxWarning said; stderr: {run['stderr']}"
    assert not recall["mislocated"], recall["mislocated"]


@pytest.mark.parametrize("name", [
    "jit_cached_dict",    # jitted in the loop, on the first pass only, kept in a dict
    "eval_splits",        # full-batch evaluation on three fixed splits, every epoch
    "eval_splits_lines",  # the same, each split on its own line
    "eval_splits_four",   # four held-out sets in a comprehension
    "jit_in_init",        # jitted once in __init__, called per request
    "jit_lazy_attr",      # jitted on first use, kept on the object
    "jit_in_main_once",   # main() jits a partial once, then loops
    "jit_name_in_method",  # jax.jit(a module-level function) per call: JAX finds it again
    "sweep_lr_argument",  # one jitted step, the learning rate an argument
    "sweep_widths_eqx",   # one program per width: the shapes differ
    "weak_max_stays_weak",  # clamped, but computed from weak values only: stays weak
    "weak_dict_float",    # lr = float(out["lr"]): a Python float again
    "weak_running_mean_item",  # a running mean of loss.item(): Python floats
    "sweep_optimizers",   # one program per optax optimizer: a note at most
    "weak_sum_after_step",  # a total summed before its first call: an array throughout
    "static_mode_cycle",  # a static train flag and split name, a few values each epoch
    "static_bucket_cycle",  # a static bucket size chosen from three per request
    "fixpt_dtype_cast_back",  # the bfloat16 update cast back with .astype(p.dtype)
    "fixpt_dtype_python_lr",  # a Python float factor: the update stays bfloat16
    "fixpt_dtype_optax_bf16",  # optax.apply_updates casts back to each parameter's dtype
    "fixpt_dtype_stats_cast",  # the running statistics cast back to their dtype
    "fixpt_struct_key_from_start",  # the key in the state from the first call
    "fixpt_shape_fixed_buffer",  # tokens written into a fixed-size buffer
    "fixpt_list_fixed",       # a fixed-length list of layers; a few crop counts cycled
    "sweep_optax_built_once",  # the optimizer and its jitted step built before the loop
    "sweep_trainer_module_fn",  # each trainer calls one module-level jitted step
    "fixpt_shard_out_matching",     # out_shardings as each weight came in
    "fixpt_shard_constraint_back",  # constrained back to P('data', None) for P('data')
])
def test_a_pattern_that_does_not_compile_again_is_no_warning(name):
    run = _run(name)
    assert not _warnings(run) and not run["warnings"]


def test_a_local_function_a_wrapper_passes_as_its_static_is_no_note():
    # equinox passes the user's function as a static argument: the same object each call
    run = _run("eqx_local")
    assert [r["count"] for r in run["records"]] == [1]
    assert not [h for r in run["records"] for h in r["hazards"]]


@pytest.mark.version_free  # the programs' hazards on each JAX: the tests above
@pytest.mark.parametrize("name", [
    "jit_in_handler_thread",  # warned at the second compile: made after the program returned
    "static_step_counter",    # a static step number, warned from its second value on
    "jit_in_call_nnx_queue",  # requests from a queue, on the program's own thread
    "eval_splits",            # nothing to warn about, late or not
])
def test_a_program_says_the_same_however_late_its_telemetry_is_made(name):
    # every span 0.3 s to export (a slow exporter, a loaded machine): the records after
    # the first are made once the program returned, at flush()
    program = corpus_hazards.PROGRAMS / f"{name}.py"
    now = corpus_hazards.run_program(program, sys.executable)
    late = corpus_hazards.run_program(program, sys.executable, late=True)
    assert now["returncode"] == 0 and late["returncode"] == 0, late["stderr"]
    assert corpus_hazards.said(late) == corpus_hazards.said(now), late["stderr"]
