"""``_capture/_jax/_outputs``: a traced jit call's outputs, read off the real miss's
parameters (what the dispatch miss path left) at a real compile."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from conftest import needs_devices
from jax import tree_util

import otel_jax
from otel_jax._capture._jax import _out_shardings, _outputs
from otel_jax._pipeline import _assemble

pytestmark = pytest.mark.hazards  # the outputs are read while hazards are on


def test_the_outputs_of_a_compiled_call(monkeypatch):
    read = []

    def outputs_of(params, executable=None):
        read.append(_outputs.outputs_of(params, executable))
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
    # the executable the compile returned, kept for where it places the outputs (on one
    # device XLA reports no sharding: unknown)
    assert out.executable is not None


def test_output_shardings_compared_by_jax_equivalence_and_unknown_where_moved():
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(needs_devices(4)[:4]), ("data",))
    by_rows = NamedSharding(mesh, P("data"))
    x = jax.device_put(jnp.ones((4, 4)), by_rows)
    executable = jax.jit(lambda x: (x * 2, x.T)).lower(x).compile().runtime_executable()
    assert _out_shardings.output_shardings(executable, 3) is None  # not one for one
    kept, turned = _out_shardings.output_shardings(executable, 2)
    devices = _out_shardings.device_ids(executable)
    # JAX 0.8 writes a spec PartitionSpec('data',), later versions P('data',)
    assert _out_shardings.compare(by_rows, kept, 2, devices) == (True, str(P("data")))
    assert _out_shardings.compare(by_rows, turned, 2, devices) == (False,
                                                                   str(P(None, "data")))
    # P('data', None) reads otherwise but is the same placement
    assert _out_shardings.compare(NamedSharding(mesh, P("data", None)), kept, 2, devices)[0]
    # unknown: another device order, a sharding that is not named, a moved executable
    assert _out_shardings.compare(by_rows, kept, 2, devices[::-1]) is None
    assert _out_shardings.compare(object(), kept, 2, devices) is None
    assert _out_shardings.output_shardings(object(), 1) is None
    assert _out_shardings.device_ids(object()) is None


def test_parameters_that_moved_give_none():
    assert _outputs.outputs_of(object()) is None
    assert _outputs.outputs_of(type("P", (), {"params": {}, "out_tree": None})()) is None
    assert _outputs.aval_facts(object()) is None
