"""``otel_jax/_pipeline/_policy.py`` on real compile records: the storm warning once per
function at its threshold, warm-up counting, and what ``on_recompile`` does."""

from __future__ import annotations

import collections
import dataclasses

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax._core._failopen import FailOpen
from otel_jax._pipeline._history import FunctionHistory, History
from otel_jax._pipeline._policy import Policy, RecompileError


@pytest.fixture(scope="module")
def records():
    """A first compile and a recompile (a new shape) of one function."""

    @jax.jit
    def step(x):
        return x * 2

    with otel_jax.testing.record_compiles(step) as recorder:
        step(jnp.ones(2))
        step(jnp.ones(3))
    first, again = recorder.records
    assert not first.is_recompile and again.is_recompile
    return first, again


def _history(record, recompiles: int, causes: dict[str, int]) -> FunctionHistory:
    return FunctionHistory(record.function, collections.deque(), collections.deque(),
                           collections.Counter(causes), recompiles)


def test_a_storm_is_said_once_at_the_threshold(records):
    first, again = records
    policy = Policy(History(), FailOpen())
    policy.storm_threshold = 3
    fh = _history(again, 2, {"first_compile": 1, "shape": 2})
    assert policy.storm(again, fh) is None  # below the threshold
    fh.recompiles = 3
    fh.causes["shape"] = 3
    storm = policy.storm(again, fh)
    assert storm is not None and fh.storm_warned
    assert (storm.recompiles, storm.threshold, storm.causes) == (3, 3, {"shape": 3})
    assert storm.function == again.function and storm.last_cause == again.cause
    fh.recompiles = 4
    assert policy.storm(again, fh) is None  # said once; it keeps counting
    assert policy.storm(first, _history(first, 9, {})) is None  # a first compile
    eager = dataclasses.replace(again, eager_op=True)
    assert policy.storm(eager, _history(again, 9, {})) is None  # JAX's own op compiles
    assert policy.storm(again, None) is None  # no history (it failed): no storm


def test_warmup_counts_bare_steps_and_scopes():
    policy = Policy(History(), FailOpen())
    assert not policy.warmup_done  # no warm-up configured: never "after warm-up"
    policy.configure_warmup(2)
    assert policy.step() == 1 and not policy.warmup_done
    assert policy.begin_step(counted=False) == 2 and not policy.warmup_done  # step 2 runs
    assert policy.begin_step(counted=False) == 3 and policy.warmup_done  # step 3 began
    policy.configure_warmup(5)
    assert policy.steps == 0 and not policy.warmup_done
    policy.mark_warmup_done()
    assert policy.warmup_done


def test_on_recompile(records):
    first, again = records
    late = dataclasses.replace(again, after_warmup=True)
    policy = Policy(History(), FailOpen())
    policy.enforce(late)  # "log": marked and counted elsewhere, nothing here
    policy.on_recompile = "raise"
    policy.enforce(again)  # during warm-up: allowed
    policy.enforce(dataclasses.replace(first, after_warmup=True))  # a first compile: allowed
    with pytest.raises(RecompileError, match="recompiled after warm-up") as raised:
        policy.enforce(late)
    assert raised.value.record is late
    policy.on_recompile = "warn"
    with pytest.warns(otel_jax.OtelJaxWarning, match="recompiled after warm-up"):
        policy.enforce(late)
