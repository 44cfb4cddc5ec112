"""The call site is the user's own line: the innermost frame outside installed libraries
(site-packages), the standard library and test runners, with the installed library's
frame kept as ``jax.compile.library_callsite``."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import unittest

import jax
import jax.numpy as jnp
import pytest


@pytest.fixture
def installed(tmp_path):
    """``make(name, source)``: a module installed in a site-packages directory."""
    where = tmp_path / "site-packages"
    where.mkdir()
    made = []

    def make(name: str, source: str):
        path = where / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        made.append(name)
        return module

    yield make


TRAINER = ("def fit(step, state, batches):\n"
           "    for batch in batches:\n"
           "        state = step(state, batch)  # the library's line\n"
           "    return state\n")


def line_of(marker: str) -> int:
    """The line of this file that holds ``marker`` (once)."""
    lines = [i for i, text in enumerate(inspect.getsource(sys.modules[__name__])
                                        .splitlines(), 1) if marker in text]
    assert len(lines) == 1, lines
    return lines[0]


def test_an_installed_library_calling_the_jitted_step_is_not_the_call_site(
        telemetry, installed):
    trainer = installed("tiny_trainer", TRAINER)

    @jax.jit
    def step(state, batch):
        return state + batch.sum()

    trainer.fit(step, jnp.zeros(()), [jnp.ones(2), jnp.ones(3)])  # user-fit-line
    spans = telemetry.compiles("test_an_installed_library_calling_the_jitted_step_is_not_"
                               "the_call_site.<locals>.step")
    assert len(spans) == 2
    user = f"{__file__}:{line_of('# user' + '-fit-line')}"
    library = f"{trainer.__file__}:3"
    assert [s.attributes["jax.compile.callsite"] for s in spans] == [user, user]
    assert [s.attributes["jax.compile.library_callsite"] for s in spans] == [library] * 2
    line = telemetry.log_lines()[-1]
    assert (line["callsite"], line["library_callsite"]) == (user, library)


def test_the_users_own_call_has_no_library_call_site(telemetry):
    @jax.jit
    def f(x):
        return x * 2

    f(jnp.ones(2))
    span = telemetry.compiles()[-1]
    assert span.attributes["jax.compile.callsite"].startswith(__file__ + ":")
    assert "jax.compile.library_callsite" not in span.attributes
    assert "library_callsite" not in telemetry.log_lines()[-1]


def test_absl_parameterized_test_reaches_the_users_line(telemetry, installed):
    from absl.testing import parameterized

    trainer = installed("tiny_trainer_absl", TRAINER)

    @jax.jit
    def step(state, batch):
        return state + batch.sum()

    class Case(parameterized.TestCase):
        @parameterized.parameters(2, 3)
        def test_fit(self, n):
            trainer.fit(step, jnp.zeros(()), [jnp.ones(n)])  # absl-fit-line

    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet).run(
            unittest.defaultTestLoader.loadTestsFromTestCase(Case))
    assert result.wasSuccessful(), result.errors + result.failures
    spans = telemetry.compiles(
        "test_absl_parameterized_test_reaches_the_users_line.<locals>.step")
    assert [s.attributes["jax.compile.callsite"] for s in spans] == [
        f"{__file__}:{line_of('# absl' + '-fit-line')}"] * 2
    assert {s.attributes["jax.compile.library_callsite"] for s in spans} == {
        f"{trainer.__file__}:3"}


def test_nnx_training_loop_in_an_installed_trainer(telemetry, installed):
    nnx = pytest.importorskip("flax.nnx")
    optax = pytest.importorskip("optax")
    trainer = installed("tiny_nnx_trainer", (
        "def fit(step, model, optimizer, batches):\n"
        "    for x, y in batches:\n"
        "        step(model, optimizer, x, y)  # the library's line\n"))

    @nnx.jit
    def train_step(model, optimizer, x, y):
        def loss(model):
            return ((model(x) - y) ** 2).mean()

        grads = nnx.grad(loss)(model)
        optimizer.update(model, grads)

    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    batches = [(jnp.ones((4, 3)), jnp.ones((4, 1))), (jnp.ones((5, 3)), jnp.ones((5, 1)))]
    trainer.fit(train_step, model, optimizer, batches)  # nnx-fit-line
    spans = telemetry.compiles(
        "test_nnx_training_loop_in_an_installed_trainer.<locals>.train_step")
    assert len(spans) == 2
    assert {s.attributes["jax.compile.callsite"] for s in spans} == {
        f"{__file__}:{line_of('# nnx' + '-fit-line')}"}
    assert {s.attributes["jax.compile.library_callsite"] for s in spans} == {
        f"{trainer.__file__}:3"}


def test_keras_fit_call_site_is_the_users_fit_line(telemetry):
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "jax":
        pytest.skip("keras runs on another backend in this process")
    import numpy as np

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((8, 4)), np.ones((8, 2)), epochs=1, batch_size=4, verbose=0)  # keras-fit
    spans = [s for s in telemetry.compiles()
             if s.attributes["code.function.name"].endswith("train_step")]
    assert spans, [s.attributes["code.function.name"] for s in telemetry.compiles()]
    span = spans[0]
    assert span.attributes["jax.compile.callsite"] == (
        f"{__file__}:{line_of('# keras' + '-fit')}")
    library = span.attributes["jax.compile.library_callsite"]
    assert f"{os.sep}keras{os.sep}" in library and "trainer.py" in library


def test_a_decorator_around_the_jitted_call_is_not_the_call_site(telemetry):
    jaxtyping = pytest.importorskip("jaxtyping")
    if not any(mark in jaxtyping.__file__ for mark in ("site-packages", "dist-packages")):
        # installed code is told from the user's by where pip puts it (pip --target on a
        # PYTHONPATH, as on one TPU host, looks like the user's own folder)
        pytest.skip(f"jaxtyping is not installed in site-packages here: {jaxtyping.__file__}")

    @jaxtyping.jaxtyped(typechecker=None)
    @jax.jit
    def scaled(x):
        return x * 3

    scaled(jnp.ones(2))  # decorated-call-first
    scaled(jnp.ones(3))  # decorated-call-again
    spans = telemetry.compiles(
        "test_a_decorator_around_the_jitted_call_is_not_the_call_site.<locals>.scaled")
    assert [s.attributes["jax.compile.callsite"] for s in spans] == [
        f"{__file__}:{line_of('# decorated' + '-call-first')}",
        f"{__file__}:{line_of('# decorated' + '-call-again')}"]
    assert all("jaxtyping" in s.attributes["jax.compile.library_callsite"] for s in spans)
