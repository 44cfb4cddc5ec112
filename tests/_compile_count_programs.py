"""Programs whose backend compiles JAX must make alike with otel_jax installed and without,
for tests/test_compile_counts.py.

``python _compile_count_programs.py MODE [PROGRAM ...]`` runs each program (all by default)
in this order, counting backend compiles with a ``jax.monitoring`` duration listener of
its own, registered before JAX compiles anything, and prints one ``COUNTS <json>`` line:
``{program: compiles}``. MODE: ``plain`` (no otel_jax); ``installed``
(``otel_jax.install()``: records made and emitted on the background thread, a fraction of
a second after their compiles); ``installed_held`` (the same, with a log output that holds
the background thread until each program ends, as an exporter that hangs would: every
record is made as late as it can be).

Each program re-creates the objects JAX keys its caches by weakly or by value (functions,
the ``HashablePartial`` objects JAX jits per op, static values) and lets them die as a real
program would: a tool that kept one alive until its record is made turns a later compile
into a cache hit. Nothing waits for otel_jax inside a program.
"""

from __future__ import annotations

import gc
import io
import json
import sys
import threading
import time

import jax
import jax.numpy as jnp
from jax._src import monitoring

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
ROUNDS = 8
PMAP_ROUNDS = 3  # about 30 compiles each
HOLD_LIMIT_S = 120.0  # bounded, far longer than a program runs

_compiles = [0]


def _count(event: str, duration: float, **kwargs: object) -> None:
    if event == BACKEND_COMPILE:
        _compiles[0] += 1


def pmap_under_disable_jit() -> None:
    """chex's ``fake_jit``: ``pmap`` run op by op, each op jitted as a new
    ``HashablePartial`` equal to the last one."""
    n = jax.local_device_count()

    def step(x):
        # The same op with the same parameters, again and again: each is jitted as a
        # new HashablePartial equal to the one before, which plain JAX has let go.
        y = jnp.sin(x)
        for _ in range(4):
            y = y * 2 + 1
        return y

    for i in range(PMAP_ROUNDS):
        with jax.disable_jit():
            jax.pmap(step)(jnp.full((n, 3), float(i))).block_until_ready()


def eager_grad() -> None:
    """Eager ops under an eager ``jax.grad``: JAX's jitted library functions evaluated
    under a transformation, and primitives applied one by one, for new shapes."""

    def loss(x):
        return (jnp.sin(x) * x + jnp.cos(x)).sum()

    for i in range(ROUNDS):
        jax.grad(loss)(jnp.ones(i % 2 + 1)).block_until_ready()


def recreated_jit_under_grad() -> None:
    """A new ``jax.jit(lambda ...)`` closure per step, differentiated outside jit."""

    def scaled(k: float):
        return jax.jit(lambda x: (x * x * k).sum())

    for i in range(ROUNDS):
        jax.grad(scaled(float(i % 3)))(jnp.ones(3)).block_until_ready()


class _Scale:
    """A static value hashed by identity: each new object is a new cache key."""

    def __init__(self, k: float) -> None:
        self.k = k


class _Adder:
    """A jitted callable that compares by value, as JAX's ``HashablePartial`` does: JAX's
    weak-keyed trace cache serves an equal new one only while the old one is alive."""

    def __init__(self, k: int) -> None:
        self.k = k

    def __eq__(self, other: object) -> bool:
        return type(other) is _Adder and other.k == self.k

    def __hash__(self) -> int:
        return hash(self.k)

    def __call__(self, x):
        return x + self.k


def identity_hashed_statics() -> None:
    """Static arguments hashed by identity, and static functions, made per call."""
    scaled = jax.jit(lambda x, s: x * s.k, static_argnums=1)
    applied = jax.jit(lambda f, x: f(x), static_argnums=0)
    for i in range(ROUNDS):
        scaled(jnp.ones(3), _Scale(float(i % 2))).block_until_ready()
        applied(lambda x: x - 1, jnp.ones(3)).block_until_ready()


def value_equal_functions() -> None:
    """An equal callable object jitted anew each step, the last one gone by then."""
    for i in range(ROUNDS):
        jax.jit(_Adder(i % 2))(jnp.ones(3)).block_until_ready()


def collected_before_record() -> None:
    """Each function and static value collected right after its compile, before any
    record of it can be made."""
    for i in range(ROUNDS):
        f = jax.jit(lambda x, s: x + s.k, static_argnums=1)
        s = _Scale(float(i % 2))
        f(jnp.ones(2), s).block_until_ready()
        g = jax.jit(_Adder(1))
        g(jnp.ones(2)).block_until_ready()
        del f, s, g
        gc.collect()


PROGRAMS = {p.__name__: p for p in (pmap_under_disable_jit, eager_grad,
                                    recreated_jit_under_grad, identity_hashed_statics,
                                    value_equal_functions, collected_before_record)}


class _HeldSink(io.StringIO):
    """A log output that holds otel_jax's background thread at its first line until the
    program ends (an exporter that hangs): every later compile's record waits to be made
    for as long as it can, instead of the fraction of a second it usually waits."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def write(self, text: str) -> int:
        self.released.wait(HOLD_LIMIT_S)
        return super().write(text)


def main(mode: str, names: list[str]) -> None:
    monitoring.register_event_duration_secs_listener(_count)
    sink: _HeldSink | None = None
    if mode in ("installed", "installed_held"):
        import otel_jax

        if mode == "installed":
            otel_jax.install(log_output=None)
        else:  # every compile writes a line, the first one holds the thread
            sink = _HeldSink()
            otel_jax.install(log_output=sink, log_level="debug")
    elif mode != "plain":
        raise SystemExit(f"unknown mode {mode!r}")
    counts = {}
    for name in names or list(PROGRAMS):
        before = _compiles[0]
        started = time.perf_counter()
        PROGRAMS[name]()
        counts[name] = _compiles[0] - before
        if sink is not None:  # the records of this program made, the next one held again
            sink.released.set()
            otel_jax.flush()
            sink.released.clear()
        print(f"{name}: {time.perf_counter() - started:.2f} s", file=sys.stderr)
    print("COUNTS " + json.dumps(counts), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
