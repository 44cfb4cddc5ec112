"""A user's ``__repr__`` is not run on every compile (issue 12, item 6).

JAX never calls a static argument's ``__repr__``; otel_jax takes it at most
once per distinct value, and not again for a type whose repr was slow. The
tests count calls rather than time them.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import weakref

import jax
import jax.numpy as jnp
import pytest

from otel_jax._capture import _reprs


def _counting(name: str, delay: float = 0.0, hashed_by: str = "value"):
    """A static-argument type whose repr counts its calls (and sleeps ``delay``)."""
    calls = {"n": 0}

    def __repr__(self):
        calls["n"] += 1
        if delay:
            threading.Event().wait(delay)
        return f"{name}(seed={self.seed})"

    def __init__(self, seed):
        self.seed = seed

    body = {"__init__": __init__, "__repr__": __repr__}
    if hashed_by == "value":
        body["__hash__"] = lambda self: hash(self.seed)
        body["__eq__"] = lambda self, other: type(other) is type(self) and other.seed == self.seed
    return type(name, (), body), calls


def _scaled(x, cfg):
    return x * cfg.seed


def test_the_same_static_value_is_repr_d_once_over_many_compiles(telemetry):
    Config, calls = _counting("SameConfig")
    f = jax.jit(_scaled, static_argnums=1)
    cfg = Config(3)
    for n in range(1, 7):
        f(jnp.ones(n), cfg)
    f(jnp.ones(7), Config(3))  # equal to it, another object: no repr either
    assert calls["n"] <= 1
    span = telemetry.compiles()[-1]
    assert span.attributes["jax.compile.cause.kind"] == "shape"


def test_an_identity_hashed_static_is_repr_d_once_per_object(telemetry):
    Config, calls = _counting("ByIdentity", hashed_by="identity")
    f = jax.jit(_scaled, static_argnums=1)
    cfg = Config(2)
    for n in range(1, 5):
        f(jnp.ones(n), cfg)
    assert calls["n"] <= 1
    f(jnp.ones(4), Config(2))
    assert calls["n"] <= 2
    span = telemetry.compiles()[-1]
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"


def test_a_slow_repr_is_taken_once_per_type(telemetry, monkeypatch):
    monkeypatch.setattr(_reprs, "SLOW_REPR_S", 0.01)
    _reprs.STATIC_REPRS.clear()
    Config, calls = _counting("SlowConfig", delay=0.05)
    f = jax.jit(_scaled, static_argnums=1)
    for seed in range(1, 6):  # a new value every compile
        f(jnp.ones(2), Config(seed))
    assert calls["n"] == 1
    span = telemetry.compiles()[-1]
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    assert "repr not taken" in span.attributes["jax.compile.cause"]
    _reprs.STATIC_REPRS.clear()


def test_remembered_reprs_hold_no_value(telemetry):
    Config, _ = _counting("Held")
    f = jax.jit(_scaled, static_argnums=1)
    cfg = Config(5)
    f(jnp.ones(2), cfg)
    ref = weakref.ref(cfg)
    del cfg, f
    jax.clear_caches()
    for _ in range(3):
        gc.collect()
    if ref() is not None:
        # JAX 0.8 keeps static arguments of cleared caches in wrappers of its own;
        # nothing of ours may be among what holds it.
        holders = {type(r).__module__ for r in gc.get_referrers(ref())}
        assert all(m.startswith("jax") for m in holders), holders


@dataclasses.dataclass(frozen=True)
class _Frozen:
    seed: int


class _Raises:
    seed = 1

    def __repr__(self):
        raise RuntimeError("no repr")


class _NotStr:
    seed = 1

    def __repr__(self):
        return 42  # type: ignore[return-value]


class _Huge:
    seed = 1

    def __repr__(self):
        return "H" * 1_000_000


class _Recursive:
    seed = 1

    def __repr__(self):
        return repr(self)


class _HashRaisesAfterFirst:
    seed = 1
    hashed = 0

    def __hash__(self):
        type(self).hashed += 1
        if type(self).hashed > 1:
            raise RuntimeError("hash failed")
        return 1

    def __eq__(self, other):
        return self is other


class _EqRaises:
    seed = 1

    def __hash__(self):
        return 7

    def __eq__(self, other):
        if other is self:
            return True
        raise RuntimeError("eq failed")


def test_a_raising_eq_does_not_break_the_remembered_reprs():
    a, b = _EqRaises(), _EqRaises()  # JAX itself would call the same __eq__ on b
    assert _reprs.STATIC_REPRS.text(a, 7, False).startswith("<")
    assert _reprs.STATIC_REPRS.text(b, 7, False).startswith("<")


# The fault family "hostile __repr__ of a static argument".
HOSTILE = {
    "repr raises": _Raises,
    "repr returns an int": _NotStr,
    "repr of 1,000,000 chars": _Huge,
    "infinitely recursive repr": _Recursive,
    "frozen dataclass": lambda: _Frozen(1),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_static_argument_never_reaches_the_user(telemetry, kind):
    make = HOSTILE[kind]
    f = jax.jit(_scaled, static_argnums=1)
    a = make()
    assert float(f(jnp.ones(2), a).sum()) == 2.0
    assert float(f(jnp.ones(3), a).sum()) == 3.0
    assert float(f(jnp.ones(3), make()).sum()) == 3.0
    for span in telemetry.compiles():
        cause = span.attributes["jax.compile.cause"]
        assert len(cause) < 2000  # bounded, whatever the repr
    assert telemetry.compiles()[-1].attributes["jax.compile.cause.kind"] in (
        "shape", "static_argument", "unknown")
