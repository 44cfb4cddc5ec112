"""The fixed-point rule, on real JAX compiles: an output fed back into an input of its own
function is compared with that input (pytree structure, dtype, shape, weak type), and a
difference the next call will see is named at the first compile, with the recompile's
own cause kind and path; a Python list's length is followed as an array's dimension is.
Each pattern beside its look-alike, which compiles once and says nothing."""

from __future__ import annotations

import dataclasses
import threading
from typing import NamedTuple
from weakref import ref as _weak_ref

import jax
import jax.numpy as jnp
import pytest

import otel_jax

pytestmark = [pytest.mark.hazards,
              pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")]


def _hazards(records) -> list:
    return [(r.count, h) for r in records for h in r.hazards]


def _update(params, lr, cast_back=False):
    new = jax.tree.map(lambda p: p - lr * jnp.ones_like(p), params)
    return jax.tree.map(lambda n, p: n.astype(p.dtype), new, params) if cast_back else new


# Each test jits a function of its own: a compile's history is kept per function (its
# qualified name and line), and these rules speak at a function's first compile.


def test_bfloat16_parameters_updated_in_float32_and_fed_back_are_a_dtype_warning():
    step = jax.jit(lambda params, lr: _update(params, lr))
    with otel_jax.testing.record_compiles(step) as rec:
        params = {"b": jnp.zeros(2, jnp.bfloat16), "w": jnp.zeros((3, 2), jnp.bfloat16)}
        lr = jnp.float32(0.1)  # strongly typed: bf16 - f32 * bf16 is f32
        for _ in range(3):
            params = step(params, lr)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "dtype"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "dtype", "params['b']", True)
    assert "bf16[2]" in hazard.text and "f32[2]" in hazard.text
    assert "1 more" in hazard.text and "astype" in hazard.hint
    # the recompile it named is the one that came, at that path
    assert "params['b']" in [c.path for c in rec.records[1].diff.changes]


def test_an_update_cast_back_to_the_parameters_dtype_is_no_hazard():
    step = jax.jit(lambda params, lr: _update(params, lr, cast_back=True))
    with otel_jax.testing.record_compiles(step) as rec:
        params = {"b": jnp.zeros(2, jnp.bfloat16), "w": jnp.zeros((3, 2), jnp.bfloat16)}
        for _ in range(3):
            params = step(params, jnp.float32(0.1))
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_python_float_factor_keeps_the_update_bfloat16_and_is_no_hazard():
    @jax.jit
    def step(params):
        return jax.tree.map(lambda p: p - 0.1 * p, params)

    with otel_jax.testing.record_compiles(step) as rec:
        params = {"w": jnp.ones(3, jnp.bfloat16)}
        for _ in range(3):
            params = step(params)
    assert len(rec.records) == 1 and not _hazards(rec.records)


def _train(with_key_from_start: bool):
    @jax.jit
    def step(state, x):
        new = {"params": state["params"] - 0.1 * x, "step": state["step"] + 1}
        new["loss_avg"] = (0.9 * state["loss_avg"] if "loss_avg" in state else 0.0) \
            + jnp.sum(x)
        return new
    state = {"params": jnp.zeros(3), "step": jnp.zeros((), jnp.int32)}
    if with_key_from_start:
        state["loss_avg"] = jnp.zeros((), jnp.float32)
    return step, state


def test_a_state_dict_that_gains_a_key_in_the_step_is_a_structure_warning():
    step, state = _train(with_key_from_start=False)
    with otel_jax.testing.record_compiles(step) as rec:
        for _ in range(3):
            state = step(state, jnp.ones(3))
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "pytree_structure"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "pytree_structure", "state['loss_avg']", True)
    assert "key gained" in hazard.text and "from the first call" in hazard.hint
    assert [c.path for c in rec.records[1].diff.changes] == ["state['loss_avg']"]


def test_a_state_dict_with_the_key_from_the_start_is_no_hazard():
    step, state = _train(with_key_from_start=True)
    with otel_jax.testing.record_compiles(step) as rec:
        for _ in range(3):
            state = step(state, jnp.ones(3))
    assert len(rec.records) == 1 and not _hazards(rec.records)


class _Momentum(NamedTuple):
    params: jax.Array
    velocity: jax.Array | None


def test_a_field_that_starts_none_and_is_filled_by_the_step_is_named_by_its_path():
    @jax.jit
    def step(state):
        velocity = state.params if state.velocity is None else 0.9 * state.velocity
        return _Momentum(state.params - velocity, velocity)

    with otel_jax.testing.record_compiles(step) as rec:
        state = _Momentum(jnp.ones(3), None)
        for _ in range(3):
            state = step(state)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "pytree_structure"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path) == (1, "pytree_structure",
                                                       "state.velocity")
    assert "None" in hazard.text and "not None" in hazard.hint


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _Result:
    params: jax.Array
    steps: int = dataclasses.field(metadata={"static": True})  # not a child of the node
    opt_state: dict = dataclasses.field(default_factory=dict)


def _momentum_step(params, opt_state, x):
    mom = 0.9 * opt_state["mom"] + x if "mom" in opt_state else x
    return _Result(params - 0.1 * mom, 1, {"mom": mom})


def test_a_dataclass_result_unpacked_by_its_fields_is_followed_to_the_inputs():
    step = jax.jit(_momentum_step)
    with otel_jax.testing.record_compiles(step) as rec:
        params, opt_state = jnp.ones(3), {}
        for _ in range(3):
            out = step(params, opt_state, jnp.ones(3))
            params = out.params
            opt_state = out.opt_state  # a field after a static one: the node's 2nd child
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "pytree_structure"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "pytree_structure", "opt_state['mom']", True)
    assert ".opt_state of the result" in hazard.text and "opt_state = out.opt_state" \
        in hazard.text


@dataclasses.dataclass
class _SortedResult:
    params: jax.Array
    opt_state: dict


# registered as chex registers its dataclasses: the fields sorted by name (opt_state,
# then params), their names kept as the node's data
jax.tree_util.register_pytree_with_keys(
    _SortedResult,
    lambda r: (tuple((jax.tree_util.GetAttrKey(k), getattr(r, k))
                     for k in sorted(vars(r))), tuple(sorted(vars(r)))),
    lambda keys, children: _SortedResult(**dict(zip(keys, children))))


def test_a_dataclass_flattened_in_another_order_than_declared_is_followed_by_its_names():
    @jax.jit
    def step(params, opt_state, x):
        mom = 0.9 * opt_state["mom"] + x if "mom" in opt_state else x
        return _SortedResult(params - 0.1 * mom, {"mom": mom})

    with otel_jax.testing.record_compiles(step) as rec:
        params, opt_state = jnp.ones(3), {}
        for _ in range(3):
            out = step(params, opt_state, jnp.ones(3))
            params = out.params
            opt_state = out.opt_state
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "pytree_structure"]
    assert [(h.path, h.warn) for _, h in _hazards(rec.records)] == [("opt_state['mom']", True)]


def test_a_flax_struct_result_unpacked_by_a_field_names_the_dtype_it_comes_back_with():
    struct = pytest.importorskip("flax.struct")

    @struct.dataclass
    class StepOut:
        loss: jax.Array
        params: dict

    @jax.jit
    def step(params, lr):
        return StepOut(jnp.zeros(()), _update(params, lr))

    @jax.jit
    def step_cast(params, lr):
        return StepOut(jnp.zeros(()), _update(params, lr, cast_back=True))

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = {"w": jnp.zeros(2, jnp.bfloat16)}, jnp.float32(0.1)
        for _ in range(3):
            out = step(params, lr)
            params = out.params
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "dtype"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "dtype", "params['w']", True)
    with otel_jax.testing.record_compiles(step_cast) as rec:
        params = {"w": jnp.zeros(2, jnp.bfloat16)}
        for _ in range(3):
            out = step_cast(params, lr)
            params = out.params
    assert len(rec.records) == 1 and not _hazards(rec.records)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class _State:
    params: dict
    step: int = 0


def test_a_state_renewed_with_replace_from_the_result_is_followed_to_its_field():
    update = jax.jit(lambda params, lr: _update(params, lr))
    with otel_jax.testing.record_compiles(update) as rec:
        state = _State({"w": jnp.zeros(2, jnp.bfloat16)})
        for _ in range(3):
            new_params = update(state.params, jnp.float32(0.1))
            state = dataclasses.replace(state, params=new_params)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "dtype"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "dtype", "params['w']", True)
    assert "dataclasses.replace(state, params=new_params)" in hazard.text


def test_a_state_renewed_with_what_comes_back_cast_or_set_anew_says_nothing():
    update = jax.jit(lambda params, lr: _update(params, lr, cast_back=True))
    with otel_jax.testing.record_compiles(update) as rec:
        state = _State({"w": jnp.zeros(2, jnp.bfloat16)})
        for _ in range(3):
            new_params = update(state.params, jnp.float32(0.1))
            state = dataclasses.replace(state, params=new_params)
    assert len(rec.records) == 1 and not _hazards(rec.records)
    update = jax.jit(lambda params, lr: _update(params, lr))
    with otel_jax.testing.record_compiles(update) as rec:
        for _ in range(3):
            state = _State({"w": jnp.zeros(2, jnp.bfloat16)})  # a new state each pass
            new_params = update(state.params, jnp.float32(0.1))
            state = dataclasses.replace(state, params=new_params)
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_sequence_grown_by_the_step_and_fed_back_is_a_shape_warning_at_once():
    @jax.jit
    def extend(tokens):
        return jnp.concatenate([tokens, tokens[-1:] + 1])

    with otel_jax.testing.record_compiles(extend) as rec:
        tokens = jnp.zeros(1, jnp.int32)
        for _ in range(3):
            tokens = extend(tokens)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "shape", "shape"]
    (count, hazard), *_ = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (1, "shape", "tokens", True)
    assert "i32[1]" in hazard.text and "i32[2]" in hazard.text


def test_an_output_given_to_another_name_is_no_hazard():
    step = jax.jit(lambda params, lr: _update(params, lr))
    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = {"w": jnp.zeros(2, jnp.bfloat16)}, jnp.float32(0.1)
        for _ in range(3):
            other = step(params, lr)  # not given back: params stays bfloat16
    assert other["w"].dtype == jnp.float32
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_an_output_given_back_where_no_loop_calls_again_is_a_note():
    step = jax.jit(lambda params, lr: _update(params, lr))
    with otel_jax.testing.record_compiles(step) as rec:
        params = {"w": jnp.zeros(2, jnp.bfloat16)}
        params = step(params, jnp.float32(0.1))
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.warn) == (1, "dtype", False)
    assert "a call given it back compiles again" in hazard.text


def test_outputs_laid_out_by_a_library_jit_are_not_compared_as_the_users_result():
    # nnx.jit(graph=False) jits a callable of flax's own, which returns the user's result
    # beside its state updates (a tuple of 2), while the model goes in as the user passed
    # it: compared as the user's return, the model would "come back a tuple" every time
    nnx = pytest.importorskip("flax.nnx")
    import inspect

    if "graph" not in inspect.signature(nnx.jit).parameters:
        pytest.skip("this flax has no tree-mode nnx.jit")

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(2, 2, rngs=rngs)

        def __call__(self, x):
            return self.linear(x)

    @nnx.jit(graph=False)
    def train_step(model, x):
        grads = nnx.grad(lambda m: jnp.mean(m(x) ** 2), graph=False)(model)
        return jax.tree.map(lambda w, g: w - 0.1 * g, model, grads)

    model = Model(nnx.Rngs(0))
    with otel_jax.testing.record_compiles() as rec:
        for _ in range(3):
            model = train_step(model, jnp.ones((4, 2)))
    mine = [r for r in rec.records if r.function.qualname.endswith("train_step")]
    assert len(mine) == 1 and not _hazards(mine), _hazards(mine)


def test_a_python_list_passed_longer_at_each_step_is_a_note_then_a_warning():
    @jax.jit
    def smoothed(losses):
        return jnp.mean(jnp.stack(losses))

    with otel_jax.testing.record_compiles(smoothed) as rec:
        losses = []
        for step in range(6):
            losses.append(jnp.float32(step))
            smoothed(losses)
    assert [r.cause_kind.value for r in rec.records][1:] == ["pytree_structure"] * 5
    [(count, note), (later, hazard)] = _hazards(rec.records)
    assert (count, note.kind.value, note.path, note.warn) == (3, "pytree_structure",
                                                              "losses", False)
    assert (later, hazard.path, hazard.warn) == (5, "losses", True)
    assert "(1, 2, 3, 4, 5)" in hazard.text and "list" in hazard.text


def test_a_few_list_lengths_that_come_back_are_no_warning():
    @jax.jit
    def average(crops):
        return jnp.mean(jnp.stack(crops), axis=0)

    with otel_jax.testing.record_compiles(average) as rec:
        for _epoch in range(3):
            for n in (1, 2, 3):
                average([jnp.ones(2)] * n)
    assert len(rec.records) == 3
    assert not [h for _, h in _hazards(rec.records) if h.warn]


# --- sharding: the 4 CPU devices conftest.py asks for, as a ("data", "model") mesh -------

def _mesh():
    import numpy as np
    from conftest import needs_devices
    from jax.sharding import Mesh

    return Mesh(np.array(needs_devices(4)[:4]).reshape(2, 2), ("data", "model"))


def _placed(mesh, *spec):
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(mesh, PartitionSpec(*spec))


def test_parameters_sharded_by_model_that_come_back_replicated_are_a_sharding_warning():
    mesh = _mesh()

    def update(params, x):
        return jax.tree.map(lambda p: p - 0.1 * jnp.mean(x) * p, params), jnp.sum(x)

    step = jax.jit(update, out_shardings=(_placed(mesh), _placed(mesh)))
    with otel_jax.testing.record_compiles(step) as rec:
        params = {"w": jax.device_put(jnp.ones((4, 4)), _placed(mesh, None, "model"))}
        x = jax.device_put(jnp.ones((4, 4)), _placed(mesh, "data"))
        for _ in range(3):
            params, loss = step(params, x)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "sharding"]
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "sharding", "params['w']", True)
    text = hazard.text.replace("PartitionSpec", "P")  # JAX 0.8 writes PartitionSpec(...)
    assert "P(None, 'model') over" in text and "sharded P() over" in text
    assert "out_shardings" in hazard.hint and "with_sharding_constraint" in hazard.hint
    assert "params['w']" in [c.path for c in rec.records[1].diff.changes]


def test_a_sharding_xla_propagates_otherwise_is_a_sharding_warning():
    mesh = _mesh()

    @jax.jit
    def rotate(state):
        return state.T  # sharded by rows in, by columns out

    with otel_jax.testing.record_compiles(rotate) as rec:
        state = jax.device_put(jnp.ones((4, 4)), _placed(mesh, "data", None))
        for _ in range(3):
            state = rotate(state)
    assert [r.cause_kind.value for r in rec.records][:2] == ["first_compile", "sharding"]
    [(count, hazard), *_] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path) == (1, "sharding", "state")
    assert "(None, 'data') over" in hazard.text


@pytest.mark.parametrize("out_spec", [("data",), ("data", None)])
def test_out_shardings_equivalent_to_the_inputs_are_no_hazard(out_spec):
    # P('data', None) is not == P('data'), but JAX's cache takes them as one placement
    mesh = _mesh()
    step = jax.jit(lambda p: p * 0.9, out_shardings=_placed(mesh, *out_spec))
    with otel_jax.testing.record_compiles(step) as rec:
        params = jax.device_put(jnp.ones((4, 4)), _placed(mesh, "data"))
        for _ in range(3):
            params = step(params)
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_sharding_constraint_back_to_the_inputs_and_default_placement_are_no_hazard():
    mesh = _mesh()

    @jax.jit
    def step(p):
        return jax.lax.with_sharding_constraint(p @ p, _placed(mesh, None, "model"))

    @jax.jit
    def local(p):
        return p @ p

    with otel_jax.testing.record_compiles(step) as rec:
        params = jax.device_put(jnp.ones((4, 4)), _placed(mesh, None, "model"))
        for _ in range(3):
            params = step(params)
    with otel_jax.testing.record_compiles(local) as rec_local:
        plain = jnp.ones((4, 4))  # uncommitted: its placement is JAX's to choose
        for _ in range(3):
            plain = local(plain)
    assert len(rec.records) == 1 and not _hazards(rec.records)
    assert len(rec_local.records) == 1 and not _hazards(rec_local.records)


def test_the_function_is_never_taken_from_its_weak_reference_once_the_call_returned(
        monkeypatch):
    # A reference taken on otel_jax's thread, however briefly, keeps the program's
    # function alive while its next jax.jit of an equal one (a new bound method of the
    # same object) looks in JAX's cache, which finds the earlier entry while that
    # function lives: the program compiled less often than without otel_jax, now and then.
    from otel_jax._capture import _detached

    taken: list[str] = []

    class Watched:
        def __init__(self, obj):
            self._ref = _weak_ref(obj)

        def __call__(self):
            taken.append(threading.current_thread().name)
            return self._ref()

    monkeypatch.setattr(_detached, "_weak", lambda obj: Watched(obj))

    class Model:
        def step(self, state):
            return {"w": state["w"] * 2, "n": jnp.float32(1.0)}  # gains a key: fed back

    model = Model()
    with otel_jax.testing.record_compiles() as rec:
        state = {"w": jnp.ones(2)}
        for _ in range(3):
            forward = jax.jit(model.step)  # a new jitted bound method each pass
            state = forward(state)
    mine = [r for r in rec.records if r.function.qualname.endswith("Model.step")]
    # the recompile names the earlier function object (its liveness told without it) and
    # the first compile compared what comes back (the function read in the call)
    assert [r.cause_kind.value for r in mine][:2] == ["first_compile", "function_identity"]
    assert any(h.kind.value == "pytree_structure" for h in mine[0].hazards)
    assert taken == [], taken
