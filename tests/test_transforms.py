"""Compiles that do not come from a plain jit call: a jitted function under grad or vmap
outside jit, and pmap (a jit of JAX's own around the user's function)."""

from __future__ import annotations

import os
import traceback

import jax
import jax.numpy as jnp
import pytest
from conftest import diff_of

import otel_jax


def causes(spans) -> list[str]:
    return [s.attributes["jax.compile.cause.kind"] for s in spans]


def test_grad_of_a_jitted_function_outside_jit_explains_its_recompile(telemetry):
    @jax.jit
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = jnp.ones((3, 2))
    loss(w, jnp.ones((8, 3)))  # a plain call first: the transformed programs are new
    grad = jax.grad(loss)
    grad(w, jnp.ones((8, 3)))
    grad(w, jnp.ones((8, 3)))  # cached: no compile
    grad(w, jnp.ones((5, 3)))  # the last partial batch

    name = "test_grad_of_a_jitted_function_outside_jit_explains_its_recompile.<locals>.loss"
    spans = telemetry.compiles(name)
    # The plain call, then grad's forward and backward programs, for each batch size.
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3, 4, 5]
    kinds = causes(spans)
    assert kinds[:3] == ["first_compile", "function_identity", "function_identity"]
    assert diff_of(spans[1]) == [{
        "path": "<transformation>", "kind": "function_identity", "before": "called directly",
        "after": "grad(argnums=0)"}]
    assert "another transformed program" in spans[2].attributes["jax.compile.cause"]
    assert "grad's forward and backward passes" in spans[2].attributes["jax.compile.cause"]
    assert "jax.jit(jax.grad(f))" in spans[1].attributes["jax.compile.hint"]
    # The new batch size is named, with before and after, in both programs.
    assert kinds[3:] == ["shape", "shape"]
    for span in spans[3:]:
        change = next(c for c in diff_of(span) if c["before"] == "f32[8,3]")
        assert change["kind"] == "shape" and change["after"] == "f32[5,3]"
        assert change["path"].startswith("args[")
    assert all(not s.attributes["jax.compile.eager_op"] for s in spans)
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    assert all(s.attributes["jax.compile.callsite"].startswith(__file__ + ":") for s in spans)


def test_grad_programs_with_as_many_inputs_and_outputs_are_two_programs(telemetry):
    @jax.jit
    def shift(x):
        return x + 1

    jax.grad(shift)(1.0)  # forward and backward: one input and one output each
    spans = telemetry.compiles(
        "test_grad_programs_with_as_many_inputs_and_outputs_are_two_programs.<locals>.shift")
    assert causes(spans) == ["first_compile", "function_identity"]
    change = diff_of(spans[1])[0]
    assert change["path"] == "<transformation>"
    assert change["after"].startswith("another transformed program")


def _run_under_grad(n):
    """A test body run once per parameter, as pytest runs a parametrised test: the jitted
    functions are defined anew in each run, closing over the parameter."""
    @jax.jit
    def power_sum(x):
        return (x ** n).sum()  # the program itself differs with n

    @jax.jit
    def scaled(x):
        return (x ** 2).sum() * n  # one program for every n

    return power_sum, scaled


def _run_called_first(n):
    """As ``_run_under_grad``, for a test that calls the function before its gradient."""
    @jax.jit
    def power_sum(x):
        return (x ** n).sum()

    @jax.jit
    def scaled(x):
        return (x ** 2).sum() * n

    return power_sum, scaled


@pytest.mark.parametrize("direct", [False, True], ids=["grad", "direct-then-grad"])
def test_a_jitted_function_re_defined_per_parametrisation_under_grad(telemetry, direct):
    """Each run's function is a new object for the same source (JAX: "never seen function
    ... but seen another function defined on the same line"): its forward and backward
    programs are each compared with the earlier run's program of the same pass, and the
    closure value that changed is named; never "another transformed program" of one
    function, never another cause."""
    run_body = _run_called_first if direct else _run_under_grad
    x = jnp.ones(3)
    for n in (1, 2, 3):
        for f in run_body(n):
            if direct:
                f(x)
            jax.grad(f)(x)
    per_run = 3 if direct else 2  # [the plain call,] grad's forward and backward programs
    for name in ("power_sum", "scaled"):
        spans = telemetry.compiles(f"{run_body.__name__}.<locals>.{name}")
        texts = [s.attributes["jax.compile.cause"] for s in spans]
        assert len(spans) == 3 * per_run, texts
        for run, n in ((1, 2), (2, 3)):
            for i, span in enumerate(spans[run * per_run:(run + 1) * per_run]):
                assert span.attributes["jax.compile.cause.kind"] == "function_identity", texts
                changes = diff_of(span)
                assert changes[0]["path"] == "<function>", texts
                assert changes[0]["after"].startswith("new function object, same source")
                assert {"path": "<function>.n", "kind": "function_identity",
                        "before": str(n - 1), "after": str(n)} in changes, texts
                assert "another transformed program" not in span.attributes[
                    "jax.compile.cause"]
                # the same pass of the previous run: forward with forward, backward with
                # backward (the plain call with the plain call)
                compared = span.attributes["jax.compile.compared_with"]
                assert compared == span.attributes["jax.compile.count"] - per_run, (
                    name, run, i, texts)


def test_grad_passes_of_one_function_are_compared_pass_with_pass(telemetry):
    """grad's forward and backward programs of ``x @ y`` have as many inputs, outputs and
    operations: the backward program of a new length is compared with the earlier
    backward program, never with the forward one compiled just before it (whose second
    input, ``y``, is no cotangent)."""
    @jax.jit
    def inner(x, y):
        return x @ y

    grad = jax.grad(inner)
    grad(jnp.ones(3), jnp.ones(3))
    grad(jnp.ones(5), jnp.ones(5))
    spans = telemetry.compiles(
        "test_grad_passes_of_one_function_are_compared_pass_with_pass.<locals>.inner")
    assert len(spans) == 4
    # The first backward program is another program, not a recompile of the forward one
    # under another tracing context or with another second argument.
    assert diff_of(spans[1]) == [{
        "path": "<transformation>", "kind": "function_identity",
        "before": "transformed program (forward pass; 2 inputs, 1 output, 1 operation)",
        "after": "another transformed program of the same function (backward pass; "
                 "2 inputs, 1 output, 1 operation): grad's forward and backward passes "
                 "are programs of their own"}]
    assert [s.attributes["jax.compile.compared_with"] for s in spans[2:]] == [1, 2]
    for span in spans[2:]:
        assert span.attributes["jax.compile.cause.kind"] == "shape"
        assert {(c["before"], c["after"]) for c in diff_of(span)} == {("f32[3]", "f32[5]")}


def test_vmap_of_a_jitted_function_outside_jit_is_captured(telemetry):
    @jax.jit
    def affine(x, b):
        return 2.0 * x + b

    batched = jax.vmap(affine, in_axes=(0, None))
    batched(jnp.ones((4, 3)), 1.0)
    batched(jnp.ones((4, 5)), 1.0)
    # Never called directly: named after the jitted function that vmap was running.
    spans = telemetry.compiles(
        "test_vmap_of_a_jitted_function_outside_jit_is_captured.<locals>.affine")
    assert causes(spans) == ["first_compile", "shape"]
    change = diff_of(spans[1])[0]
    assert (change["kind"], change["before"], change["after"]) == ("shape", "f32[4,3]",
                                                                  "f32[4,5]")
    assert change["path"] in ("x", "args[0]")
    assert "not captured" not in spans[1].attributes["jax.compile.cause"]
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    assert not any(s.attributes["jax.compile.eager_op"] for s in spans)


def _checked(check_positive):
    def checked_log(x):  # re-created per call: one definition, new function objects
        check_positive(x)
        return jnp.log(x)

    return checked_log


def test_a_function_re_created_under_a_transformation_otel_jax_does_not_know(telemetry):
    """checkify traces the jitted function inside its own trace and evaluates the
    program after, with no transformation closure of JAX's on the stack: the function
    re-created each call is still named as JAX's explainer does (another function
    defined on the same line), never ``unknown``."""
    from jax.experimental import checkify

    def check_positive(x):
        checkify.check(jnp.all(x > 0), "not positive")

    x = jnp.ones(3)
    for _ in range(3):
        error, out = checkify.checkify(jax.jit(_checked(check_positive)))(x)
        error.throw()
    kept = jax.jit(_checked(check_positive))
    for _ in range(2):
        checkify.checkify(kept)(x)[0].throw()
    checkify.checkify(kept)(jnp.ones(4))[0].throw()

    spans = telemetry.compiles("_checked.<locals>.checked_log")
    kinds = causes(spans)
    # One compile per new function object and one for the new shape; the same object
    # with the same types is served from JAX's caches.
    assert kinds == ["first_compile"] + ["function_identity"] * 3 + ["shape"], [
        s.attributes["jax.compile.cause"] for s in spans]
    for span in spans[1:4]:
        assert diff_of(span) == [{
            "path": "<function>", "kind": "function_identity",
            "before": "earlier function object",
            "after": "new function object, same source, under the same transformation"}]
    change = diff_of(spans[4])[0]
    assert (change["before"], change["after"]) == ("f32[3]", "f32[4]")


def test_jax_own_functions_under_grad_stay_eager_ops(telemetry):
    grad = jax.grad(lambda x: jnp.sum(x))  # jnp.sum is a jitted function inside JAX
    grad(jnp.ones(3))
    grad(jnp.ones(4))
    eager = telemetry.compiles("_reduce_sum", eager=True)
    assert eager and all(s.attributes["jax.compile.eager_op"] for s in eager)
    assert "shape" in causes(eager)
    assert telemetry.compiles("_reduce_sum") == []  # not counted as the user's compiles


def test_pmap_is_named_after_the_users_function(telemetry):
    def double(batch):
        return {"y": batch["x"] * 2}

    pmapped = jax.pmap(double)
    n = jax.local_device_count()
    pmapped({"x": jnp.ones((n, 2))})
    pmapped({"x": jnp.ones((n, 3))})
    pmapped({"x": jnp.ones((n, 3)), "extra": jnp.ones((n, 1))})
    name = "test_pmap_is_named_after_the_users_function.<locals>.double"
    spans = telemetry.compiles(name)
    assert causes(spans) == ["first_compile", "shape", "pytree_structure"]
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    shape = diff_of(spans[1])[0]
    assert (shape["kind"], shape["before"], shape["after"]) == ("shape", f"f32[{n},2]",
                                                               f"f32[{n},3]")
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    assert all(not s.attributes["jax.compile.eager_op"] for s in spans)


def test_pmap_causes_name_the_users_parameters(telemetry):
    def step(n, batch, *extra, scale=None):
        out = batch["x"] * n + sum(extra)
        return out if scale is None else out * scale

    pmapped = jax.pmap(step, static_broadcasted_argnums=(0,))
    d = jax.local_device_count()

    def call(n, width, extra_shape=(d,), scale=True, mask=False):
        batch = {"x": jnp.ones((d, width))}
        if mask:
            batch["mask"] = jnp.ones((d,))
        pmapped(n, batch, jnp.ones(extra_shape), scale=jnp.ones(d) if scale else None)

    call(2, 2)
    call(2, 3)  # a leaf of a dict argument
    call(3, 3)  # the static argument
    call(3, 3, extra_shape=(d, 3))  # a *args entry
    call(3, 3, extra_shape=(d, 3), scale=False)  # a keyword argument becomes None
    call(3, 3, extra_shape=(d, 3), scale=False, mask=True)  # the dict gains a key
    spans = telemetry.compiles("test_pmap_causes_name_the_users_parameters.<locals>.step")
    assert [diff_of(s) for s in spans[1:]] == [
        [{"path": "batch['x']", "kind": "shape", "before": f"f32[{d},2]",
          "after": f"f32[{d},3]"}],
        [{"path": "n", "kind": "static_argument", "before": "2", "after": "3"}],
        [{"path": "extra[0]", "kind": "shape", "before": f"f32[{d}]", "after": f"f32[{d},3]"}],
        [{"path": "scale", "kind": "pytree_structure", "before": f"f32[{d}]",
          "after": "None"}],
        [{"path": "batch['mask']", "kind": "pytree_structure", "before": "<absent>",
          "after": f"f32[{d}]"}],
    ]
    assert "every distinct value" in spans[2].attributes["jax.compile.hint"]
    assert "pad or bucket" in spans[1].attributes["jax.compile.hint"]
    assert "flat_args" not in str([s.attributes["jax.compile.cause"] for s in spans])


def test_errors_in_a_users_function_show_no_otel_jax_frame(telemetry):
    @jax.jit
    def broken(x):
        return x @ jnp.ones((5, 5))

    with pytest.raises(TypeError) as info:
        broken(jnp.ones(3))
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    assert any(f == __file__ for f in files)
    package = os.path.dirname(otel_jax.__file__) + os.sep
    assert not any(f.startswith(package) for f in files), files


def test_uninstall_restores_the_transformed_path(telemetry):
    from jax._src import pjit

    assert hasattr(pjit._pjit_call_impl_python, "__otel_jax_original__")
    otel_jax.uninstall()
    assert not hasattr(pjit._pjit_call_impl_python, "__otel_jax_original__")


def test_compile_budget_counts_a_functions_transformed_programs(telemetry):
    from otel_jax.testing import assert_max_compiles

    @jax.jit
    def energy(x):
        return jnp.sum(x ** 2)

    force = jax.grad(energy)  # energy is never called directly
    with assert_max_compiles(2, fn=energy) as budget:  # grad's forward and backward
        force(jnp.ones(3))
        force(jnp.ones(3))
    assert len(budget.records) == 2
    with pytest.raises(AssertionError, match="shape"):
        with assert_max_compiles(1, fn=energy):
            force(jnp.ones(4))


def test_eager_shard_map_ops_are_eager_not_the_users(telemetry):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("d",))
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # older JAX
        from jax.experimental.shard_map import shard_map

    def body(v):
        return v * 2

    run = shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    n = jax.device_count()
    run(jax.device_put(jnp.ones(2 * n), NamedSharding(mesh, P("d"))))  # outside jit: op by op
    assert telemetry.compiles(eager=True)  # it did compile: JAX's own ops, one by one
    assert telemetry.compiles() == []  # ... none of them counted as the user's


def test_qualified_name_is_read_from_the_source():
    from otel_jax._capture._source import qualname_at

    class Model:
        @staticmethod
        @jax.jit
        def loss(x):
            return x.sum()

    def outer():
        return lambda x: x

    for fun in (Model.loss.__wrapped__, outer, outer(),
                test_qualified_name_is_read_from_the_source):
        code = fun.__code__
        assert qualname_at(code.co_filename, code.co_firstlineno, fun.__name__) == \
            fun.__qualname__
    assert qualname_at("<no such file>", 1, "f") is None


def test_checkify_of_a_jitted_function_is_named_checkify(telemetry):
    from jax.experimental import checkify

    @jax.jit
    def safe_log(x):
        return jnp.log(x)

    safe_log(jnp.ones(3))
    checkify.checkify(safe_log)(jnp.ones(3))
    span = telemetry.last("test_checkify_of_a_jitted_function_is_named_checkify.<locals>."
                          "safe_log")
    assert diff_of(span) == [{"path": "<transformation>", "kind": "function_identity",
                              "before": "called directly", "after": "checkify()"}]
    hint = span.attributes["jax.compile.hint"]
    assert "jax.jit(checkify.checkify(f))" in hint
    assert "grad" not in hint and "vmap" not in hint
    assert "grad" not in span.attributes["jax.compile.cause"]


def test_a_re_created_jit_of_vmap_names_the_out_axes_that_changed(telemetry):
    def double(x):
        return x * 2

    x = jnp.ones((3, 4))
    jax.jit(jax.vmap(double))(x)
    jax.jit(jax.vmap(double, out_axes=1))(x)
    span = telemetry.last(
        "test_a_re_created_jit_of_vmap_names_the_out_axes_that_changed.<locals>.double")
    assert span.attributes["jax.compile.cause.kind"] == "transform_params"
    changes = diff_of(span)
    assert changes[0] == {"path": "<transformation>", "kind": "transform_params",
                          "before": "vmap(in_axes=0)",
                          "after": "vmap(in_axes=0, out_axes=1)"}
    assert changes[1]["path"] == "<function>"  # a new function object too
    assert "out_axes" in span.attributes["jax.compile.cause"]


def test_a_re_created_jit_that_calls_a_vmap_is_not_made_of_it(telemetry):
    def double(x):
        return x * 2

    def make(f):
        @jax.jit
        def step(x):  # calls the vmap it closes over: not a vmap itself
            return f(x) + 1

        return step

    x = jnp.ones((3, 3))
    make(jax.vmap(double, in_axes=0))(x)
    make(jax.vmap(double, in_axes=1))(x)
    span = telemetry.last(
        "test_a_re_created_jit_that_calls_a_vmap_is_not_made_of_it.<locals>.make.<locals>.step")
    assert span.attributes["jax.compile.cause.kind"] == "function_identity"
    assert "<transformation>" not in [c["path"] for c in diff_of(span)]


def test_vmap_in_axes_of_a_jitted_function_is_its_own_kind(telemetry):
    @jax.jit
    def double(x):
        return x * 2

    @jax.jit
    def triple(x):
        return x * 3

    # the vmapped dimensions of other sizes, and of equal ones
    for f, batched in ((double, jnp.ones((3, 4))), (triple, jnp.ones((3, 3)))):
        jax.vmap(f, in_axes=0)(batched)
        jax.vmap(f, in_axes=1)(batched)
        span = telemetry.last(
            f"test_vmap_in_axes_of_a_jitted_function_is_its_own_kind.<locals>.{f.__name__}")
        assert span.attributes["jax.compile.count"] == 2
        assert span.attributes["jax.compile.cause.kind"] == "transform_params"
        assert diff_of(span)[0] == {"path": "<transformation>", "kind": "transform_params",
                                    "before": "vmap(in_axes=0)", "after": "vmap(in_axes=1)"}
        assert "in_axes" in span.attributes["jax.compile.hint"]
