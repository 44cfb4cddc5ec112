"""``_capture._jax._jit_info``: a jit wrapper's options, static arguments and parameter
names, read off its ``PjitInfo`` (stood in for here by an object with its field names)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

from otel_jax._capture._jax import _jit_info


def step(params, batch, *features, scale=1.0, mode="train", **extra):
    return params


def info(**fields):
    return SimpleNamespace(fun_signature=inspect.signature(step), **fields)


def miss(ji, *args, **kwargs):
    return SimpleNamespace(jit_info=ji, args=args, kwargs=kwargs)


def test_arguments_are_named_after_the_parameters_as_jax_names_their_leaves():
    parameters = _jit_info.call_parameters(info(), 4)
    assert parameters.positional == ["params", "batch", "features[0]", "features[1]"]
    assert parameters.var_keyword == "extra"
    assert parameters.keywords == {"params", "batch", "scale", "mode"}
    assert _jit_info.parameter_names(info(), 1) == ["params"]


def test_without_a_signature_arguments_are_named_by_position():
    parameters = _jit_info.call_parameters(SimpleNamespace(), 2)
    assert parameters == _jit_info.CallParameters(["args[0]", "args[1]"])


def test_static_arguments_in_call_order_by_number_then_by_name():
    ji = info(static_argnums=(1,), static_argnames=("mode",))
    m = miss(ji, "p", "b", 3, mode="eval", scale=2.0)
    assert _jit_info.static_arguments(m) == [("batch", "b"), ("mode", "eval")]
    assert _jit_info.dynamic_positions(m) == [0, 2]
    # a static number past the call's arguments, a name not passed: not there
    assert _jit_info.static_arguments(miss(info(static_argnums=(5,),
                                                static_argnames=("mode",)), "p")) == []


def test_jit_options_by_their_public_names():
    ji = SimpleNamespace(donate_argnums=(), donate_argnames=("params",), static_argnums=(1,),
                         static_argnames=("batch",), device=None, keep_unused=True)
    options = dict(_jit_info.jit_options(ji))
    assert options["donate_argnums"] == ("params",)  # the names when no numbers are set
    assert options["static_argnums"] == (1,)
    assert options["keep_unused"] is True
    assert options["in_shardings"] is None  # a field that moved reads as unset
    assert list(options) == ["donate_argnums", "static_argnums", "in_shardings",
                             "out_shardings", "in_layouts", "out_layouts", "device",
                             "backend", "keep_unused", "inline", "compiler_options"]
