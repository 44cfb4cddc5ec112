"""``_capture._jax._names``: the names JAX gives functions in its events and debug info."""

from __future__ import annotations

import functools

from otel_jax._capture._jax import _names


def train_step(x, scale):
    return x * scale


def test_an_event_s_name_is_the_function_inside_the_transformation():
    assert _names.function_name_from_event("jit(train_step)") == "train_step"
    assert _names.function_name_from_event("pjit(loss)") == "loss"
    # not a transformation's name around it: kept whole
    assert _names.function_name_from_event("train_step") == "train_step"
    assert _names.function_name_from_event("<lambda>") == "<lambda>"
    assert _names.function_name_from_event("jit(f") == "jit(f"


def test_a_jaxpr_s_debug_source_gives_name_file_and_line():
    assert _names.transformed_source("f at /path/train.py:12") == ("f", "/path/train.py", 12)
    assert _names.transformed_source("Model.__call__ at /a b/m.py:3") == (
        "Model.__call__", "/a b/m.py", 3)
    for unreadable in (None, "", "f", "f at /path/train.py", "f at /path/train.py:x"):
        assert _names.transformed_source(unreadable) is None


def test_the_event_name_of_a_function_and_of_a_partial():
    assert _names.event_name(train_step) == "train_step"
    name = _names.event_name(functools.partial(train_step, scale=2))
    # JAX names a partial after its function, or with one of its placeholders
    assert name == "train_step" or name in _names.PLACEHOLDER_NAMES
