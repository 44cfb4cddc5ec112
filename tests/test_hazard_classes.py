"""Hazards of recompiles a reader predicts from the code around the call, on real compiles:
a strongly typed output fed back through a later line of the loop (an item, an attribute,
``max``), a Python accumulator that becomes an array, a jit made in a function called
again, and one program per item of a sweep. Each warning must come true; each look-alike
that does not compile again says nothing.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import pytest

import otel_jax

pytestmark = [pytest.mark.hazards,
              pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")]

DECAY = jnp.float32(0.9)


def _said(records, kind: str) -> list[tuple[int, str, bool]]:
    """``(count, path, warn)`` of the records' hazards of ``kind``."""
    return [(r.count, h.path, h.warn) for r in records for h in r.hazards
            if h.kind.value == kind]


def _causes(records) -> list[str]:
    return [r.cause_kind.value for r in records]


# --- weak_type: fed back through a later line of the loop -----------------------------------

def test_a_learning_rate_clamped_with_max_after_the_step_is_a_warning():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * DECAY

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            params, lr = step(params, lr)
            lr = max(lr, 1e-3)  # the array, while above the floor
    assert _causes(rec.records) == ["first_compile", "weak_type"]
    assert _said(rec.records, "weak_type") == [(1, "lr", True)]


def test_a_dict_unpacked_on_the_next_line_is_a_warning_naming_the_item():
    @jax.jit
    def step(params, lr):
        return {"params": params - lr * params, "lr": lr * DECAY}

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            out = step(params, lr)
            params = out["params"]
            lr = out["lr"]
    assert _causes(rec.records) == ["first_compile", "weak_type"]
    [hazard] = rec.records[0].hazards
    assert (hazard.path, hazard.warn) == ("lr", True)
    assert "['lr'] of the result" in hazard.text and 'lr = out["lr"]' in hazard.text  # as written


def test_a_line_read_back_is_quoted_as_written_without_added_parentheses():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * DECAY

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            out = step(params, lr)
            params, lr = out[0], out[1]
    [hazard] = rec.records[0].hazards
    assert "params, lr = out[0], out[1]" in hazard.text and "(out[0]" not in hazard.text


class _Result(NamedTuple):
    params: jax.Array
    temperature: jax.Array


def test_an_attribute_of_the_result_read_back_is_a_warning():
    @jax.jit
    def step(params, temperature):
        return _Result(params / temperature, temperature * DECAY)

    with otel_jax.testing.record_compiles(step) as rec:
        params, temperature = jnp.ones(3), 1.0
        for _ in range(3):
            result = step(params, temperature)
            params, temperature = result.params, result.temperature
    assert _causes(rec.records) == ["first_compile", "weak_type"]
    assert _said(rec.records, "weak_type") == [(1, "temperature", True)]


def test_an_output_computed_from_weak_values_only_stays_weak_and_says_nothing():
    @jax.jit
    def step(params, lr):
        return {"params": params - lr * params, "lr": lr * 0.9}  # weak in, weak out

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            out = step(params, lr)
            params, lr = out["params"], max(out["lr"], 1e-3)
    assert _causes(rec.records) == ["first_compile"] and not _said(rec.records, "weak_type")


def test_an_item_made_a_python_float_again_says_nothing():
    @jax.jit
    def step(params, lr):
        return {"params": params - lr * params, "lr": lr * DECAY}

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            out = step(params, lr)
            params, lr = out["params"], float(out["lr"])
    assert _causes(rec.records) == ["first_compile"] and not _said(rec.records, "weak_type")


@jax.jit
def _train_step(params, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - 0.01 * grads, loss


def test_a_running_mean_that_becomes_an_array_is_a_warning_for_the_jitted_logger():
    @jax.jit
    def log_metrics(step, running):
        return jnp.exp(running) + step

    with otel_jax.testing.record_compiles(log_metrics) as rec:
        params, x, running = jnp.ones(4), jnp.ones((8, 4)), 0.0
        for i in range(3):
            log_metrics(i, running)
            params, loss = _train_step(params, x)
            running = running + (loss - running) / (i + 1)
    assert _causes(rec.records) == ["first_compile", "weak_type"]
    [hazard] = rec.records[0].hazards
    assert (hazard.path, hazard.warn) == ("running", True) and "_train_step" in hazard.text


def test_a_running_mean_of_python_floats_says_nothing():
    @jax.jit
    def log_metrics(step, running):
        return jnp.exp(running) + step

    with otel_jax.testing.record_compiles(log_metrics) as rec:
        params, x, running = jnp.ones(4), jnp.ones((8, 4)), 0.0
        for i in range(3):
            log_metrics(i, running)
            params, loss = _train_step(params, x)
            running = running + (loss.item() - running) / (i + 1)
    assert _causes(rec.records) == ["first_compile"] and not rec.records[0].hazards


# --- function_identity: a jit made in a function called again ------------------------------

class _Predictor:
    def __init__(self, w):
        self.w = w
        self._kept = jax.jit(self._forward)
        self._lazy = None

    def _forward(self, x):
        return jnp.tanh(x @ self.w)

    def predict(self, x):
        forward = jax.jit(self._forward)
        return forward(x)

    def predict_kept(self, x):
        return self._kept(x)

    def predict_lazy(self, x):
        if self._lazy is None:
            self._lazy = jax.jit(self._forward)
        return self._lazy(x)

    def handle(self, x):
        def score(v):
            return jnp.sin(v @ self.w)

        return jax.jit(score)(x)


def test_a_jit_made_in_a_method_that_a_loop_calls_is_a_warning_at_the_first_compile():
    model = _Predictor(jnp.ones((4, 2)))
    with otel_jax.testing.record_compiles("_Predictor._forward") as rec:
        for i in range(3):
            model.predict(jnp.ones((1, 4)) * i)
    assert _causes(rec.records) == ["first_compile", "function_identity", "function_identity"]
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.kind.value, hazard.warn) == (1, "function_identity", True)
    assert "predict()" in hazard.text and "__init__" in hazard.hint
    assert "loop" not in rec.records[1].hint  # the cause's hint names no loop


def test_a_jit_made_in_a_handler_a_thread_pool_calls_is_a_note_then_a_warning():
    server = _Predictor(jnp.ones((4, 2)))
    with otel_jax.testing.record_compiles("_Predictor.handle.<locals>.score") as rec:
        with ThreadPoolExecutor(max_workers=1) as pool:
            for i in range(3):
                pool.submit(server.handle, jnp.ones((1, 4)) * i).result()
                # each record made before the next compile: the rule, not the clock
                otel_jax.flush()
    assert len(rec.records) == 3
    assert _said(rec.records, "function_identity") == [(1, "", False), (2, "", True)]


def test_a_jit_kept_from_init_or_made_once_lazily_says_nothing():
    model = _Predictor(jnp.ones((4, 2)))
    with otel_jax.testing.record_compiles("_Predictor._forward") as rec:
        for i in range(3):
            model.predict_kept(jnp.ones((1, 4)) * i)
            model.predict_lazy(jnp.ones((1, 4)) * i)
    assert not [h for r in rec.records for h in r.hazards]


# --- function_identity: one program per item of a sweep ------------------------------------

def _make_step(lr):
    def step(params):
        return params - lr * params

    return step


def test_a_sweep_over_learning_rates_jitted_per_rate_is_a_warning():
    with otel_jax.testing.record_compiles("_make_step.<locals>.step") as rec:
        for lr in (1e-3, 1e-2, 1e-1):
            step = jax.jit(_make_step(lr))
            params = jnp.ones(3)
            for _ in range(2):
                params = step(params)
    assert len(rec.records) == 3
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True) and "lr" in hazard.hint


def _scale(factor, params):
    return params * factor


def test_a_sweep_over_widths_is_a_note():
    with otel_jax.testing.record_compiles("_scale") as rec:
        for width in (2, 3):
            step = jax.jit(functools.partial(_scale, width))
            params = jnp.ones(3)
            for _ in range(2):
                params = step(params)
    assert _said(rec.records, "function_identity") == [(1, "", False)]


def _evaluate(params, batches):
    score = jax.jit(functools.partial(_scale, 2.0))
    return [score(params * b) for b in batches]  # one jit, called for each batch


def test_a_jit_made_once_and_called_in_a_comprehension_of_its_function_says_nothing():
    # the comprehension runs the call again, not the function that made the jit
    with otel_jax.testing.record_compiles("_scale") as rec:
        _evaluate(jnp.ones(3), [1.0, 2.0, 3.0])
    assert len(rec.records) == 1 and not rec.records[0].hazards


@jax.tree_util.register_pytree_node_class
class _Strict:
    """A pytree node whose unflattening refuses anything but arrays."""

    def __init__(self, lr):
        if not isinstance(lr, jax.Array) and not hasattr(lr, "aval"):
            raise TypeError("arrays only")
        self.lr = lr

    def tree_flatten(self):
        return (self.lr,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_parts_are_followed_through_tuples_dicts_and_namedtuples_never_rebuilding_a_user_class():
    @jax.jit
    def step(params, lr, scale):
        return _Strict(lr * DECAY), params * scale, scale * DECAY

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr, scale = jnp.ones(3), 0.1, 2.0
        for _ in range(2):
            out = step(params, lr, scale)
            lr = out[0].lr
            params, scale = out[1], out[2]
    assert _causes(rec.records) == ["first_compile", "weak_type"]
    assert _said(rec.records, "weak_type") == [(1, "scale", True)]


# --- function_identity: a sweep item reaching the function through an object ---------------

def _make_opt_step(opt):
    def step(params):
        return params - opt["lr"] * params

    return step


def test_an_object_built_from_the_swept_float_per_item_is_a_warning():
    with otel_jax.testing.record_compiles("_make_opt_step.<locals>.step") as rec:
        for lr in (1e-3, 1e-2, 1e-1):
            opt = dict(lr=lr)
            step = jax.jit(_make_opt_step(opt))
            params = jnp.ones(3)
            for _ in range(2):
                params = step(params)
    assert len(rec.records) == 3
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "opt, built there from lr" in hazard.text and "pass lr as an argument" in hazard.hint


def _make_scaled_step(opt):
    def step(params):
        return params - opt["lr"] * params

    return step


def test_an_object_built_from_the_item_and_another_name_stays_a_note():
    with otel_jax.testing.record_compiles("_make_scaled_step.<locals>.step") as rec:
        scale = 2.0
        for lr in (1e-3, 1e-2):
            scale = scale * 2
            opt = dict(lr=lr * scale)
            step = jax.jit(_make_scaled_step(opt))
            params = jnp.ones(3)
            for _ in range(2):
                params = step(params)
    assert _said(rec.records, "function_identity") == [(1, "", False)]


class _SweepTrainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    def _step(self, params):
        return params - self.lr * params

    def fit(self, params):
        for _ in range(2):
            params = self.step(params)
        return params


def test_a_trainer_that_jits_its_bound_method_made_per_swept_rate_is_a_warning():
    with otel_jax.testing.record_compiles("_SweepTrainer._step") as rec:
        for lr in [1e-3, 1e-2, 1e-1]:
            trainer = _SweepTrainer(lr)
            trainer.fit(jnp.ones(3))
    assert _causes(rec.records) == ["first_compile"] + ["function_identity"] * 2
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "from lr (self.lr)" in hazard.text and "_SweepTrainer.__init__" in hazard.text


class _OnceTrainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    def _step(self, params):
        return params - self.lr * params

    def fit(self, params):
        for _ in range(2):
            params = self.step(params)
        return params


def test_a_trainer_made_once_before_the_loop_says_nothing():
    with otel_jax.testing.record_compiles("_OnceTrainer._step") as rec:
        trainer = _OnceTrainer(1e-3)
        for epoch in range(3):
            trainer.fit(jnp.ones(3) * epoch)
    assert len(rec.records) == 1 and not rec.records[0].hazards


class _WidthTrainer:
    def __init__(self, width):
        self.width = width
        self.step = jax.jit(self._step)

    def _step(self, params):
        return jnp.tile(params, self.width)


def test_a_trainer_made_per_width_is_a_note():
    # one program per width is what the sweep means (the shapes differ)
    with otel_jax.testing.record_compiles("_WidthTrainer._step") as rec:
        for width in (2, 3):
            trainer = _WidthTrainer(width)
            trainer.step(jnp.ones(3))
    assert _said(rec.records, "function_identity") == [(1, "", False)]


class _FactoryTrainer:
    def __init__(self, lr, steps=2):
        self.lr, self.steps = lr, steps
        self.step = jax.jit(self._step)

    def _step(self, params):
        return params - self.lr * params

    def fit(self, params):
        for _ in range(self.steps):
            params = self.step(params)
        return params


def _make_factory_trainer(lr):
    return _FactoryTrainer(lr, steps=2)


def test_a_trainer_made_by_a_factory_per_swept_rate_is_a_warning_naming_the_factory():
    with otel_jax.testing.record_compiles("_FactoryTrainer._step") as rec:
        for lr in [1e-3, 1e-2, 1e-1]:
            trainer = _make_factory_trainer(lr)
            trainer.fit(jnp.ones(3))
    assert _causes(rec.records) == ["first_compile"] + ["function_identity"] * 2
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "(through _make_factory_trainer) from lr (self.lr)" in hazard.text
    # the recompile names the attribute that differs, with both values
    assert [(c.path, c.before, c.after) for c in rec.records[1].diff.changes][1:] == [
        ("<function>.self.lr", "0.001", "0.01")]


class _ConfigTrainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg["lr"])

    def _step(self, params):
        return params - self.lr * params


def test_a_trainer_made_by_its_classmethod_from_a_config_of_the_swept_rate_is_a_warning():
    with otel_jax.testing.record_compiles("_ConfigTrainer._step") as rec:
        for lr in (1e-3, 1e-2):
            cfg = {"lr": lr}
            trainer = _ConfigTrainer.from_config(cfg)
            trainer.step(jnp.ones(3))
    assert _causes(rec.records) == ["first_compile", "function_identity"]
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "(through _ConfigTrainer.from_config) from lr" in hazard.text


class _ListTrainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    def _step(self, params):
        return params - self.lr * params


def test_trainers_made_in_a_comprehension_over_swept_rates_are_a_warning():
    with otel_jax.testing.record_compiles("_ListTrainer._step") as rec:
        trainers = [_ListTrainer(lr) for lr in (1e-3, 1e-2, 1e-1)]
        for trainer in trainers:
            trainer.step(jnp.ones(3))
    assert len(rec.records) == 3
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "from lr (self.lr), a Python float it sweeps" in hazard.text


class _CachedTrainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    def _step(self, params):
        return params - self.lr * params


_TRAINERS: dict = {}


def _cached_trainer(lr):
    if lr not in _TRAINERS:
        _TRAINERS[lr] = _CachedTrainer(lr)
    return _TRAINERS[lr]


def _one_trainer(lr):
    return _CachedTrainer(lr)


def test_a_factory_called_once_or_keeping_what_it_made_says_nothing():
    with otel_jax.testing.record_compiles("_CachedTrainer._step") as rec:
        for _epoch in range(3):
            trainer = _cached_trainer(1e-3)  # the same trainer each pass
            trainer.step(jnp.ones(3))
        trainer = _one_trainer(1e-3)  # made once, before the loop
        for _epoch in range(3):
            trainer.step(jnp.ones(3))
    assert _causes(rec.records) == ["first_compile", "function_identity"]
    assert not [h for r in rec.records for h in r.hazards]


def _build_optimizer(cfg):
    return {"lr": cfg["lr"], "decay": 0.9}


def _make_helper_opt_step(opt):
    def step(params):
        return params - opt["lr"] * params

    return step


def test_an_optimizer_built_by_a_helper_from_a_config_of_the_swept_rate_is_a_warning():
    with otel_jax.testing.record_compiles("_make_helper_opt_step.<locals>.step") as rec:
        for lr in (1e-3, 1e-2, 1e-1):
            cfg = {"lr": lr}
            opt = _build_optimizer(cfg)
            step = jax.jit(_make_helper_opt_step(opt))
            params = jnp.ones(3)
            for _ in range(2):
                params = step(params)
    assert len(rec.records) == 3
    [(count, hazard)] = [(r.count, h) for r in rec.records for h in r.hazards]
    assert (count, hazard.warn) == (1, True)
    assert "opt, built there from lr" in hazard.text


# --- words true in their case ---------------------------------------------------------------

def _shift(amount, params):
    return params + amount


def _score_once(params):
    score = jax.jit(functools.partial(_shift, 1.0))  # made at each run of this function
    return score(params)


def test_a_plain_function_jitting_per_run_is_told_module_level_not_init():
    with otel_jax.testing.record_compiles("_shift") as rec:
        for i in range(3):
            _score_once(jnp.ones(3) * i)
    [hazard] = [h for r in rec.records for h in r.hazards]
    assert hazard.warn and "at module level" in hazard.hint and "__init__" not in hazard.hint


def _scaled(x, lr):
    return x * lr


def test_a_float_an_eqx_wrapper_holds_static_reads_as_written_and_the_fix_is_an_array():
    eqx = pytest.importorskip("equinox")
    scaled = eqx.filter_jit(_scaled)
    with otel_jax.testing.record_compiles("_scaled") as rec:
        for i in range(1, 4):
            scaled(jnp.ones(3), 0.1 * 0.243 * i)  # 0.024300000000000002, ...
    notes = [h for r in rec.records for h in r.hazards if h.kind.value == "static_argument"]
    [note] = notes
    assert "0.0243, 0.0486, 0.0729" in note.text and "000000" not in note.text
    assert "jnp.asarray(lr" in note.hint and "not static" not in note.hint


def test_a_static_tuple_that_sets_a_shape_is_not_told_to_be_an_array():
    from otel_jax._capture._signature import StaticArg
    from otel_jax._explain._static_runs import _hint

    hint = _hint("shape", StaticArg("shape", "tuple", "(8, 128)", 1, False))
    assert "sets a shape" in hint and not hint.startswith("pass what changes")
