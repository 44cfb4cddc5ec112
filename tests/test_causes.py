"""Every cause kind of docs/telemetry.md, provoked with real JAX: kind, diff path, before and after."""

from __future__ import annotations

import functools
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conftest import BackendCompiles, diff_of, needs_devices


def only_change(span) -> dict:
    changes = diff_of(span)
    assert len(changes) == 1, changes
    return changes[0]


def test_first_compile(telemetry):
    @jax.jit
    def first(x):
        return x + 1

    first(jnp.ones(3))
    span = telemetry.last("test_first_compile.<locals>.first")
    assert span.attributes["jax.compile.cause.kind"] == "first_compile"
    assert span.attributes["jax.compile.count"] == 1
    assert span.attributes["jax.compile.is_recompile"] is False
    assert diff_of(span) == []


def test_weak_type_python_scalar_then_returned_f32(telemetry):
    @jax.jit
    def scale(x):
        return x * jnp.float32(0.5)  # a strongly typed result, as a schedule returns

    y = scale(0.0)  # a Python float: weakly typed f32[]
    assert not y.aval.weak_type
    scale(y)  # the f32[] it returned: strongly typed
    span = telemetry.last("test_weak_type_python_scalar_then_returned_f32.<locals>.scale")
    assert span.attributes["jax.compile.cause.kind"] == "weak_type"
    assert only_change(span) == {"path": "x", "kind": "weak_type",
                                 "before": "f32[] (weak)", "after": "f32[]"}
    assert span.attributes["jax.compile.cause"] == "x: f32[] (weak) -> f32[]"
    assert span.attributes["jax.compile.is_recompile"] is True


def test_dtype_ones_then_arange(telemetry):
    @jax.jit
    def total(x):
        return x.sum()

    total(jnp.ones(4))
    total(jnp.arange(4))
    span = telemetry.last("test_dtype_ones_then_arange.<locals>.total")
    assert span.attributes["jax.compile.cause.kind"] == "dtype"
    assert only_change(span) == {"path": "x", "kind": "dtype",
                                 "before": "f32[4]", "after": "i32[4]"}


def test_shape_last_partial_batch(telemetry):
    @jax.jit
    def loss(params, batch):
        return ((batch["x"] @ params["w"]) ** 2).mean()

    params = {"w": jnp.ones((8, 2))}
    loss(params, {"x": jnp.ones((32, 8))})
    loss(params, {"x": jnp.ones((32, 8))})
    loss(params, {"x": jnp.ones((17, 8))})
    assert len(telemetry.compiles("test_shape_last_partial_batch.<locals>.loss")) == 2
    span = telemetry.last("test_shape_last_partial_batch.<locals>.loss")
    assert span.attributes["jax.compile.cause.kind"] == "shape"
    assert only_change(span) == {"path": "batch['x']", "kind": "shape",
                                 "before": "f32[32,8]", "after": "f32[17,8]"}


def test_pytree_dict_gains_key(telemetry):
    @jax.jit
    def apply(x, config):
        return x * config["scale"]

    apply(jnp.ones(2), {"scale": 2.0})
    apply(jnp.ones(2), {"scale": 2.0, "dropout": 0.1})
    span = telemetry.last("test_pytree_dict_gains_key.<locals>.apply")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "config['dropout']", "kind": "pytree_structure",
                                 "before": "<absent>", "after": "f32[] (weak)"}


def test_pytree_none_then_array(telemetry):
    @jax.jit
    def maybe_bias(x, bias):
        return x if bias is None else x + bias

    maybe_bias(jnp.ones(3), None)
    maybe_bias(jnp.ones(3), jnp.ones(3))
    span = telemetry.last("test_pytree_none_then_array.<locals>.maybe_bias")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "bias", "kind": "pytree_structure",
                                 "before": "None", "after": "f32[3]"}


def test_pytree_positional_then_keyword(telemetry):
    @jax.jit
    def add(x, y):
        return x + y

    add(jnp.ones(3), jnp.ones(3))
    add(jnp.ones(3), y=jnp.ones(3))
    span = telemetry.last("test_pytree_positional_then_keyword.<locals>.add")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    change = only_change(span)
    assert change["path"] == "y"
    assert change["before"] == "passed positionally (f32[3])"
    assert change["after"] == "passed by keyword (f32[3])"


def test_static_argument_value(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def power(x, n):
        return x ** n

    power(jnp.ones(3), 2)
    power(jnp.ones(3), 3)
    span = telemetry.last("test_static_argument_value.<locals>.power")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert only_change(span) == {"path": "n", "kind": "static_argument",
                                 "before": "2", "after": "3"}


class StepConfig:  # no __eq__/__hash__: hashed by identity
    def __init__(self, scale: float) -> None:
        self.scale = scale


def test_static_argument_hashed_by_identity(telemetry):
    @functools.partial(jax.jit, static_argnames="cfg")
    def step(x, cfg):
        return x * cfg.scale

    for _ in range(3):
        step(jnp.ones(3), cfg=StepConfig(2.0))  # a new instance each step
    spans = telemetry.compiles("test_static_argument_hashed_by_identity.<locals>.step")
    assert len(spans) == 3
    for span in spans[1:]:
        assert span.attributes["jax.compile.cause.kind"] == "static_argument"
        change = only_change(span)
        assert change["path"] == "cfg"
        assert "StepConfig" in change["after"] and "identity" in change["after"]
        cause = span.attributes["jax.compile.cause"]
        assert "hashes by identity" in cause and "StepConfig" in cause
        assert "0x" not in span.attributes["jax.compile.cause.diff"]


def test_a_checkpoint_policy_built_every_step(telemetry):
    """``save_only_these_names`` made in the loop and passed as a static argument. Version
    note: up to JAX 0.10 it returns a frozen dataclass hashed by value (one compile); from
    0.11 a closure, hashed by identity, so every step compiles again, and the cause must say
    that it is a new function object of the same source and how to avoid it."""
    @functools.partial(jax.jit, static_argnums=(1,))
    def step(x, policy):
        inner = jax.checkpoint(lambda y: jnp.sin(y) * 2, policy=policy)
        return jax.grad(lambda y: inner(y).sum())(x)

    for _ in range(3):
        step(jnp.ones(3), jax.checkpoint_policies.save_only_these_names("hidden"))
    spans = telemetry.compiles("test_a_checkpoint_policy_built_every_step.<locals>.step")
    assert len(spans) in (1, 3)
    assert spans[0].attributes["jax.compile.cause.kind"] == "first_compile"
    for span in spans[1:]:
        assert span.attributes["jax.compile.cause.kind"] == "static_argument"
        change = only_change(span)
        assert change["path"] == "policy"
        assert "save_only_these_names" in change["before"]
        assert "new function object, same source" in change["after"]
        assert "define it once outside the loop" in span.attributes["jax.compile.hint"]


def test_function_identity_lambda_recreated(telemetry):
    for _ in range(3):
        jax.jit(lambda x: x * 3)(jnp.ones(2))
    spans = telemetry.compiles("test_function_identity_lambda_recreated.<locals>.<lambda>")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    for span in spans[1:]:
        assert span.attributes["jax.compile.cause.kind"] == "function_identity"
        assert only_change(span)["path"] == "<function>"


def scaled(x, factor):
    return x * factor


def test_function_identity_partial_recreated(telemetry):
    for _ in range(2):
        jax.jit(functools.partial(scaled, factor=2.0))(jnp.ones(2))
    span = telemetry.last("scaled")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    assert span.attributes["code.function.name"] == "scaled"


class Scaler:
    def __init__(self, k: float) -> None:
        self.k = k

    def apply(self, x):
        return x * self.k


def test_function_identity_bound_method_rejitted(telemetry):
    scaler = Scaler(2.0)
    for _ in range(2):
        jax.jit(scaler.apply)(jnp.ones(2))  # each scaler.apply is a new method object
    span = telemetry.last("Scaler.apply")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    assert only_change(span)["after"] == "new bound method object, same method"
    assert "jax.jit(obj.method) re-created" in span.attributes["jax.compile.cause"]
    assert "jax.jit(obj.method)" in span.attributes["jax.compile.hint"]


def test_tracing_context_enable_x64(telemetry):
    @jax.jit
    def double(x):
        return x * 2

    double(jnp.ones(3))
    with jax.enable_x64(True):
        double(jnp.ones(3, dtype=jnp.float32))
    span = telemetry.last("test_tracing_context_enable_x64.<locals>.double")
    assert span.attributes["jax.compile.cause.kind"] == "tracing_context"
    change = next(c for c in diff_of(span) if c["kind"] == "tracing_context")
    assert change == {"path": "jax_enable_x64", "kind": "tracing_context",
                      "before": "False", "after": "True"}


def test_tracing_context_matmul_precision(telemetry):
    @jax.jit
    def mm(a):
        return a @ a

    mm(jnp.ones((4, 4)))
    with jax.default_matmul_precision("highest"):
        mm(jnp.ones((4, 4)))
    span = telemetry.last("test_tracing_context_matmul_precision.<locals>.mm")
    assert span.attributes["jax.compile.cause.kind"] == "tracing_context"
    change = only_change(span)
    assert change["path"] == "jax_default_matmul_precision"
    assert change["before"] == "None" and "highest" in change["after"]


def test_sharding_changed(telemetry):
    devices = needs_devices(4)
    mesh = Mesh(np.array(devices[:4]), ("data",))
    x = jnp.ones((8, 4))

    @jax.jit
    def norm(x):
        return (x * x).sum()

    norm(jax.device_put(x, NamedSharding(mesh, P("data"))))
    norm(jax.device_put(x, NamedSharding(mesh, P(None, "data"))))
    span = telemetry.last("test_sharding_changed.<locals>.norm")
    assert span.attributes["jax.compile.cause.kind"] == "sharding"
    change = only_change(span)
    assert change["path"] == "x" and change["kind"] == "sharding"
    assert "'data'" in change["before"] and "None, 'data'" in change["after"]
    assert span.attributes["jax.device.count"] == 4


def test_device_placement_changed(telemetry):
    devices = needs_devices(2)

    @jax.jit
    def inc(x):
        return x + 1

    x = jnp.ones(3)
    inc(jax.device_put(x, devices[0]))
    inc(jax.device_put(x, devices[1]))
    span = telemetry.last("test_device_placement_changed.<locals>.inc")
    assert span.attributes["jax.compile.cause.kind"] == "device_placement"
    assert only_change(span) == {"path": "x", "kind": "device_placement",
                                 "before": f"committed {devices[0].platform}:{devices[0].id}",
                                 "after": f"committed {devices[1].platform}:{devices[1].id}"}


def test_device_placement_committed_ness(telemetry):
    devices = needs_devices(2)

    @jax.jit
    def inc(x):
        return x + 1

    inc(jnp.ones(3))  # uncommitted, default device
    inc(jax.device_put(jnp.ones(3), devices[1]))
    span = telemetry.last("test_device_placement_committed_ness.<locals>.inc")
    assert span.attributes["jax.compile.cause.kind"] == "device_placement"
    assert only_change(span) == {"path": "x", "kind": "device_placement",
                                 "before": "uncommitted", "after": "committed cpu:1"}


def test_jit_options_donate_argnums(telemetry):
    def update(w, g):
        return w - 0.1 * g

    jax.jit(update)(jnp.ones(3), jnp.ones(3))
    jax.jit(update, donate_argnums=0)(jnp.ones(3), jnp.ones(3))
    span = telemetry.last("test_jit_options_donate_argnums.<locals>.update")
    assert span.attributes["jax.compile.cause.kind"] == "jit_options"
    assert only_change(span) == {"path": "jit(donate_argnums)", "kind": "jit_options",
                                 "before": "()", "after": "(0,)"}


def test_unknown_after_cache_eviction(telemetry):
    @jax.jit
    def neg(x):
        return -x

    neg(jnp.ones(3))
    jax.clear_caches()
    neg(jnp.ones(3))
    span = telemetry.last("test_unknown_after_cache_eviction.<locals>.neg")
    assert span.attributes["jax.compile.cause.kind"] == "unknown"
    assert "clear_caches" in span.attributes["jax.compile.cause"]
    assert span.attributes["jax.compile.count"] == 2


def test_several_changes_listed_most_significant_first(telemetry):
    @functools.partial(jax.jit, static_argnums=2)
    def f(x, y, n):
        return x * n + y

    f(jnp.ones(3), jnp.ones(3), 1)
    f(jnp.ones(4), jnp.arange(4), 2)
    span = telemetry.last("test_several_changes_listed_most_significant_first.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    kinds = {c["path"]: c["kind"] for c in diff_of(span)}
    assert kinds == {"n": "static_argument", "x": "shape", "y": "dtype"}
    assert span.attributes["jax.compile.cause"].endswith("(+2 more)")


def test_closest_earlier_signature_is_compared(telemetry):
    @jax.jit
    def f(x):
        return x + 1

    f(jnp.ones(3))
    f(jnp.ones(5))
    f(jnp.ones(3, dtype=jnp.int32))  # closest to the first (shape equal), not the latest
    span = telemetry.last("test_closest_earlier_signature_is_compared.<locals>.f")
    assert span.attributes["jax.compile.compared_with"] == 1
    assert only_change(span) == {"path": "x", "kind": "dtype",
                                 "before": "f32[3]", "after": "i32[3]"}


@pytest.mark.filterwarnings("ignore:.*mesh.*:DeprecationWarning")
def test_tracing_context_mesh(telemetry):
    devices = needs_devices(4)

    @jax.jit
    def f(x):
        return x * 2

    f(jnp.ones((8, 4)))
    with Mesh(np.array(devices[:4]), ("d",)):
        f(jnp.ones((8, 4)))
    span = telemetry.last("test_tracing_context_mesh.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "tracing_context"
    change = only_change(span)
    assert change["path"] == "mesh_context_manager" and "'d'" in change["after"]


def test_sharding_in_the_type_on_an_explicit_mesh(telemetry):
    needs_devices(4)
    from jax.sharding import AxisType

    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,))

    @jax.jit
    def f(x):
        return x + 1

    with jax.set_mesh(mesh):
        f(jnp.ones((8, 4)))
        f(jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("data"))))
    span = telemetry.last("test_sharding_in_the_type_on_an_explicit_mesh.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "sharding"
    change = only_change(span)
    assert change == {"path": "x", "kind": "sharding", "before": "f32[8,4]",
                      "after": "f32[8@data,4]"}


def test_static_field_of_a_dataclass_pytree(telemetry):
    import dataclasses

    @functools.partial(jax.tree_util.register_dataclass, data_fields=["w"],
                       meta_fields=["layers"])
    @dataclasses.dataclass
    class Config:  # as flax.struct marks it: a field that is not a pytree node
        w: jax.Array
        layers: int = dataclasses.field(metadata={"pytree_node": False})

    @jax.jit
    def run(cfg, x):
        return x * cfg.w * cfg.layers

    run(Config(jnp.ones(2), 2), jnp.ones(2))
    run(Config(jnp.ones(2), 3), jnp.ones(2))
    span = telemetry.last("test_static_field_of_a_dataclass_pytree.<locals>.run")
    assert span.attributes["jax.compile.cause.kind"] == "pytree_structure"
    assert only_change(span) == {"path": "cfg.layers", "kind": "pytree_structure",
                                 "before": "static 2", "after": "static 3"}


def test_weak_type_difference_is_preferred_over_two_differences(telemetry):
    @jax.jit
    def g(x, y):
        return x * y

    g(1, jnp.ones(2))  # x: i32[] (weak)
    g(True, jnp.ones(3))  # x: bool[], y: f32[3]
    g(jnp.int32(1), jnp.ones(2))  # one weak-type flip from the first, two changes from the last
    span = telemetry.last(
        "test_weak_type_difference_is_preferred_over_two_differences.<locals>.g")
    assert span.attributes["jax.compile.compared_with"] == 1
    assert only_change(span) == {"path": "x", "kind": "weak_type",
                                 "before": "i32[] (weak)", "after": "i32[]"}


def test_static_argument_that_never_equals_itself(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def shift(x, eps):
        return x + eps

    shift(jnp.ones(2), float("nan"))
    shift(jnp.ones(2), float("nan"))  # NaN != NaN: JAX compiles again
    span = telemetry.last("test_static_argument_that_never_equals_itself.<locals>.shift")
    change = only_change(span)
    assert (change["path"], change["kind"], change["before"]) == ("eps", "static_argument",
                                                                  "nan")
    assert "looks the same" in change["after"]


def test_tracing_context_enum_value_reads_as_set(telemetry):
    @jax.jit
    def add(x, y):
        return x + y

    add(jnp.ones(2), jnp.ones(2))
    with jax.numpy_dtype_promotion("strict"):
        add(jnp.ones(2), jnp.ones(2))
    span = telemetry.last("test_tracing_context_enum_value_reads_as_set.<locals>.add")
    assert only_change(span) == {"path": "jax_numpy_dtype_promotion",
                                 "kind": "tracing_context",
                                 "before": "'standard'", "after": "'strict'"}


def test_eager_scan_with_a_body_recreated_each_call(telemetry):
    for _ in range(2):
        jax.lax.scan(lambda c, v: (c + v, c), 0.0, jnp.ones(4))  # outside jit: eager
    scans = telemetry.compiles("scan", eager=True)
    assert [s.attributes["jax.compile.count"] for s in scans][-1] >= 2
    change = next(c for c in diff_of(scans[-1]) if c["path"] == "params.jaxpr")
    assert change["kind"] == "static_argument"
    assert "newly traced body" in change["after"]
    assert all(s.attributes["jax.compile.eager_op"] for s in scans)


def test_closest_signature_counts_the_function_object(telemetry):
    def make():
        return lambda x: x * 2  # one source, a new function object per call

    first, second = jax.jit(make()), jax.jit(make())
    first(jnp.ones(3))
    second(jnp.ones(3))  # function_identity against the first
    first(jnp.ones(4))  # closest: its own earlier compile, not the other object's
    spans = telemetry.compiles("test_closest_signature_counts_the_function_object."
                               "<locals>.make.<locals>.<lambda>")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "function_identity", "shape"]
    assert spans[-1].attributes["jax.compile.compared_with"] == 1
    assert only_change(spans[-1]) == {"path": "x", "kind": "shape",
                                      "before": "f32[3]", "after": "f32[4]"}


# --- programs users bring: exported models -------------------------------------------------

def serve(w, batch):
    return jnp.tanh(batch["x"] @ w) * batch["scale"]


def test_an_exported_model_called_eagerly_is_the_users_program(telemetry):
    from jax import export

    from otel_jax.testing import assert_max_compiles

    b, = export.symbolic_shape("b")
    exported = export.export(jax.jit(serve))(
        jax.ShapeDtypeStruct((3, 2), jnp.float32),
        {"x": jax.ShapeDtypeStruct((b, 3), jnp.float32),
         "scale": jax.ShapeDtypeStruct((), jnp.float32)})
    w = jnp.ones((3, 2))
    before = len(telemetry.compiles(eager=True))
    with BackendCompiles() as jax_counted, assert_max_compiles(2) as budget:
        exported.call(w, {"x": jnp.ones((4, 3)), "scale": jnp.float32(2)})
        exported.call(w, {"x": jnp.ones((4, 3)), "scale": jnp.float32(3)})  # cached
        exported.call(w, {"x": jnp.ones((7, 3)), "scale": jnp.float32(2)})  # a new batch size
    assert [r.function.qualname for r in budget.records] == ["serve", "serve"]
    spans = telemetry.compiles("serve")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile", "shape"]
    assert not any(s.attributes["jax.compile.eager_op"] for s in spans)
    assert only_change(spans[1]) == {"path": "args[1]['x']", "kind": "shape",
                                     "before": "f32[4,3]", "after": "f32[7,3]"}
    assert spans[1].attributes["jax.compile.cause"] == "args[1]['x']: f32[4,3] -> f32[7,3]"
    assert "pad or bucket" in spans[1].attributes["jax.compile.hint"]
    # Counts equal JAX's: every backend compile is one span, eager ops included.
    assert len(telemetry.compiles(eager=True)) - before == len(jax_counted.names)
    lines = [ln for ln in telemetry.log_lines() if ln.get("function") == "serve"]
    assert [ln["level"] for ln in lines] == ["info", "info"]  # in the default log


def serve_again(w, batch):
    return serve(w, batch)


def test_a_model_exported_again_for_a_new_shape_is_another_program(telemetry):
    from jax import export

    def exported_for(rows):
        return export.export(jax.jit(serve_again))(
            jax.ShapeDtypeStruct((3, 2), jnp.float32),
            {"x": jax.ShapeDtypeStruct((rows, 3), jnp.float32),
             "scale": jax.ShapeDtypeStruct((), jnp.float32)})

    w = jnp.ones((3, 2))
    for rows in (4, 7):
        exported_for(rows).call(w, {"x": jnp.ones((rows, 3)), "scale": jnp.float32(2)})
    span = telemetry.last("serve_again")
    assert span.attributes["jax.compile.eager_op"] is False
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert diff_of(span)[0] == {
        "path": "<exported program>", "kind": "static_argument",
        "before": "exported for (f32[3,2], f32[], f32[4,3])",
        "after": "another export, for (f32[3,2], f32[], f32[7,3])"}
    assert "symbolic" in span.attributes["jax.compile.hint"]


def test_jax_own_eager_ops_stay_eager_next_to_an_exported_model(telemetry):
    from jax import export

    exported = export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), jnp.float32))
    x = jnp.arange(3.0)
    exported.call(x)
    jnp.sin(x + 1)
    jnp.mean(x)
    jnp.stack([x, x])
    user = telemetry.compiles()
    assert [s.attributes["code.function.name"] for s in user] == ["sin"]  # the exported one
    eager = {s.attributes["code.function.name"] for s in telemetry.compiles(eager=True)
             if s.attributes["jax.compile.eager_op"]}
    assert {"sin", "_mean", "add"} <= eager  # stack: jitted, or concatenate op by op (0.8)


def test_a_legacy_prng_key_then_a_typed_one_hints_at_one_key_style(telemetry):
    @jax.jit
    def sample(state):
        return jax.random.normal(state["key"], (2,)) * state["scale"]

    sample({"key": jax.random.PRNGKey(0), "scale": jnp.float32(1)})
    sample({"key": jax.random.key(0), "scale": jnp.float32(1)})  # typed: key<fry>[]
    sample({"key": jax.random.key(0, impl="rbg"), "scale": jnp.float32(1)})
    spans = telemetry.compiles(
        "test_a_legacy_prng_key_then_a_typed_one_hints_at_one_key_style.<locals>.sample")
    assert only_change(spans[1]) == {"path": "state['key']", "kind": "dtype",
                                     "before": "u32[2]", "after": "key<fry>[]"}
    hint = spans[1].attributes["jax.compile.hint"]
    assert "one key style" in hint and "jax.random.PRNGKey" in hint and "cast" not in hint
    assert only_change(spans[2]) == {"path": "state['key']", "kind": "dtype",
                                     "before": "key<fry>[]", "after": "key<rbg>[]"}
    assert "same implementation" in spans[2].attributes["jax.compile.hint"]


def test_a_dtype_change_of_plain_arrays_keeps_the_cast_hint(telemetry):
    @jax.jit
    def total(x):
        return x.sum()

    total(jnp.ones(2, jnp.uint32))
    total(jnp.ones(2, jnp.float32))
    span = telemetry.last("test_a_dtype_change_of_plain_arrays_keeps_the_cast_hint.<locals>.total")
    assert span.attributes["jax.compile.cause.kind"] == "dtype"
    assert "cast inputs to one dtype" in span.attributes["jax.compile.hint"]


# --- statics of types JAX interns or hashes by identity -----------------------------------

def test_a_mesh_static_argument_names_what_changed_in_the_mesh(telemetry):
    devices = np.array(needs_devices(4)[:4])

    @functools.partial(jax.jit, static_argnums=1)
    def step(x, mesh):
        return x * mesh.devices.size

    step(jnp.ones(2), Mesh(devices.reshape(4, 1), ("data", "model")))
    step(jnp.ones(2), Mesh(devices.reshape(4, 1), ("data", "model")))  # equal: cached
    step(jnp.ones(2), Mesh(devices.reshape(2, 2), ("data", "model")))
    step(jnp.ones(2), Mesh(devices[::-1].reshape(2, 2), ("data", "model")))  # order only
    spans = telemetry.compiles(
        "test_a_mesh_static_argument_names_what_changed_in_the_mesh.<locals>.step")
    assert len(spans) == 3  # as many as JAX compiled: an equal mesh hit the cache
    assert only_change(spans[1]) == {"path": "mesh.axis_sizes", "kind": "static_argument",
                                     "before": "(4, 1)", "after": "(2, 2)"}
    assert spans[1].attributes["jax.compile.cause"] == "mesh.axis_sizes: (4, 1) -> (2, 2)"
    ids = [d.id for d in devices]
    assert only_change(spans[2]) == {
        "path": "mesh.devices", "kind": "static_argument",
        "before": "ids " + ",".join(map(str, ids)),
        "after": "ids " + ",".join(map(str, ids[::-1]))}
    for span in spans[1:]:
        assert "identity" not in span.attributes["jax.compile.cause"]
        hint = span.attributes["jax.compile.hint"]
        assert "__eq__" not in hint and "compiles once" in hint


class Knobs:  # no __eq__/__hash__: hashed by identity
    def __init__(self, scale: float, name: str) -> None:
        self.scale = scale
        self.name = name


def test_an_identity_hashed_static_also_names_the_attributes_that_differ(telemetry):
    @functools.partial(jax.jit, static_argnames="knobs")
    def step(x, knobs):
        return x * knobs.scale

    step(jnp.ones(2), knobs=Knobs(2.0, "a"))
    step(jnp.ones(2), knobs=Knobs(2.0, "a"))  # equal attributes: identity alone
    step(jnp.ones(2), knobs=Knobs(3.0, "a"))
    spans = telemetry.compiles("test_an_identity_hashed_static_also_names_the_attributes_"
                               "that_differ.<locals>.step")
    assert [len(diff_of(s)) for s in spans[1:]] == [1, 2]
    assert spans[1].attributes["jax.compile.cause"] == (
        "static argument knobs: a new test_causes.Knobs instance; test_causes.Knobs hashes "
        "by identity (no "
        "__eq__/__hash__), so every new instance compiles again")
    assert spans[2].attributes["jax.compile.cause"].endswith(
        "every new instance compiles again; its fields differ too: scale: 2.0 -> 3.0")
    assert diff_of(spans[2])[1] == {"path": "knobs.scale", "kind": "static_argument",
                                    "before": "2.0", "after": "3.0"}
    assert "__eq__/__hash__" in spans[2].attributes["jax.compile.hint"]


def test_a_function_static_argument_recreated_each_call(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def apply(x, fn):
        return fn(x)

    for _ in range(2):
        apply(jnp.ones(2), lambda v: v * 2)
    span = telemetry.last("test_a_function_static_argument_recreated_each_call.<locals>.apply")
    change = only_change(span)
    assert (change["path"], change["kind"], change["after"]) == (
        "fn", "static_argument", "new function object, same source")
    hint = span.attributes["jax.compile.hint"]
    assert "define it once outside the loop" in hint and "__eq__" not in hint


def test_arguments_under_star_args_are_named_by_the_parameter(telemetry):
    @jax.jit
    def combine(x, *features):
        return x + sum(f.sum() for f in features)

    combine(jnp.ones(4), jnp.ones((4, 2)), jnp.ones((4, 2)))
    combine(jnp.ones(4), jnp.ones((4, 2)), jnp.ones((4, 2)), jnp.ones((4, 2)))
    combine(jnp.ones(4), jnp.ones((4, 2)), jnp.ones((4, 2), jnp.int32))
    spans = telemetry.compiles(
        "test_arguments_under_star_args_are_named_by_the_parameter.<locals>.combine")
    assert [diff_of(s) for s in spans[1:]] == [
        [{"path": "features[2]", "kind": "pytree_structure", "before": "<absent>",
          "after": "f32[4,2]"}],
        [{"path": "features[1]", "kind": "dtype", "before": "f32[4,2]", "after": "i32[4,2]"}],
    ]


def test_a_static_argument_under_star_args_is_named_by_the_parameter(telemetry):
    @functools.partial(jax.jit, static_argnums=2)
    def scale(x, *factors):
        return x * factors[1]

    scale(jnp.ones(2), jnp.float32(1), 2)
    scale(jnp.ones(2), jnp.float32(1), 3)
    span = telemetry.last(
        "test_a_static_argument_under_star_args_is_named_by_the_parameter.<locals>.scale")
    assert only_change(span) == {"path": "factors[1]", "kind": "static_argument",
                                 "before": "2", "after": "3"}


def test_keyword_only_and_star_star_kwargs_are_named_by_their_parameters(telemetry):
    @jax.jit
    def apply(x, *, scale, **extra):
        return x * scale.sum() + sum(v.sum() for v in extra.values())

    apply(jnp.ones(2), scale=jnp.ones(2))
    apply(jnp.ones(2), scale=jnp.ones(2), bias=jnp.ones(2))
    apply(jnp.ones(2), scale=jnp.ones(3), bias=jnp.ones(2))
    spans = telemetry.compiles("test_keyword_only_and_star_star_kwargs_are_named_by_their_"
                               "parameters.<locals>.apply")
    assert [diff_of(s) for s in spans[1:]] == [
        [{"path": "extra['bias']", "kind": "pytree_structure", "before": "<absent>",
          "after": "f32[2]"}],
        [{"path": "scale", "kind": "shape", "before": "f32[2]", "after": "f32[3]"}],
    ]


class GradientTransformation(typing.NamedTuple):
    """As optax's: a NamedTuple of two functions, made again by every chain(...) call."""

    init: typing.Callable
    update: typing.Callable


def chain(scale: float) -> GradientTransformation:
    def init_fn(params):
        return params

    def update_fn(updates, state):
        return jax.tree_util.tree_map(lambda u: u * scale, updates), state

    return GradientTransformation(init_fn, update_fn)


def test_a_static_namedtuple_of_functions_rebuilt_names_the_new_function_objects(telemetry):
    @functools.partial(jax.jit, static_argnames="tx")
    def train_step(grads, tx):
        return tx.update(grads, None)[0]

    for _ in range(2):  # the optimizer built again every epoch
        train_step(jnp.ones(3), tx=chain(0.1))
    span = telemetry.last("test_a_static_namedtuple_of_functions_rebuilt_names_the_new_"
                          "function_objects.<locals>.train_step")
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert diff_of(span) == [
        {"path": "tx.init", "kind": "static_argument",
         "before": "<function chain.<locals>.init_fn>",
         "after": "new function object, same source"},
        {"path": "tx.update", "kind": "static_argument",
         "before": "<function chain.<locals>.update_fn>",
         "after": "new function object, same source"},
    ]
    assert span.attributes["jax.compile.cause"] == (
        "tx.init: <function chain.<locals>.init_fn> -> new function object, same source "
        "(+1 more)")
    hint = span.attributes["jax.compile.hint"]
    assert "build it once" in hint and "equals itself" not in hint


def test_grad_with_other_argnums_names_the_transformation_never_an_eviction(telemetry):
    @jax.jit
    def loss(a, b):
        return (a * b).sum()

    x = jnp.ones(3)
    jax.grad(loss, argnums=0)(x, x)
    jax.grad(loss, argnums=(0, 1))(x, x)
    spans = telemetry.compiles(
        "test_grad_with_other_argnums_names_the_transformation_never_an_eviction.<locals>.loss")
    causes = [s.attributes["jax.compile.cause"] for s in spans[1:]]
    assert not any("evict" in c or "clear_caches" in c for c in causes), causes
    # the forward program of argnums=(0, 1) reads like argnums=0's, argument for argument
    forward = next(s for s in spans if s.attributes["jax.compile.count"] == 3)
    assert forward.attributes["jax.compile.cause.kind"] == "transform_params"
    assert only_change(forward) == {"path": "<transformation>", "kind": "transform_params",
                                    "before": "grad(argnums=0)",
                                    "after": "grad(argnums=(0, 1))"}
    assert "argnums" in forward.attributes["jax.compile.hint"]


def test_vmap_axes_are_named_in_the_transformation(telemetry):
    @jax.jit
    def scale(a, b):
        return a * b

    xs = jnp.ones((3, 3))
    jax.vmap(scale, in_axes=(0, None))(xs, xs[0])
    jax.vmap(scale, in_axes=(1, None))(xs, xs[0])
    spans = telemetry.compiles("test_vmap_axes_are_named_in_the_transformation.<locals>.scale")
    assert len(spans) == 2
    assert only_change(spans[1]) == {"path": "<transformation>", "kind": "transform_params",
                                     "before": "vmap(in_axes=(0, None))",
                                     "after": "vmap(in_axes=(1, None))"}


def test_equal_signatures_name_a_cache_clear_only_when_one_was_seen(telemetry):
    @jax.jit
    def add_one(x):
        return x + 1

    add_one(jnp.ones(3))
    add_one.clear_cache()  # not watched: no evidence of what happened
    add_one(jnp.ones(3))
    jax.clear_caches()
    add_one(jnp.ones(3))
    spans = telemetry.compiles(
        "test_equal_signatures_name_a_cache_clear_only_when_one_was_seen.<locals>.add_one")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "unknown", "unknown"]
    not_found, cleared = (s.attributes["jax.compile.cause"] for s in spans[1:])
    assert not_found.endswith("the difference was not found (no jax.clear_caches() call "
                              "was seen)")
    assert "evict" not in not_found and "likely" not in not_found
    assert cleared.endswith("jax.clear_caches() was called once since, which dropped the "
                            "compiled program")
    assert "clear caches only where" in spans[2].attributes["jax.compile.hint"]


def test_a_jitted_function_re_created_under_grad_is_a_new_function(telemetry):
    def make():
        def fn(p, x):
            return p * x
        return jax.grad(jax.jit(fn))

    p, x = jnp.array(0.0), jnp.array(1.0)
    make()(p, x)  # the forward and backward programs of the first fn: #1, #2
    make()(p, x)  # the same, traced again for a new fn: JAX compiles both again: #3, #4
    jax.clear_caches()
    make()(p, x)  # after a clear: #5, #6
    spans = telemetry.compiles(
        "test_a_jitted_function_re_created_under_grad_is_a_new_function.<locals>.make"
        ".<locals>.fn")
    by_count = {s.attributes["jax.compile.count"]: s.attributes for s in spans}
    assert sorted(by_count) == [1, 2, 3, 4, 5, 6]
    # the new function's first program is named as what it is (JAX: "never seen function")
    assert by_count[3]["jax.compile.cause.kind"] == "function_identity"
    assert "new function object" in by_count[3]["jax.compile.cause"]
    # the backward program of one function is never called a new function, nor is a
    # compile after a clear; and no eviction is claimed without one
    for count in (2, 5, 6):
        assert "new function object" not in by_count[count]["jax.compile.cause"]
    assert "clear_caches" in by_count[5]["jax.compile.cause"]
    assert not any("evict" in a["jax.compile.cause"] or "likely" in a["jax.compile.cause"]
                   for a in by_count.values())
