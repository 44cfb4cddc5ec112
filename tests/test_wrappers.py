"""Wrapper libraries that jit a function of their own around the user's: equinox.filter_jit.

Every cause is named by the user's own argument paths, not by the wrapper's
``dynamic_nodonate['rest'][3]`` and ``static`` tuples.
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from conftest import diff_of


def only_change(span) -> dict:
    changes = diff_of(span)
    assert len(changes) == 1, changes
    return changes[0]


@eqx.filter_jit
def step(params, batch, n, *, scale=1.0):
    return params["w"].sum() * batch[0] * n * scale


class Net(eqx.Module):
    w: jax.Array
    activation: str = eqx.field(static=True)

    def __call__(self, x):
        y = x @ self.w
        return jnp.tanh(y) if self.activation == "tanh" else y


@eqx.filter_jit
def forward(net, x):
    return net(x)


def test_filter_jit_causes_use_the_users_argument_paths(telemetry):
    params = {"w": jnp.ones(2), "b": 3}
    step(params, (jnp.ones(2), jnp.ones(2)), 2, scale=jnp.float32(2))
    step(params, (jnp.ones(3), jnp.ones(2)), 2, scale=jnp.float32(2))  # partial batch
    step(params, (jnp.ones(3), jnp.ones(2)), 3, scale=jnp.float32(2))  # a static value
    step(params, (jnp.ones(3), jnp.ones(2)), 3, scale=2.0)  # traced -> static
    step({**params, "c": jnp.ones(1)}, (jnp.ones(3), jnp.ones(2)), 3, scale=2.0)
    spans = telemetry.compiles("step")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3, 4, 5]
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    assert all(not s.attributes["jax.compile.eager_op"] for s in spans)
    assert only_change(spans[1]) == {"path": "batch[0]", "kind": "shape",
                                     "before": "f32[2]", "after": "f32[3]"}
    assert only_change(spans[2]) == {"path": "n", "kind": "static_argument",
                                     "before": "2", "after": "3"}
    assert only_change(spans[3]) == {"path": "scale", "kind": "static_argument",
                                     "before": "f32[] (traced)", "after": "2.0 (static)"}
    assert only_change(spans[4]) == {"path": "params['c']", "kind": "pytree_structure",
                                     "before": "<absent>", "after": "f32[1]"}


def test_filter_jit_module_static_field_and_structure(telemetry):
    forward(Net(jnp.ones((3, 2)), "tanh"), jnp.ones((4, 3)))
    forward(Net(jnp.ones((3, 2)), "relu"), jnp.ones((4, 3)))
    forward(Net(jnp.ones((3, 2)), "relu"), jnp.ones((4, 3)))  # equal static field: cached
    spans = telemetry.compiles("forward")
    assert len(spans) == 2
    assert only_change(spans[1]) == {"path": "net.activation", "kind": "pytree_structure",
                                     "before": "static 'tanh'", "after": "static 'relu'"}


def test_filter_jit_signature_in_compile_history(telemetry):
    import otel_jax

    step({"w": jnp.ones(2), "b": 3}, (jnp.ones(2), jnp.ones(2)), 4)
    entry = otel_jax.compile_history(step)[-1]
    assert entry.signature["arguments"]["batch[1]"]["type"] == "f32[2]"
    assert entry.signature["static_arguments"]["n"] == "4"
    assert entry.signature["static_arguments"]["params['b']"] == "3"


def test_another_librarys_closure_over_a_user_callback_keeps_the_librarys_name(
        telemetry, library_module):
    # A stand-in for optax: an update function closing over a user's schedule.
    fake_optim = library_module("fake_optim", (
        "def sgd(schedule):\n"
        "    def update_fn(grads, count):\n"
        "        return grads * schedule(count)\n"
        "    return update_fn\n"))

    def my_schedule(count):
        return 0.1 / (1 + count)

    update = jax.jit(fake_optim.sgd(my_schedule))
    update(jnp.ones(3), 1)
    names = [s.attributes["code.function.name"] for s in telemetry.compiles()]
    assert names == ["sgd.<locals>.update_fn"]  # not the schedule it merely calls


def test_jax_own_wrapper_around_a_users_function_is_named_after_it(telemetry):
    def multiply(a, b):
        return a * b

    vectorized = jax.jit(jnp.vectorize(multiply))
    vectorized(jnp.ones(3), jnp.ones(3))
    vectorized(jnp.ones(4), jnp.ones(4))
    spans = telemetry.compiles(
        "test_jax_own_wrapper_around_a_users_function_is_named_after_it.<locals>.multiply")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                        "shape"]
    assert not spans[0].attributes["jax.compile.eager_op"]


def test_filter_jit_of_a_callable_module_names_its_call_parameters(telemetry):
    net = eqx.filter_jit(Net(jnp.ones((3, 2)), "tanh"))
    net(jnp.ones((4, 3)))
    net(jnp.ones((5, 3)))
    span = telemetry.compiles()[-1]
    assert only_change(span) == {"path": "x", "kind": "shape",
                                 "before": "f32[4,3]", "after": "f32[5,3]"}


def test_filter_jit_names_a_field_a_namedtuple_gained(telemetry):
    from typing import NamedTuple

    @eqx.filter_jit
    def total(batch, n):
        return batch.x.sum() * n

    old, new = (NamedTuple("Batch", [(f, jax.Array) for f in fields])  # one name, two versions
                for fields in (("x", "y"), ("x", "y", "mask")))
    total(old(jnp.ones(2), jnp.ones(2)), 2)
    total(new(jnp.ones(2), jnp.ones(2), jnp.ones(2)), 2)
    span = telemetry.last(
        "test_filter_jit_names_a_field_a_namedtuple_gained.<locals>.total")
    assert {"path": "batch.mask", "kind": "pytree_structure", "before": "<absent>",
            "after": "f32[2]"} in diff_of(span)
    assert "leaves" not in span.attributes["jax.compile.cause"]


# --- one function, one name: what a wrapper library was given names the compile -----------

class Linear(eqx.Module):
    w: jax.Array

    def __call__(self, x):
        return x @ self.w

    def project(self, x):
        return (x @ self.w).sum()


class Scale(eqx.Module):
    w: jax.Array

    def __call__(self, x):
        return x * self.w


def _sites(spans) -> list[tuple[str, str, int, str]]:
    return [(s.attributes["code.function.name"], s.attributes.get("code.file.path"),
             s.attributes.get("code.line.number"), s.attributes["jax.compile.cause.kind"])
            for s in spans]


def _line(obj) -> int:
    import inspect

    return inspect.getsourcelines(obj)[1]


def test_filter_jit_of_module_instances_and_bound_methods_names_each_callable(telemetry):
    eqx.filter_jit(Linear(jnp.ones((3, 2))))(jnp.ones(3))
    eqx.filter_jit(Scale(jnp.ones(3)))(jnp.ones(3))
    eqx.filter_jit(Linear(jnp.ones((3, 2))).project)(jnp.ones(3))
    assert _sites(telemetry.compiles()) == [
        ("Linear.__call__", __file__, _line(Linear.__call__), "first_compile"),
        ("Scale.__call__", __file__, _line(Scale.__call__), "first_compile"),
        ("Linear.project", __file__, _line(Linear.project), "first_compile")]


def test_filter_jit_of_wrapped_callables_names_the_users_function(telemetry):
    def total(x):
        return x.sum()

    @eqx.filter_custom_vjp
    def clipped(vjp_arg, x):
        return vjp_arg * x

    @clipped.def_fwd
    def clipped_fwd(perturbed, vjp_arg, x):
        return vjp_arg * x, None

    @clipped.def_bwd
    def clipped_bwd(residuals, g, perturbed, vjp_arg, x):
        return g * x

    eqx.filter_jit(eqx.filter_jit(total))(jnp.ones(3))
    eqx.filter_jit(clipped)(jnp.ones(3), jnp.ones(3))
    prefix = "test_filter_jit_of_wrapped_callables_names_the_users_function.<locals>."
    assert _sites(telemetry.compiles()) == [
        (prefix + "total", __file__, _line(total), "first_compile"),
        (prefix + "clipped", __file__, _line(clipped.fn), "first_compile")]


def test_a_librarys_module_takes_jaxs_name_at_the_librarys_site(telemetry):
    key = jax.random.key(0)
    eqx.filter_jit(eqx.nn.Linear(3, 2, key=key))(jnp.ones(3))
    eqx.filter_jit(eqx.nn.MLP(3, 2, 4, 2, key=key))(jnp.ones(3))
    spans = telemetry.compiles()
    names = [(name, kind) for name, _, _, kind in _sites(spans)]
    assert names == [("Linear", "first_compile"), ("MLP", "first_compile")]
    files = {s.attributes["code.file.path"] for s in spans}
    assert len(files) == 2 and all(f"{os.sep}equinox{os.sep}nn{os.sep}" in f for f in files)


def test_filter_pmap_names_each_users_function(telemetry):
    def first(x):
        return x.sum()

    def second(x):
        return (x * 2).sum()

    n = jax.local_device_count()
    eqx.filter_pmap(first)(jnp.ones((n, 3)))
    eqx.filter_pmap(second)(jnp.ones((n, 3)))
    prefix = "test_filter_pmap_names_each_users_function.<locals>."
    assert _sites(telemetry.compiles()) == [
        (prefix + "first", __file__, _line(first), "first_compile"),
        (prefix + "second", __file__, _line(second), "first_compile")]


def test_many_functions_jax_names_alike_are_no_storm(telemetry):
    import warnings

    import otel_jax

    # Three classes of one name, each its own function: JAX names each jit(Model).
    class Model(eqx.Module):
        def __call__(self, x):
            return x + 1

    functions = [Model()]

    class Model(eqx.Module):  # type: ignore[no-redef]
        def __call__(self, x):
            return x + 2

    functions.append(Model())

    class Model(eqx.Module):  # type: ignore[no-redef]
        def __call__(self, x):
            return x + 3

    functions.append(Model())
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     storm_threshold=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in functions:
            eqx.filter_jit(fn)(jnp.ones(3))
        otel_jax.flush()
    spans = telemetry.compiles()
    assert [s.attributes["jax.compile.count"] for s in spans] == [1] * 3
    assert len({s.attributes["code.line.number"] for s in spans}) == 3
    assert not [w for w in caught if "storm" in str(w.message)]
    assert not [line for line in telemetry.log_lines()
                if line["event"] == "jax.recompile_storm"]


def test_a_changed_wrapper_is_named(telemetry):
    def loss(x):
        return (x ** 2).sum()

    eqx.filter_jit(eqx.filter_grad(loss))(jnp.ones(3))
    eqx.filter_jit(eqx.filter_value_and_grad(loss))(jnp.ones(3))
    span = telemetry.last("test_a_changed_wrapper_is_named.<locals>.loss")
    assert {"path": "<function>", "kind": "static_argument",
            "before": "'filter_grad(test_a_changed_wrapper_is_named.<locals>.loss)'",
            "after": "'filter_value_and_grad(test_a_changed_wrapper_is_named.<locals>.loss)'",
            } in diff_of(span)
    assert "False -> <absent>" not in span.attributes["jax.compile.cause"]


def test_haiku_transform_is_named_after_the_users_function(telemetry):
    try:
        import haiku as hk
    except Exception as exc:  # not installed, or not importable beside this JAX
        pytest.skip(f"haiku: {exc!r}")

    def forward(x):
        return hk.Linear(2)(x)

    def other(x):
        return hk.Linear(3)(x)

    for fn in (forward, other):
        model = hk.transform(fn)
        params = model.init(jax.random.key(0), jnp.ones(3))
        jax.jit(model.apply)(params, None, jnp.ones(3))
    prefix = "test_haiku_transform_is_named_after_the_users_function.<locals>."
    spans = [s for s in telemetry.compiles()
             if s.attributes["code.function.name"].startswith(prefix)]
    assert [(s.attributes["code.function.name"], s.attributes["jax.compile.cause.kind"])
            for s in spans] == [(prefix + "forward", "first_compile"),
                                (prefix + "other", "first_compile")]


def _keras():
    import sys

    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "jax":
        pytest.skip("keras runs on another backend in this process")
    return keras


def test_keras_layers_are_named_by_their_own_class(telemetry):
    keras = _keras()

    class Double(keras.layers.Layer):
        def call(self, x):
            return x * 2

    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    for layer in (dense, Double(), keras.layers.ReLU()):
        jax.jit(layer)(jnp.ones((1, 3)))
    sites = _sites(telemetry.compiles())
    assert [(name, kind) for name, _, _, kind in sites] == [
        ("Dense.__call__", "first_compile"),
        ("test_keras_layers_are_named_by_their_own_class.<locals>.Double.__call__",
         "first_compile"),
        ("ReLU.__call__", "first_compile")]
    assert sites[1][1:3] == (__file__, _line(Double))
    assert sites[0][1].endswith("dense.py") and sites[2][1].endswith("relu.py")


def test_partials_callable_objects_and_linen_apply_keep_their_own_names(telemetry):
    import functools

    nn = pytest.importorskip("flax.linen")

    def scaled(a, x):
        return a * x

    def shifted(a, x):
        return a + x

    class Twice:
        def __call__(self, x):
            return 2 * x

    class Thrice:
        def __call__(self, x):
            return 3 * x

    class Small(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    class Big(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4)(x)

    x = jnp.ones(3)
    for fn in (functools.partial(scaled, 2.0), functools.partial(shifted, 1.0),
               Twice(), Thrice()):
        jax.jit(fn)(x)
    for module in (Small(), Big()):
        params = module.init(jax.random.key(0), x)
        jax.jit(module.apply)(params, x)
    prefix = "test_partials_callable_objects_and_linen_apply_keep_their_own_names.<locals>."
    spans = [s for s in telemetry.compiles()
             if s.attributes["code.function.name"].startswith(prefix)]
    assert [(s.attributes["code.function.name"][len(prefix):],
             s.attributes["jax.compile.cause.kind"]) for s in spans] == [
        ("scaled", "first_compile"), ("shifted", "first_compile"),
        ("Twice.__call__", "first_compile"), ("Thrice.__call__", "first_compile"),
        ("Small.apply", "first_compile"), ("Big.apply", "first_compile")]


def test_a_librarys_function_given_the_users_as_a_static_is_not_the_users_own_jit(
        telemetry, library_module):
    helpers = library_module("fake_helpers", (
        "def apply_twice(fn, x):\n"
        "    return fn(fn(x))\n"))

    def halve(x):
        return x / 2

    jax.jit(halve)(jnp.ones(3))
    jax.jit(helpers.apply_twice, static_argnums=0)(halve, jnp.ones(3))
    name = ("test_a_librarys_function_given_the_users_as_a_static_is_not_the_users_own_"
            "jit.<locals>.halve")
    assert [(n, kind) for n, _, _, kind in _sites(telemetry.compiles())] == [
        (name, "first_compile"), (f"apply_twice({name})", "first_compile")]


def test_a_librarys_wrapper_that_could_not_take_the_users_name_is_filed_apart(
        telemetry, library_module):
    import functools

    # A stand-in for chex's fake_pmap: functools.wraps of a partial copies no name, so
    # JAX names the compile jit(wrapped_fn).
    mapper = library_module("fake_mapper", (
        "import functools\n"
        "def doubled(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def wrapped_fn(*args):\n"
        "        return fn(*args) * 2\n"
        "    return wrapped_fn\n"))

    def foo(x, flag):
        return x + 1 if flag else x

    jax.jit(functools.partial(foo, flag=True))(jnp.ones(3))
    jax.jit(mapper.doubled(functools.partial(foo, flag=False)))(jnp.ones(3))
    jax.jit(mapper.doubled(foo), static_argnums=1)(jnp.ones(3), True)  # took foo's name
    name = ("test_a_librarys_wrapper_that_could_not_take_the_users_name_is_filed_apart."
            "<locals>.foo")
    assert [(n, kind) for n, _, _, kind in _sites(telemetry.compiles())] == [
        (name, "first_compile"), (f"wrapped_fn({name})", "first_compile"),
        (name, "function_identity")]


def _no_false_cause(spans) -> None:
    """Each function's compiles are numbered from 1 and compared only among themselves."""
    by_key: dict[tuple, list[int]] = {}
    for s in spans:
        key = (s.attributes["code.function.name"], s.attributes.get("code.file.path"),
               s.attributes.get("code.line.number"))
        by_key.setdefault(key, []).append(s.attributes["jax.compile.count"])
    assert all(counts == list(range(1, len(counts) + 1)) for counts in by_key.values()), by_key


def test_filter_jit_under_a_transformation_names_the_users_function(telemetry):
    # equinox's own suite: filter_jvp / filter_vmap / filter_grad of a filter_jit-ed
    # function: only the transformed program reaches the miss, equinox's one
    # ``fun_wrapped`` at its own file for every function
    @eqx.filter_jit
    def shift(x):
        return x + 1

    @eqx.filter_jit
    def mix(x, y):
        return x * 2 + y

    def square(x):
        return (x ** 2).sum()

    eqx.filter_jvp(shift, (1.0,), (1.0,))
    eqx.filter_jvp(mix, (jnp.array(1.0), jnp.array(2.0)), (jnp.array(1.0), jnp.array(1.0)))
    eqx.filter_vmap(shift)(jnp.ones((3, 2)))
    eqx.filter_grad(eqx.filter_jit(square))(jnp.ones(3))
    spans = telemetry.compiles()
    prefix = "test_filter_jit_under_a_transformation_names_the_users_function.<locals>."
    sites = {(name, file, line) for name, file, line, _ in _sites(spans)}
    assert sites == {(prefix + "shift", __file__, _line(shift.__wrapped__)),
                     (prefix + "mix", __file__, _line(mix.__wrapped__)),
                     (prefix + "square", __file__, _line(square))}
    assert len(spans) == 5  # grad: a forward and a backward program of square
    _no_false_cause(spans)
    assert not [s for s in spans if s.attributes["jax.compile.cause.kind"] not in (
        "first_compile", "transform_params", "function_identity")]
    # grad's backward program is filed with its forward one, as under jax.grad(jax.jit(f))
    backward = [s for s in spans if s.attributes["code.function.name"] == prefix + "square"]
    assert [s.attributes["jax.compile.count"] for s in backward] == [1, 2]


def test_filter_jit_of_a_librarys_function_is_filed_per_users_function(telemetry):
    # ``filter_jit(filter_jvp)(f, ...)``: equinox's function given the user's: one program
    # per user function, never one function compared with another's compile
    def shift(x):
        return x + 1

    def mix(*x):
        return x[0] * 2 + x[1]

    after = eqx.filter_jit(eqx.filter_jvp)
    after(shift, (1.0,), (1.0,))
    after(mix, (jnp.array(1.0), jnp.array(2.0)), (jnp.array(1.0), jnp.array(1.0)))
    prefix = "test_filter_jit_of_a_librarys_function_is_filed_per_users_function.<locals>."
    assert _sites(telemetry.compiles()) == [
        (f"filter_jvp({prefix}shift)", __file__, _line(shift), "first_compile"),
        (f"filter_jvp({prefix}mix)", __file__, _line(mix), "first_compile")]


def test_filter_pmap_programs_are_the_users_at_the_default_level(telemetry):
    # as equinox's suite calls it: devices given, in_axes, axis_size, wrapped callables
    import functools

    pmap = functools.partial(eqx.filter_pmap, devices=jax.devices()[:1])

    def f(x):
        return x + 1

    @pmap(in_axes=None, axis_size=1)
    def g(x, y):
        return x + y

    pmap(f)(jnp.array([1.0]))
    g(jnp.array(1), 2)
    pmap(eqx.filter_vmap(f))(jnp.array([[1.0, 2.0]]))
    spans = telemetry.compiles(eager=True)
    users = [s for s in spans if s.attributes.get("code.file.path") == __file__]
    assert len(users) == 3
    assert not [s for s in users if s.attributes["jax.compile.eager_op"]]
    assert not [s for s in spans if "_filter_pmap_cache" in s.attributes["code.function.name"]]
    prefix = "test_filter_pmap_programs_are_the_users_at_the_default_level.<locals>."
    logged = [line for line in telemetry.log_lines() if line["event"] == "jax.compile"]
    assert {line["function"] for line in logged} >= {prefix + "f", prefix + "g"}


def test_jax_jit_of_a_librarys_callable_wrapping_the_users_names_the_users(telemetry):
    # equinox's test_grad_jit_*: ``jax.jit(f)`` of a filter_custom_vjp, one per test:
    # each the user's own function, never the library class's one ``__call__``
    @eqx.filter_custom_vjp
    def f(x):
        return x

    f.def_fwd(lambda perturbed, x: (x, None))
    f.def_bwd(lambda residuals, g, perturbed, x: g + 2)

    @eqx.filter_custom_vjp
    def g(x):
        return x * 2

    g.def_fwd(lambda perturbed, x: (x * 2, None))
    g.def_bwd(lambda residuals, grad, perturbed, x: grad * 2)

    jax.jit(f)(jnp.array(1.0))
    jax.jit(g)(jnp.array(1.0))
    assert eqx.filter_grad(jax.jit(f))(jnp.array(1.0)) == 3  # forward and backward
    spans = telemetry.compiles()
    prefix = "test_jax_jit_of_a_librarys_callable_wrapping_the_users_names_the_users.<locals>."
    assert _sites(spans[:2]) == [(prefix + "f", __file__, _line(f.fn), "first_compile"),
                                 (prefix + "g", __file__, _line(g.fn), "first_compile")]
    # grad's programs, the backward one with no debug source of its own: f's, not
    # "<unnamed function>"
    assert {s.attributes["code.function.name"] for s in spans[2:]} == {prefix + "f"}
    _no_false_cause(spans)
