"""``_capture._detached``: what a signature is built from, read off a miss into plain data
and weak references."""

from __future__ import annotations

import enum
import functools
import weakref

import jax
import jax.numpy as jnp
import numpy as np

from otel_jax._capture import _detached
from otel_jax._capture._jax import _jit_info
from otel_jax._capture._signature import StaticArg


class Mode(enum.Enum):
    TRAIN = 1


class Config:
    def __init__(self, rate: float) -> None:
        self.rate = rate


def test_a_detached_read_holds_the_function_weakly_and_statics_as_data(misses):
    @functools.partial(jax.jit, static_argnames=("n", "mode", "dtype", "cfg"))
    def step(x, n, mode, dtype, cfg):
        return x * len(n)

    cfg = Config(0.5)
    step(jnp.ones(3), n=(1, 2), mode=Mode.TRAIN, dtype=np.dtype("float32"), cfg=cfg)
    [miss] = misses
    read = _detached.detach(miss)
    assert read is not None
    assert isinstance(read.function_ref, weakref.ref) and read.function_ref() is not None
    pending = {s.name: s for s in read.statics}
    # scalars, enum members, dtypes and tuples of them wait as they are; anything else is
    # read into a StaticArg at once, holding the value only weakly
    assert all(isinstance(pending[k], _detached.Pending) for k in ("n", "mode", "dtype"))
    assert isinstance(pending["cfg"], StaticArg) and pending["cfg"].value is not None
    assert pending["cfg"].value.get() is cfg
    assert all(s.keyword for s in read.statics)
    assert _detached.resolved(pending["n"]).repr == "(1, 2)"
    assert len(read.avals) == len(read.placements) == 1


def test_a_full_read_leaves_every_static_pending(misses):
    @functools.partial(jax.jit, static_argnums=1)
    def f(x, cfg):
        return x

    f(jnp.ones(2), Config(1.0))
    [miss] = misses
    parameters = _jit_info.call_parameters(miss.jit_info, len(miss.args))
    read = _detached.read_miss(miss, None, parameters, None, None, None, detached=False)
    [entry] = read.statics
    assert isinstance(entry, _detached.Pending) and entry.name == "cfg" and not entry.keyword
    resolved = _detached.resolved(entry)
    assert isinstance(resolved, StaticArg) and _detached.resolved(resolved) is resolved
    assert read.top_names == ("x",)
