"""``_capture/_jax/_outputs``: a traced jit call's outputs, read off the real miss's
parameters (what the dispatch miss path left) at a real compile."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import tree_util

import otel_jax
from otel_jax._capture._jax import _outputs
from otel_jax._pipeline import _assemble

pytestmark = pytest.mark.hazards  # the outputs are read while hazards are on


def test_the_outputs_of_a_compiled_call(monkeypatch):
    read = []

    def outputs_of(params):
        read.append(_outputs.outputs_of(params))
        return read[-1]

    monkeypatch.setattr(_assemble, "outputs_of", outputs_of)

    @jax.jit
    def step(state, lr):
        return {"w": state["w"] * lr, "lr": lr * jnp.float32(1)}, lr

    with otel_jax.testing.record_compiles(step):
        step({"w": jnp.ones(3), "lr": 0.1}, 0.5)
    [out] = read
    assert out is not None
    assert out.tree == tree_util.tree_structure(({"w": 0, "lr": 0}, 0))
    facts = [_outputs.aval_facts(a) for a in out.avals]
    assert facts == [((), "float32", False), ((3,), "float32", False), ((), "float32", True)]


def test_parameters_that_moved_give_none():
    assert _outputs.outputs_of(object()) is None
    assert _outputs.outputs_of(type("P", (), {"params": {}, "out_tree": None})()) is None
    assert _outputs.aval_facts(object()) is None
