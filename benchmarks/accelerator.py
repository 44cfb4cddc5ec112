"""On a machine with an accelerator: what otel_jax costs and what it sees there, one table.

One command runs, on the device JAX picks (a TPU, a GPU, else the CPU):

(1)-(3) the compile path: ``benchmarks/compile_path.py``'s loops (a new ``jax.jit(f)`` per
    call, one jitted ``f`` at a new shape per call, eager op-by-op code), each as pairs of
    first calls, one off and one on, the order alternating from pair to pair; the wall
    clock, and the compiling thread's CPU time where that clock reads (on some machines it
    reads 0: then the table says so and nothing is divided by it);
(4) a cache hit of a small jitted function, off vs on, in short paired rounds;
(5) a steady-state train step of a small flax nnx transformer (cache hits only), off vs on,
    in paired rounds, blocking on each step's loss;
(6) that transformer's training as a user runs it, with its recompiles: a last partial
    batch, a validation loss taken with dropout on and then with ``model.eval()``, and
    longer sequences in the second epoch (and its last partial batch). Its compiles are
    counted by JAX's own ``backend_compile_duration`` event (a listener independent of otel_jax, as
    ``tests/conftest.py``'s ``BackendCompiles``) and by otel_jax's records, with each
    recompile's cause and the device kind otel_jax reported.

    python benchmarks/accelerator.py           # the full run (a few minutes on a TPU v5e)
    python benchmarks/accelerator.py --quick   # a smoke run, on any machine

Each measurement prints its line as it ends; the table at the end gathers them.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_path
import overhead

import otel_jax
from otel_jax.testing import CompileRecorder

Row = tuple[str, str, str, str, str, str]  # measurement, off, on, added, ratio, spread
HEADER: Row = ("measurement", "off (median)", "on (median)", "added (median per pair)",
               "ratio (medians; per pair)", "added: IQR; min-max")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3f} µs"


def result_row(label: str, result: compile_path.Result,
               unit: Callable[[float], str] = _ms) -> Row:
    """One row from paired off/on seconds; a clock that read 0 is said, never divided by."""
    if result.zero_reads:
        said = f"the clock read 0 in {result.zero_reads} of {2 * len(result.offs)} timings"
        if result.ratio is None:
            return (label, said, "", "not measured", "", "")
        label = f"{label} ({said})"
    ratio = f"{result.ratio:.3f}" if result.ratio is not None else "n/a"
    pair = f"{result.pair_ratio:.3f}" if result.pair_ratio is not None else "n/a"
    return (label, unit(result.off), unit(result.on), f"{'+' if result.diff >= 0 else ''}"
            f"{unit(result.diff)}", f"{ratio}; {pair}",
            f"[{unit(result.q1)}, {unit(result.q3)}]; "
            f"[{unit(min(result.diffs))}, {unit(max(result.diffs))}]")


# --- (1)-(3) the compile path ---------------------------------------------------------------

def compile_pairs(pairs: int, only: str, tick: float, rows: list[Row]) -> None:
    loops = [loop for loop in compile_path.LOOPS[:3] if loop[0][1] in only]
    for _label, make, install in loops:  # first-use costs land here
        compile_path.paired(make(), 2, install)
    for label, make, install in loops:
        offs, ons = compile_path.paired(make(), pairs, install)
        wall = compile_path.Result([w for w, _ in offs], [w for w, _ in ons])
        cpu = compile_path.Result([c for _, c in offs], [c for _, c in ons])
        print(wall.line(label), flush=True)
        print(cpu.line("    compiling thread's CPU"), flush=True)
        rows.append(result_row(f"{label}, wall ({pairs} pairs)", wall))
        resolution = f", its clock ticking in {tick * 1e3:.0f} ms" if tick >= 1e-3 else ""
        rows.append(result_row(f"{label}, compiling thread's CPU{resolution}", cpu))


# --- (4), (5) steady state: cache hits --------------------------------------------------------

def paired_rounds(timed: Callable[[], float], rounds: int) -> compile_path.Result:
    """Seconds per call of each side over short back-to-back rounds, the order swapped each
    round (``overhead.paired``'s method, every round kept for the spread)."""
    offs: list[float] = []
    ons: list[float] = []
    for i in range(rounds):
        for on in ((False, True) if i % 2 == 0 else (True, False)):
            if on:
                overhead.install()
            else:
                otel_jax.uninstall()
            gc.collect()
            (ons if on else offs).append(timed())
            otel_jax.uninstall()
    return compile_path.Result(offs, ons)


def cache_hit(calls: int, rounds: int) -> compile_path.Result:
    @jax.jit
    def small(x, y):
        return x * y + 1

    x, y = jnp.ones(8), jnp.ones(8)
    small(x, y).block_until_ready()

    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            small(x, y)
        small(x, y).block_until_ready()
        return (time.perf_counter() - t0) / (calls + 1)

    return paired_rounds(timed, rounds)


# --- (5), (6) a flax nnx transformer --------------------------------------------------------

Sizes = collections.namedtuple("Sizes", "vocab d heads layers batch seq long_seq steps")
FULL = Sizes(vocab=1024, d=256, heads=4, layers=2, batch=8, seq=64, long_seq=128, steps=2)
QUICK = Sizes(vocab=64, d=32, heads=2, layers=2, batch=4, seq=8, long_seq=16, steps=2)


def transformer(sizes: Sizes) -> tuple[Any, Any, Callable[..., Any], Callable[..., Any]]:
    """A small decoder-only transformer, its optimizer, and the jitted train and evaluation
    steps, as a flax nnx user writes them."""
    import optax
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, d: int, heads: int, rngs: nnx.Rngs) -> None:
            self.norm1 = nnx.LayerNorm(d, rngs=rngs)
            self.attention = nnx.MultiHeadAttention(num_heads=heads, in_features=d,
                                                    decode=False, rngs=rngs)
            self.norm2 = nnx.LayerNorm(d, rngs=rngs)
            self.up = nnx.Linear(d, 4 * d, rngs=rngs)
            self.down = nnx.Linear(4 * d, d, rngs=rngs)
            self.dropout = nnx.Dropout(0.1, rngs=rngs)

        def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
            x = x + self.dropout(self.attention(self.norm1(x), mask=mask))
            return x + self.dropout(self.down(nnx.gelu(self.up(self.norm2(x)))))

    class Decoder(nnx.Module):
        def __init__(self, s: Sizes, rngs: nnx.Rngs) -> None:
            self.tokens = nnx.Embed(s.vocab, s.d, rngs=rngs)
            self.positions = nnx.Embed(s.long_seq, s.d, rngs=rngs)
            blocks = [Block(s.d, s.heads, rngs) for _ in range(s.layers)]
            # flax 0.12 wants a list of modules marked as data (nnx.List); older ones had none
            self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks
            self.norm = nnx.LayerNorm(s.d, rngs=rngs)
            self.head = nnx.Linear(s.d, s.vocab, rngs=rngs)

        def __call__(self, tokens: jax.Array) -> jax.Array:
            x = self.tokens(tokens) + self.positions(jnp.arange(tokens.shape[1]))
            mask = nnx.make_causal_mask(tokens)
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.norm(x))

    def loss_of(model: Decoder, tokens: jax.Array) -> jax.Array:
        logits = model(tokens)
        return optax.softmax_cross_entropy_with_integer_labels(
            logits[:, :-1], tokens[:, 1:]).mean()

    model = Decoder(sizes, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)  # flax >= 0.11

    @nnx.jit
    def train_step(model: Decoder, optimizer: Any, tokens: jax.Array) -> jax.Array:
        loss, grads = nnx.value_and_grad(loss_of)(model, tokens)
        optimizer.update(model, grads)
        return loss

    @nnx.jit
    def evaluate(model: Decoder, tokens: jax.Array) -> jax.Array:
        return loss_of(model, tokens)

    return model, optimizer, train_step, evaluate


def batches(sizes: Sizes, seq: int, seed: int) -> list[np.ndarray]:
    """One epoch of token batches: ``steps`` full ones and a last partial one."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, sizes.vocab, (sizes.batch * sizes.steps + sizes.batch // 2 + 1,
                                           seq), dtype=np.int32)
    return [tokens[i:i + sizes.batch] for i in range(0, len(tokens), sizes.batch)]


class BackendCompiles:
    """Backend compiles counted by JAX's own monitoring event, independently of otel_jax
    (``tests/conftest.py``'s listener): by the name JAX gives each."""

    EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.names: collections.Counter[str] = collections.Counter()
        self.seconds: list[float] = []

    def __call__(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == self.EVENT:
            self.names[str(kwargs.get("fun_name", "?"))] += 1
            self.seconds.append(duration)

    def __enter__(self) -> BackendCompiles:
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc: object) -> None:
        from jax._src import monitoring

        remove = (getattr(monitoring, "unregister_event_duration_listener", None)
                  or monitoring._unregister_event_duration_listener_by_callback)  # JAX 0.8
        remove(self)


def training(sizes: Sizes) -> tuple[BackendCompiles, list[Any], Any, Any, Any]:
    """Two epochs as a user runs them, installed: JAX's count, otel_jax's records, and the
    model, optimizer and train step for the steady state."""
    overhead.install()
    with BackendCompiles() as jax_count, CompileRecorder(include_eager=True) as recorder:
        t0 = time.perf_counter()
        model, optimizer, train_step, evaluate = transformer(sizes)
        print(f"    model and optimizer made: {time.perf_counter() - t0:.1f} s, "
              f"{sum(jax_count.names.values())} backend compiles", flush=True)
        model.train()  # dropout on, as flax's guides start (the default leaves it unset)
        validation = batches(sizes, sizes.seq, seed=1)[0]
        for epoch, seq in enumerate((sizes.seq, sizes.long_seq)):  # longer in epoch 2
            for i, batch in enumerate(batches(sizes, seq, seed=epoch)):  # last one partial
                float(train_step(model, optimizer, batch))
                if epoch == 0 and i == 0:  # a validation loss, dropout still on
                    float(evaluate(model, validation))
            print(f"    epoch {epoch + 1} done: {sum(jax_count.names.values())} backend "
                  "compiles so far", flush=True)
            if epoch == 0:
                model.eval()  # dropout off: the same evaluate compiles again
                float(evaluate(model, validation))
                model.train()  # back as the train step was compiled: a cache hit
        otel_jax.flush()
    otel_jax.uninstall()
    return jax_count, recorder.records, model, optimizer, train_step


def train_step_rounds(sizes: Sizes, model: Any, optimizer: Any, train_step: Any,
                      steps: int, rounds: int) -> compile_path.Result:
    batch = batches(sizes, sizes.seq, seed=0)[0]
    float(train_step(model, optimizer, batch))  # compiled in training(): a cache hit

    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            float(train_step(model, optimizer, batch))  # blocks on the step
        return (time.perf_counter() - t0) / steps

    return paired_rounds(timed, rounds)


def compile_rows(jax_count: BackendCompiles, records: list[Any], rows: list[Row]) -> None:
    users = [r for r in records if not r.eager_op]
    eager = len(records) - len(users)
    total = sum(jax_count.names.values())
    rows.append(("(6) backend compiles in 2 epochs: JAX's event / otel_jax's records",
                 str(total), str(len(records)), "", "equal" if total == len(records)
                 else "DIFFER", f"of them eager ops: {eager} (otel_jax)"))
    for qualname in dict.fromkeys(r.function.qualname for r in users):
        mine = [r for r in users if r.function.qualname == qualname]
        short = qualname.rpartition(".")[2]
        theirs = sum(n for name, n in jax_count.names.items() if name == f"jit({short})")
        seconds = ", ".join(f"{r.compile_s:.2f}" for r in mine)
        causes = "; ".join(f"{r.count}: {r.cause_kind.value} ({r.cause})" for r in mine[1:])
        rows.append((f"(6) {short}: compiles, JAX's event jit({short}) / otel_jax",
                     str(theirs), str(len(mine)), f"compile s: {seconds}",
                     "equal" if theirs == len(mine) else "DIFFER", causes or "-"))
        for r in mine:
            print(f"    {short} #{r.count} {r.cause_kind.value}: {r.cause}  "
                  f"({r.compile_s:.2f} s, {r.devices.platform} {r.devices.kind})", flush=True)
    kinds = sorted({f"{r.devices.platform} / {r.devices.kind}" for r in records})
    rows.append(("(6) device otel_jax reported (platform / kind)", ", ".join(kinds), "", "",
                 "", f"jax.devices()[0]: {jax.devices()[0].device_kind}"))


# --- the table -------------------------------------------------------------------------------

def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |"
              for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, small sizes")
    parser.add_argument("--pairs", type=int, default=30, help="compile pairs per loop")
    parser.add_argument("--only", default="123456", help="which measurements, e.g. '456'")
    args = parser.parse_args()
    q = args.quick
    pairs = 4 if q else args.pairs
    sizes = QUICK if q else FULL
    device = jax.devices()[0]
    tick = compile_path.thread_clock_tick()
    print(f"{datetime.date.today()}; jax {jax.__version__}, otel_jax {otel_jax.__version__}; "
          f"{len(jax.devices())} x {device.platform} ({device.device_kind}); "
          f"{os.cpu_count()} CPUs; {compile_path.clock_text(tick)}", flush=True)
    compile_path.configure_application_sdk()
    rows: list[Row] = []
    if set("123") & set(args.only):
        compile_pairs(pairs, args.only, tick, rows)
    if "4" in args.only:
        hit = cache_hit(calls=500 if q else 1_000, rounds=4 if q else 30)
        print(hit.line("(4) cache hit, small jitted f"), flush=True)
        rows.append(result_row("(4) cache hit of a small jitted f, per call", hit, _us))
    if set("56") & set(args.only):
        t0 = time.perf_counter()
        jax_count, records, model, optimizer, train_step = training(sizes)
        print(f"(6) two epochs with their compiles: {time.perf_counter() - t0:.1f} s; JAX's "
              f"event counted {sum(jax_count.names.values())}, otel_jax "
              f"{len(records)}", flush=True)
        if "5" in args.only:
            step = train_step_rounds(sizes, model, optimizer, train_step,
                                     steps=3 if q else 20, rounds=4 if q else 20)
            print(step.line("(5) train step, cache hits"), flush=True)
            rows.append(result_row(f"(5) nnx transformer train step ({sizes.layers} "
                                   f"layers, d={sizes.d}, batch {sizes.batch}x{sizes.seq}), "
                                   "cache hits", step))
        if "6" in args.only:
            compile_rows(jax_count, records, rows)
    print()
    print(table(rows), flush=True)


if __name__ == "__main__":
    main()
