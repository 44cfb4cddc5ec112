"""``_capture._naming``: which function a compile belongs to, and JAX's own eager ops."""

from __future__ import annotations

import jax.numpy as jnp

from otel_jax._capture import _naming
from otel_jax._capture._jax._miss import Miss
from otel_jax._capture._jax._transformed import TransformedFunction
from otel_jax._capture._source import FunctionInfo


def miss(fun, *args, transformed=False):
    # what the dispatch-cache miss keeps of a call, for a function called with no jit options
    return Miss(fun=fun, jit_info=None, args=args, kwargs={}, params=None, args_flat=None,
                started=0.0, transformed=transformed)


def train_step(x):
    return x


def test_a_user_function_is_named_by_its_definition_site():
    naming = _naming.name_compile(miss(train_step, 1.0), "jit(train_step)")
    assert naming.info == FunctionInfo("train_step", __file__,
                                       train_step.__code__.co_firstlineno)
    assert not naming.eager_op and naming.stands_for is None


def test_one_of_jax_s_own_jitted_functions_called_eagerly_is_an_eager_op():
    sin = jnp.sin.__wrapped__  # jnp.sin is a jitted function defined inside jax
    naming = _naming.name_compile(miss(sin, jnp.ones(2)), "jit(sin)")
    assert naming.eager_op and naming.info.qualname == "sin"
    assert naming.info.file is not None and "jax" in naming.info.file


def test_without_a_miss_the_event_s_bare_name():
    assert _naming.name_compile(None, "jit(train_step)") == _naming.Naming(
        FunctionInfo("train_step"))
    assert _naming.fallback("jit(loss)").info == FunctionInfo("loss")


def test_a_compile_belongs_to_the_miss_of_the_same_function():
    m = miss(train_step, 1.0)
    assert _naming.belongs_to(m, "jit(train_step)")
    assert not _naming.belongs_to(m, "jit(sin)")  # an eager op compiled while tracing


def test_a_transformed_program_is_named_from_its_jaxpr_source():
    fun = TransformedFunction("loss", None)
    m = miss(fun, transformed=True)
    assert _naming.jitted_function(m) is None
    naming = _naming.name_compile(m, "jit(loss)")
    assert naming.info == FunctionInfo("loss") and not naming.eager_op
    # while the jitted function that bound it is still running (vmap), it is that one
    assert _naming.jitted_function(miss(TransformedFunction("loss", None, train_step),
                                        transformed=True)) is train_step
