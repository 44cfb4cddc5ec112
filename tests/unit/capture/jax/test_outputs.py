"""``_capture/_jax/_outputs``: a traced jit call's outputs, read off the miss's parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import tree_util

from otel_jax._capture._jax import _outputs


def test_the_outputs_of_a_traced_call():
    def step(state, lr):
        return {"w": state["w"] * lr, "lr": lr * jnp.float32(1)}, lr

    traced = jax.jit(step).trace({"w": jnp.ones(3), "lr": 0.1}, 0.5)
    # what the miss path holds: the trace's PjitParams-like parameters
    params = type("Params", (), {"params": {"jaxpr": traced.jaxpr},
                                 "out_tree": traced.out_tree})()
    out = _outputs.outputs_of(params)
    assert out is not None
    assert out.tree == tree_util.tree_structure(({"w": 0, "lr": 0}, 0))
    facts = [_outputs.aval_facts(a) for a in out.avals]
    assert facts == [((), "float32", False), ((3,), "float32", False), ((), "float32", True)]


def test_parameters_that_moved_give_none():
    assert _outputs.outputs_of(object()) is None
    assert _outputs.outputs_of(type("P", (), {"params": {}, "out_tree": None})()) is None
    assert _outputs.aval_facts(object()) is None
