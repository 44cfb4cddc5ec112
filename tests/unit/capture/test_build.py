"""``_capture._build``: a signature built from a dispatch-cache miss, at once or later."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

import otel_jax
from otel_jax._capture import _build, _detached
from otel_jax._capture._signature import UNCOMMITTED, StaticKind


def test_a_compile_s_signature_built_from_its_miss(telemetry):
    @functools.partial(jax.jit, static_argnames="n")
    def step(batch, lr, n):
        return batch["x"] * lr * n

    step({"x": jnp.ones((2, 3)), "y": jnp.zeros(2, jnp.int32)}, 0.1, n=3)
    sig = otel_jax.compile_history(step)[-1]._signature
    assert sig.captured and sig.top_names == ("batch", "lr")
    assert list(sig.paths) == ["batch['x']", "batch['y']", "lr"]
    assert list(sig.types) == ["f32[2,3]", "i32[2]", "f32[] (weak)"]
    assert all(p is UNCOMMITTED for p in sig.placements)
    [n] = sig.statics
    assert (n.name, n.repr, n.kind, n.keyword) == ("n", "3", StaticKind.STATIC_ARGUMENT, True)
    assert sig.function_ref() is not None
    assert sig.as_dict()["static_arguments"] == {"n": "3"}


@dataclasses.dataclass(frozen=True)
class Optim:
    lr: float


def test_a_signature_made_later_is_the_one_made_at_once(misses):
    @functools.partial(jax.jit, static_argnames=("n", "optim"))
    def step(x, n, optim):
        return x * n * optim.lr

    step(jnp.ones(3), n=2, optim=Optim(0.1))
    [miss] = misses
    now = _build.from_miss(miss)
    later = _build.from_detached(_detached.detach(miss))
    for part in ("paths", "types", "placements", "top_names", "statics", "options",
                 "context", "keywords"):
        assert list(getattr(later, part)) == list(getattr(now, part)), part
    assert later.function_id == now.function_id != 0
    assert [s.repr for s in later.statics] == [s.repr for s in now.statics] == [
        "2", "Optim(lr=0.1)"]


def test_parts_equal_to_the_earlier_signature_s_are_shared(misses):
    @jax.jit
    def f(x, y):
        return x + y[0]

    f(jnp.ones(3), jnp.ones(2))
    f(jnp.ones(3), jnp.ones(4))  # only y changed
    first, second = misses
    earlier = _build.from_miss(first)
    sig = _build.from_miss(second, like=earlier)
    assert list(sig.types) == ["f32[3]", "f32[4]"]
    assert sig.options is earlier.options and sig.statics is earlier.statics
    assert sig.treedef is earlier.treedef and sig.top_names is earlier.top_names
    alone = _build.from_miss(second)
    assert alone.treedef is not earlier.treedef or alone.tree_hash == earlier.tree_hash
