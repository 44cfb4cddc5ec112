"""flax programs: nnx.jit causes named by the user's module paths, linen Modules as
static arguments diffed field by field."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from conftest import diff_of

nnx = pytest.importorskip("flax.nnx")
nn = pytest.importorskip("flax.linen")


def only_change(span) -> dict:
    changes = diff_of(span)
    assert len(changes) == 1, changes
    return changes[0]


class Block(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(3, 4, rngs=rngs)
        self.dropout = nnx.Dropout(0.5, rngs=rngs)
        self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(2)])
        self.repeat = 1

    def __call__(self, x):
        h = self.dropout(self.l1(x))
        for layer in self.layers:
            h = layer(h)
        return h * self.repeat


def make_forward():
    """A fresh nnx.jit per test: JAX's cache outlives a test."""
    @nnx.jit
    def forward(model, x):
        return model(x)
    return forward


def spans_of(telemetry):
    return telemetry.compiles("make_forward.<locals>.forward")


def test_nnx_eval_names_the_flag_that_changed(telemetry):
    forward = make_forward()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.eval()
    forward(model, jnp.ones((2, 3)))
    model.train()
    forward(model, jnp.ones((2, 3)))  # back to the first mode: cached
    spans = spans_of(telemetry)
    assert len(spans) == 2
    span = spans[1]
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "model.dropout.deterministic",
                                 "kind": "pytree_structure",
                                 "before": "static False", "after": "static True"}
    cause = span.attributes["jax.compile.cause"]
    assert cause == "model.dropout.deterministic: static False -> static True"
    assert "GraphDef" not in span.attributes["jax.compile.cause.diff"]
    assert "train()/eval()" in span.attributes["jax.compile.hint"]


def test_nnx_plain_python_attribute(telemetry):
    forward = make_forward()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.repeat = 2
    forward(model, jnp.ones((2, 3)))
    assert only_change(spans_of(telemetry)[-1]) == {
        "path": "model.repeat", "kind": "pytree_structure",
        "before": "static 1", "after": "static 2"}


def test_nnx_added_layer_and_longer_list(telemetry):
    forward = make_forward()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.extra = nnx.Linear(4, 4, rngs=nnx.Rngs(1))
    forward(model, jnp.ones((2, 3)))
    span = spans_of(telemetry)[-1]
    assert only_change(span) == {"path": "model.extra", "kind": "pytree_structure",
                                 "before": "<absent>", "after": "Linear"}
    model.layers.append(nnx.Linear(4, 4, rngs=nnx.Rngs(2)))
    forward(model, jnp.ones((2, 3)))
    span = spans_of(telemetry)[-1]
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    changes = {c["path"]: c for c in diff_of(span)}
    assert changes["model.layers"]["before"] == "List with 2 items"
    assert changes["model.layers"]["after"] == "List with 3 items"
    assert changes["model.layers[2]"]["after"] == "Linear"
    assert set(changes) == {"model.layers", "model.layers[2]"}  # its leaves are implied
    assert span.attributes["jax.compile.cause"].startswith(
        "model.layers: List with 2 items -> List with 3 items")


def test_nnx_leaf_paths_are_the_users_module_paths(telemetry):
    forward = make_forward()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.l1 = nnx.Linear(3, 4, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    span = spans_of(telemetry)[-1]
    changes = {c["path"]: c for c in diff_of(span)}
    assert changes["model.l1.kernel"] == {"path": "model.l1.kernel", "kind": "dtype",
                                          "before": "f32[3,4]", "after": "bf16[3,4]"}
    assert "model.l1.bias" in changes
    arguments = otel_jax.compile_history(forward)[-1].signature["arguments"]
    assert arguments["model.layers[1].kernel"]["type"] == "f32[4,4]"
    assert arguments["x"]["type"] == "f32[2,3]"
    assert not any("states[" in path for path in arguments)


def test_nnx_shape_of_an_input_still_reads_plainly(telemetry):
    forward = make_forward()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    forward(model, jnp.ones((5, 3)))
    assert only_change(spans_of(telemetry)[-1]) == {"path": "x", "kind": "shape",
                                                    "before": "f32[2,3]", "after": "f32[5,3]"}


def test_nnx_graphdef_this_reader_does_not_know_falls_back(telemetry, monkeypatch):
    forward = make_forward()
    from otel_jax._capture import _wrappers

    def unknown(*args, **kwargs):
        raise _wrappers._Unreadable("a layout from another flax version")

    monkeypatch.setattr(_wrappers, "_read_graphdef", unknown)
    _wrappers._graph_cache.clear()
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.eval()
    forward(model, jnp.ones((2, 3)))
    span = spans_of(telemetry)[-1]
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    _wrappers._graph_cache.clear()


def test_read_graphdef_rejects_anything_it_does_not_know():
    from otel_jax._capture._wrappers import read_graphdef

    class Odd:
        nodes = [object()]
        attributes = []
        num_leaves = 0

        def __hash__(self):
            return 1

    assert read_graphdef(Odd(), "model") is None
    assert read_graphdef(object(), "model") is None


def test_nnx_shared_module_reads_as_a_reference(telemetry):
    class Tied(nnx.Module):
        def __init__(self, rngs):
            self.enc = nnx.Linear(3, 3, rngs=rngs)
            self.dec = self.enc

        def __call__(self, x):
            return self.dec(self.enc(x))

    @nnx.jit
    def run(model, x):
        return model(x)

    model = Tied(nnx.Rngs(0))
    run(model, jnp.ones((1, 3)))
    model.dec = nnx.Linear(3, 3, rngs=nnx.Rngs(1))
    run(model, jnp.ones((1, 3)))
    span = telemetry.compiles(
        "test_nnx_shared_module_reads_as_a_reference.<locals>.run")[-1]
    changes = {c["path"]: c for c in diff_of(span)}
    # nnx visits attributes in sorted order: ``dec`` held the module, ``enc`` the reference
    assert changes["model.enc"]["before"] == "shared with model.dec"
    assert changes["model.enc"]["after"] == "Linear"
    assert set(changes) == {"model.enc"}, changes  # its new fields and leaves are implied


# --- flax.linen Modules as static arguments ---------------------------------------------

class MLP(nn.Module):
    features: int
    activation: str = "relu"
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(x)


def test_linen_module_static_argument_is_diffed_field_by_field(telemetry):
    @functools.partial(jax.jit, static_argnums=0)
    def apply(module, params, x):
        return module.apply(params, x)

    params = MLP(4).init(jax.random.key(0), jnp.ones((1, 3)))
    apply(MLP(4, "relu", 0.0), params, jnp.ones((1, 3)))
    apply(MLP(4, "tanh", 0.5), params, jnp.ones((1, 3)))
    apply(MLP(4, "relu", 0.5), params, jnp.ones((1, 3)))  # one field from #2, two from #1
    apply(MLP(4, "relu", 0.0), params, jnp.ones((1, 3)))  # equal to #1: hashed by value
    spans = telemetry.compiles(
        "test_linen_module_static_argument_is_diffed_field_by_field.<locals>.apply")
    assert len(spans) == 3
    assert [c["path"] for c in diff_of(spans[1])] == ["module.activation", "module.dropout"]
    cause = spans[1].attributes["jax.compile.cause"]
    assert cause == "module.activation: 'relu' -> 'tanh' (+1 more)"
    assert spans[2].attributes["jax.compile.compared_with"] == 2
    assert only_change(spans[2]) == {"path": "module.activation", "kind": "static_argument",
                                     "before": "'tanh'", "after": "'relu'"}
    assert "identity" not in spans[2].attributes["jax.compile.hint"]
    static = otel_jax.compile_history(apply)[-1].signature["static_arguments"]["module"]
    assert "\n" not in static and "features" in static


def jit_in_mode(**mode):
    """nnx.jit with a graph mode, or skip on a flax without it."""
    try:
        @nnx.jit(**mode)
        def forward(model, x):
            return model(x)
    except TypeError:
        pytest.skip(f"this flax's nnx.jit has no {mode}")
    return forward


@pytest.mark.parametrize("mode", [dict(graph=False, graph_updates=False),
                                  dict(graph=True, graph_updates=False)],
                         ids=["tree-mode", "graph-without-updates"])
def test_nnx_other_graph_modes_name_attributes_and_sub_modules(telemetry, mode):
    forward = jit_in_mode(**mode)
    model = Block(nnx.Rngs(0))
    forward(model, jnp.ones((2, 3)))
    model.eval()
    forward(model, jnp.ones((2, 3)))
    model.repeat = 3
    forward(model, jnp.ones((2, 3)))
    model.extra = nnx.Linear(4, 4, rngs=nnx.Rngs(1))
    forward(model, jnp.ones((2, 3)))
    spans = telemetry.compiles("jit_in_mode.<locals>.forward")[-4:]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans[1:]] == [
        "pytree_structure", "pytree_structure", "pytree_structure"]
    assert diff_of(spans[1])[0] == {"path": "model.dropout.deterministic",
                                    "kind": "pytree_structure",
                                    "before": "static False", "after": "static True"}
    assert diff_of(spans[2])[0] == {"path": "model.repeat", "kind": "pytree_structure",
                                    "before": "static 1", "after": "static 3"}
    assert diff_of(spans[3])[0]["path"] == "model.extra"
    assert diff_of(spans[3])[0]["before"] == "<absent>"
    assert diff_of(spans[3])[0]["after"].startswith("Linear")
    for span in spans:
        assert "GraphDef" not in span.attributes["jax.compile.cause.diff"]


def test_nnx_optimizer_recreated_each_time_names_the_new_functions(telemetry):
    optax = pytest.importorskip("optax")
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))

    @nnx.jit
    def step(model, optimizer, x):
        grads = nnx.grad(lambda m: m(x).sum())(model)
        optimizer.update(model, grads)

    for _ in range(2):  # optax.sgd(...) re-created: a tuple of new init/update functions
        step(model, nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param), jnp.ones((8, 4)))
    assert_names_new_optimizer_functions(telemetry.last(
        "test_nnx_optimizer_recreated_each_time_names_the_new_functions.<locals>.step"),
        "optimizer.tx.init")


def assert_names_new_optimizer_functions(span, path: str) -> None:
    """An optax transformation re-created: its first function named as a new object."""
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    first = diff_of(span)[0]
    assert first["path"] == path
    assert first["after"] == "static new function object, same source"


def test_train_state_with_an_optimizer_recreated_each_time(telemetry):
    optax = pytest.importorskip("optax")
    from flax.training import train_state

    class Dense(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    module = Dense()
    params = module.init(jax.random.key(0), jnp.ones((1, 3)))

    @jax.jit
    def step(state, x):
        grads = jax.grad(lambda p: state.apply_fn(p, x).sum())(state.params)
        return state.apply_gradients(grads=grads)

    for _ in range(2):  # optax.adam(...) re-created: new init/update functions
        state = train_state.TrainState.create(apply_fn=module.apply, params=params,
                                              tx=optax.adam(1e-3))
        step(state, jnp.ones((1, 3)))
    span = telemetry.last(
        "test_train_state_with_an_optimizer_recreated_each_time.<locals>.step")
    assert_names_new_optimizer_functions(span, "state.tx.init")
    assert "optax" in span.attributes["jax.compile.hint"]
    state = state.replace(apply_fn=Dense().apply)  # an equal module, another object
    step(state, jnp.ones((1, 3)))
    span = telemetry.last(
        "test_train_state_with_an_optimizer_recreated_each_time.<locals>.step")
    assert only_change(span)["path"] == "state.apply_fn"
    assert "new bound method object" in only_change(span)["after"]


class Holder(nnx.Module):
    def __init__(self, kind):
        self.w = kind(jnp.ones(3))


def test_nnx_variable_type_change_is_not_taken_for_a_cache_eviction(telemetry):
    # The graph's structure differs only inside what the wrapper passes as a static
    # structure: two compiles must not read as the same signature.
    @nnx.jit
    def step(m):
        return m.w[...] * 2

    step(Holder(nnx.Param))
    step(Holder(nnx.BatchStat))
    spans = telemetry.compiles(
        "test_nnx_variable_type_change_is_not_taken_for_a_cache_eviction.<locals>.step")
    assert len(spans) == 2
    assert spans[1].attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert "same signature" not in spans[1].attributes["jax.compile.cause"]


def test_nnx_argument_none_then_a_value_reads_none_before(telemetry):
    @nnx.jit
    def step(model, x, rngs=None, mask=None):
        h = model(x)
        return h if mask is None else h * mask

    model = Block(nnx.Rngs(0))
    x = jnp.ones((2, 3))
    step(model, x, rngs=None)
    step(model, x, rngs=nnx.Rngs(1))  # passed both times: None, then a graph node
    step(model, x, nnx.Rngs(1), None)
    step(model, x, nnx.Rngs(1), jnp.ones(4))  # positionally: None -> an array
    spans = telemetry.compiles(
        "test_nnx_argument_none_then_a_value_reads_none_before.<locals>.step")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "pytree_structure", "pytree_structure", "pytree_structure"]
    assert only_change(spans[1]) == {"path": "rngs", "kind": "pytree_structure",
                                     "before": "None", "after": "Rngs"}
    assert spans[1].attributes["jax.compile.cause"] == "rngs: None -> Rngs"
    assert "None-vs-array" in spans[1].attributes["jax.compile.hint"]
    assert {"path": "mask", "kind": "pytree_structure", "before": "None",
            "after": "f32[4]"} in diff_of(spans[3])


def test_changed_keys_of_a_state_and_a_frozendict_are_named(telemetry):
    from flax.core import FrozenDict

    @jax.jit
    def total(moment, params):
        return sum(leaf.sum() for leaf in jax.tree_util.tree_leaves((moment, params)))

    base = {"w": jnp.ones(2), "base_module": jnp.ones(1)}
    lora = {**base, "lora_a": jnp.ones(2), "lora_b": jnp.ones(2)}
    total(nnx.State(base), FrozenDict({"w": jnp.ones(2)}))
    total(nnx.State(lora), FrozenDict({"w": jnp.ones(2)}))
    total(nnx.State(lora), FrozenDict({"w": jnp.ones(2), "b": None, "c": jnp.ones(1)}))
    name = "test_changed_keys_of_a_state_and_a_frozendict_are_named.<locals>.total"
    spans = telemetry.compiles(name)
    assert diff_of(spans[1]) == [
        {"path": "moment['lora_a']", "kind": "pytree_structure", "before": "<absent>",
         "after": "f32[2]"},
        {"path": "moment['lora_b']", "kind": "pytree_structure", "before": "<absent>",
         "after": "f32[2]"}]
    assert {c["path"] for c in diff_of(spans[2])} == {"params['b']", "params['c']"}
    assert "leaves" not in spans[1].attributes["jax.compile.cause"]
