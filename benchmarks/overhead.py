"""What otel_jax costs, measured side by side in one run and printed as ratios.

(a) a cache-hit call of a small jitted function, installed vs not (target <= 1.02);
(b) a compile-heavy loop over 60 distinct shapes, installed vs not (target <= 1.05);
(c) the cause diff of a 10,000-leaf pytree with one leaf changed (target <= 2 ms);
(d) otel_jax's own work per compile with 0 vs N other functions already compiled
    (must not grow with N);
(e) the median step time of a training loop (a span per step, a recompile every 50
    steps) exporting to a collector that is down vs exporting nowhere (target ~1.0);
(f) a recompile of a 10,000-leaf argument with one leaf changed: otel_jax's own work
    (target <= 2 ms) and the bytes its history keeps per compile (target <= 0.1 MiB).
(g) a compile loop whose static argument has a slow ``__repr__`` (0.2 s), installed vs
    not (JAX never calls it; otel_jax at most once per type whose repr is slow).
(h) the signature and program fingerprints of one compile, for programs of 10 to 20,000
    operations, against the compile they describe;
(i) a job of 2 processes (``jax.distributed.initialize`` on 127.0.0.1): the time per
    compile with the cross-rank check on vs off, and its own work on the compiling thread.
(j) with JAX's persistent compilation cache on: otel_jax's work per compile with the
    compile ledger off vs on, the ledger's own share (target < 1 ms), its calls on
    persistent-cache hits (target: none), and reading a full ledger once.

    python benchmarks/overhead.py            # the full run (about 2 minutes, N = 5000)
    python benchmarks/overhead.py --quick    # a smoke run with small sizes

Rounds alternate between the two sides so that drift on a shared machine hits
both alike; each side reports its best round (the least disturbed), except (a),
which reports the median over many short back-to-back pairs.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import IO

import jax
import jax.numpy as jnp
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_jax
from otel_jax._explain import _diff
from otel_jax._pipeline._engine import ENGINE


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


@functools.cache
def devnull() -> IO[str]:
    """Where the runs' JSON lines go: opened at the first run, kept for the rest of it
    (a test that imports this module for its helpers opens nothing)."""
    return open(os.devnull, "w")  # kept open: lives for the whole run


_tracer_provider = TracerProvider()
_tracer_provider.add_span_processor(BatchSpanProcessor(_Discard()))
_meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])


def install() -> None:
    """The full pipeline a user gets: spans through a batch processor, metrics, JSON logs."""
    otel_jax.install(tracer_provider=_tracer_provider, meter_provider=_meter_provider,
                     log_output=devnull())


def alternate(off: Callable[[], float], on: Callable[[], float], rounds: int,
              ) -> tuple[float, float]:
    """Best round of each side; the side that goes first swaps every round."""
    best_off, best_on = float("inf"), float("inf")

    def run_off() -> float:
        otel_jax.uninstall()
        gc.collect()
        return off()

    def run_on() -> float:
        install()
        gc.collect()
        try:
            return on()
        finally:
            otel_jax.uninstall()

    for i in range(rounds):
        if i % 2:
            best_on = min(best_on, run_on())
            best_off = min(best_off, run_off())
        else:
            best_off = min(best_off, run_off())
            best_on = min(best_on, run_on())
    return best_off, best_on


def bench_cache_hit(calls: int, rounds: int) -> tuple[float, float]:
    @jax.jit
    def small(x, y):
        return x * y + 1

    x, y = jnp.ones(8), jnp.ones(8)
    small(x, y).block_until_ready()

    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            small(x, y)
        return (time.perf_counter() - t0) / calls

    return paired(timed, rounds)


def paired(timed: Callable[[], float], rounds: int) -> tuple[float, float]:
    """Median time of each side over many short back-to-back pairs, order swapped each pair.

    A cache hit costs microseconds, so a burst of load on a shared machine
    moves one long round by more than the effect measured; many short pairs
    see the same disturbances on both sides, and the median ignores the rest.
    """
    offs: list[float] = []
    ons: list[float] = []
    for i in range(rounds):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            if side:
                install()
                gc.collect()
                ons.append(timed())
                otel_jax.uninstall()
            else:
                otel_jax.uninstall()
                gc.collect()
                offs.append(timed())
    ratio = statistics.median(b / a for a, b in zip(offs, ons))
    off = statistics.median(offs)
    return off, off * ratio


def bench_compile_loop(shapes: int, rounds: int) -> tuple[float, float]:
    def timed() -> float:
        @jax.jit
        def layer(x):  # a new function object each time: compiles from scratch
            return jnp.tanh(x @ x.T).sum() + jnp.sin(x).mean()

        t0 = time.perf_counter()
        for n in range(1, shapes + 1):
            layer(jnp.ones((n, 4))).block_until_ready()
        return time.perf_counter() - t0

    timed()  # warm JAX's own one-time costs
    return alternate(timed, timed, rounds)


def bench_diff(leaves: int, repeats: int) -> float:
    params = {f"layer_{i}": {"w": jnp.zeros((2,)), "b": jnp.zeros(())}
              for i in range(leaves // 2)}

    @jax.jit
    def count(params):
        return params["layer_0"]["b"] + 1

    with otel_jax.testing.record_compiles(count):
        count(params)
        params[f"layer_{leaves // 4}"]["w"] = jnp.zeros((3,))
        count(params)
    earlier = [sig for _, sig in ENGINE.history._functions[
        otel_jax._function_info(count).key].signatures]
    new = earlier[-1]
    assert new.num_leaves == leaves
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        index, closest = _diff.closest(earlier[:-1], new)  # type: ignore[misc]
        d = _diff.diff(closest, new)
        times.append(time.perf_counter() - t0)
    assert d.total == 1 and d.changes[0].path == f"params['layer_{leaves // 4}']['w']"
    return statistics.median(times)


@jax.jit
def probe_warmup(x):
    return x * 3 - 1


@jax.jit
def probe_before(x):
    return x * 2 + 1


@jax.jit
def probe_after(x):  # the same work as probe_before, with its own (empty) history
    return x * 2 + 1


def deep_size(root: object) -> int:
    """Bytes of everything ``root`` reaches (each object once), not counting modules,
    classes and functions: what keeping ``root`` costs."""
    import types as pytypes

    skip = (type, pytypes.ModuleType, pytypes.FunctionType, pytypes.BuiltinFunctionType)
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def bench_big_recompile(leaves: int, recompiles: int) -> tuple[float, float]:
    """Per recompile of a ``leaves``-leaf argument, one leaf changed each time: otel_jax's
    own seconds (signature, diff, span, metrics, log line) and the bytes its history
    keeps (signatures and entries; parts shared between them counted once)."""
    params = {f"layer_{i}": {"w": jnp.zeros((2,)), "b": jnp.zeros(())}
              for i in range(leaves // 2)}

    @jax.jit
    def count(params):
        return params["layer_0"]["b"] + 1

    # Made before measuring: a new shape's jnp.zeros is itself a (small) compile of
    # JAX's own, whose record would be measured beside the one under study.
    changed = iter([jnp.zeros((n,)) for n in range(3, 3 + 2 * recompiles + 2)])
    install()
    try:
        count(params)

        def recompile() -> None:
            params[f"layer_{leaves // 4}"]["w"] = next(changed)
            count(params)

        own_time(recompile, 1)  # first-use costs land here
        history = ENGINE.history._functions[otel_jax._function_info(count).key]
        before = deep_size(history)
        # As in (d): the collector's pauses scale with the whole heap (JAX's
        # 10,000 arrays included) and land on whichever code allocates.
        gc.collect()
        gc.disable()
        try:
            spent = own_time(recompile, recompiles)
        finally:
            gc.enable()
        kept = (deep_size(history) - before) / recompiles
    finally:
        otel_jax.uninstall()
    return statistics.median(spent), kept


def timing(fn: Callable, record: Callable[[float], object]) -> Callable:
    """``fn``, handing the seconds each call took to ``record``."""
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            record(time.perf_counter() - t0)
    return wrapper


def own_time(work: Callable[[], None], times: int) -> list[float]:
    """Seconds otel_jax itself spends per compile of ``work``, on whichever thread: what it
    reads inside the jit call (the signature, the caller's frame), then the record and its
    delivery (spans, metrics, log lines), made on the background thread by default."""
    captures: list[float] = []
    builds: list[float] = []
    delivers: list[float] = []
    originals = ENGINE._capture, ENGINE._build_record, ENGINE._deliver
    ENGINE._capture = timing(originals[0], captures.append)  # type: ignore[method-assign]
    ENGINE._build_record = timing(originals[1], builds.append)  # type: ignore[method-assign]
    ENGINE._deliver = timing(originals[2], delivers.append)  # type: ignore[method-assign]
    try:
        for _ in range(times):
            work()
        otel_jax.flush()  # the records made on the background thread are timed there
    finally:
        del ENGINE._capture, ENGINE._build_record, ENGINE._deliver
    # One background thread makes and delivers records in the order they were captured.
    return [c + b + d for c, b, d in zip(captures, builds, delivers)]


def own_time_per_compile(probe: Callable, compiles: int) -> float:
    """Median seconds otel_jax itself spends per compile (record + span + metric + log).

    The garbage collector is paused while measuring: its pauses scale with the
    whole heap (JAX's caches of 5,000 functions included) and would land on
    whichever code happens to allocate, not on work that otel_jax does.
    """
    sizes = iter(range(1, compiles + 1))
    gc.collect()
    gc.disable()
    try:
        spent = own_time(lambda: probe(jnp.ones(next(sizes))), compiles)
    finally:
        gc.enable()
    return statistics.median(spent)


@jax.jit
def probe_sdk(x):  # the same work again, with the OpenTelemetry SDK's calls timed
    return x * 2 + 1


def sdk_time_per_compile(probe: Callable, compiles: int) -> float:
    """Mean seconds per compile spent inside the OpenTelemetry SDK's span and instrument
    calls (start, end, add, record): the part of (d) that emitting the contract's four
    spans and its metrics costs whoever emits them."""
    from opentelemetry.sdk.metrics._internal import instrument
    from opentelemetry.sdk.trace import Span, Tracer

    spent: list[float] = []
    patched = [(Tracer, "start_span"), (Span, "end"), (instrument._Counter, "add"),
               (instrument._Histogram, "record")]
    originals = [getattr(cls, name) for cls, name in patched]
    for (cls, name), fn in zip(patched, originals):
        setattr(cls, name, timing(fn, spent.append))
    sizes = iter(range(1, compiles + 1))
    gc.collect()
    gc.disable()
    try:
        for _ in range(compiles):
            probe(jnp.ones(next(sizes)))
    finally:
        gc.enable()
        for (cls, name), fn in zip(patched, originals):
            setattr(cls, name, fn)
    return sum(spent) / compiles


def bench_scaling(others: int, compiles: int) -> tuple[float, float, float]:
    install()
    try:
        own_time_per_compile(probe_warmup, compiles)  # first-use costs land here
        before = own_time_per_compile(probe_before, compiles)
        sdk = sdk_time_per_compile(probe_sdk, compiles)
        for i in range(others):
            jax.jit(lambda x, i=i: x + i)(1.0)  # noqa: B023 - one new function each
        after = own_time_per_compile(probe_after, compiles)
    finally:
        otel_jax.uninstall()
    return before, after, sdk


_STEP_LOOP = textwrap.dedent("""
    import statistics, sys, time
    import otel_jax
    otel_jax.install(log_output=None)
    import jax, jax.numpy as jnp
    from opentelemetry import trace

    tracer = trace.get_tracer("bench")

    @jax.jit
    def step(w, x):
        return w - 0.01 * (x.T @ (x @ w))

    w = jnp.ones((512, 256))
    times = []
    for i in range(int(sys.argv[1])):
        x = jnp.ones((256 + i // 50, 512))  # a new shape every 50 steps: a recompile
        t0 = time.perf_counter()
        with tracer.start_as_current_span("train_step"):
            w = step(w, x).block_until_ready()
        times.append(time.perf_counter() - t0)
    print(statistics.median(times))
""")


def no_loopback() -> str:
    """Why no TCP socket can listen on 127.0.0.1 here ("" where one can): (e) and (i) need
    one, and some sandboxed accelerator machines allow none, not even on the loopback."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
    except OSError as exc:
        return f"no TCP socket on 127.0.0.1 here ({exc!r})"
    return ""


def bench_collector_down(steps: int) -> tuple[float, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing will listen there
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_BSP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="1000")

    def median_step(extra: dict[str, str]) -> float:
        out = subprocess.run([sys.executable, "-c", _STEP_LOOP, str(steps)],
                             env={**env, **extra}, capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    down_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed}"}
    nowhere, down = float("inf"), float("inf")
    for _ in range(3):  # alternate, keep each side's best run
        nowhere = min(nowhere, median_step({}))
        down = min(down, median_step(down_env))
    return nowhere, down


class SlowRepr:
    """A static argument hashed by value whose ``__repr__`` takes ``REPR_S`` seconds."""

    REPR_S = 0.2
    calls = 0

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __hash__(self) -> int:
        return hash(self.seed)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlowRepr) and other.seed == self.seed

    def __repr__(self) -> str:
        SlowRepr.calls += 1
        time.sleep(self.REPR_S)
        return f"SlowRepr(seed={self.seed})"


def bench_slow_repr(shapes: int, rounds: int) -> tuple[float, float, int]:
    seeds = iter(range(10**6))

    def timed() -> float:
        def scaled(x, cfg):  # a new function object each time: compiles from scratch
            return x * cfg.seed

        layer = jax.jit(scaled, static_argnums=1)
        cfg = SlowRepr(next(seeds))  # a new value each round: nothing cached by value
        t0 = time.perf_counter()
        for n in range(1, shapes + 1):
            layer(jnp.ones((n, 4)), cfg).block_until_ready()
        return time.perf_counter() - t0

    timed()
    off, on = alternate(timed, timed, rounds)
    return off, on, SlowRepr.calls


def bench_fingerprints(ops: int, compiles: int) -> tuple[float, float, float]:
    """Median ms of the signature fingerprint, of the program fingerprint, and of the
    compile, for a program of about ``ops`` operations."""
    from otel_jax._capture import _fingerprint
    from otel_jax._capture._jax import _program
    from otel_jax._pipeline import _assemble

    spent: dict[str, list[float]] = {"sig": [], "prog": []}
    real_sig, real_prog = _fingerprint.of_signature, _program.program_digest

    def body(x):  # type: ignore[no-untyped-def]
        for i in range(ops // 2):
            x = jnp.sin(x) * (1.0 + i * 1e-6)
        return x

    install()
    sink = otel_jax.testing.CompileRecorder(include_eager=True)
    ENGINE.add_emitter(sink)
    _assemble._fingerprint.of_signature = timing(real_sig, spent["sig"].append)  # type: ignore[assignment]
    _assemble._program.program_digest = timing(real_prog, spent["prog"].append)  # type: ignore[assignment]
    # The program fingerprint is taken where something compares it (several ranks, a
    # persistent cache): here as in a multi-process job.
    real_coordination = _assemble._coordination.coordination
    _assemble._coordination.coordination = lambda: True  # type: ignore[assignment]
    cross_rank = ENGINE.cross_rank.on_divergence
    ENGINE.cross_rank.on_divergence = "off"
    try:
        f = jax.jit(body)
        for n in range(compiles):
            f(jnp.ones((n + 3,)))
    finally:
        _assemble._fingerprint.of_signature = real_sig  # type: ignore[assignment]
        _assemble._program.program_digest = real_prog  # type: ignore[assignment]
        _assemble._coordination.coordination = real_coordination  # type: ignore[assignment]
        ENGINE.cross_rank.on_divergence = cross_rank
        ENGINE.remove_emitter(sink)
        otel_jax.uninstall()
    return (statistics.median(spent["sig"]) * 1e3, statistics.median(spent["prog"]) * 1e3,
            statistics.median(r.compile_s for r in sink.records) * 1e3)


_CROSS_RANK_WORKER = textwrap.dedent("""
    import json, sys, time
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    rank, port, compiles = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=rank)
    import jax.numpy as jnp
    import otel_jax
    from otel_jax._pipeline._engine import ENGINE
    from jax._src import distributed

    own = []
    real = ENGINE.cross_rank.on_compile
    def on_compile(record, link):
        t = time.perf_counter()
        try:
            return real(record, link)
        finally:
            own.append(time.perf_counter() - t)
    ENGINE.cross_rank.on_compile = on_compile
    from otel_jax._fleet import _ranks_protocol, _ranks_transport
    background = [0.0]
    def timed(fn):
        def wrapper(*args, **kwargs):
            t = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                background[0] += time.thread_time() - t
        return wrapper
    # Its CPU, not its blocking waits: publishing an entry, and driving a compile's
    # verdict (the blocking read of it costs this thread no CPU while it waits).
    _ranks_protocol.RankProtocol.publish = timed(_ranks_protocol.RankProtocol.publish)
    _ranks_transport.Channel.drive = timed(_ranks_transport.Channel.drive)
    f = jax.jit(lambda x: jnp.tanh(x) * 2 + 1)
    size = [1]
    def loop(mode):
        otel_jax.install(log_output=None, on_divergence=mode, storm_threshold=10**6)
        distributed.global_state.client.wait_at_barrier(f"bench-{mode}-{size[0]}", 60_000)
        t = time.perf_counter()
        for _ in range(compiles):
            size[0] += 1
            f(jnp.ones((size[0],))).block_until_ready()
        spent = (time.perf_counter() - t) / compiles
        x = jnp.ones((size[0],))
        t = time.perf_counter()
        for _ in range(1000):
            f(x)
        hit = (time.perf_counter() - t) / 1000
        otel_jax.uninstall()
        return spent, hit
    best = {"off": float("inf"), "log": float("inf")}
    hits = []
    for i in range(4):
        for mode in (("off", "log") if i % 2 else ("log", "off")):
            spent, hit = loop(mode)
            best[mode] = min(best[mode], spent)
            hits.append(hit)
    own = sorted(own)
    print("RESULT " + json.dumps([best["off"], best["log"], own[len(own) // 2],
                                  min(hits), background[0] / len(own)]), flush=True)
    distributed.global_state.client.wait_at_barrier("bench-end", 60_000)
""")


def bench_cross_rank(compiles: int) -> tuple[float, float, float, float, float]:
    """Seconds per compile off / on, the check's own seconds per compile on the compiling
    thread, a cache hit, and the CPU seconds per compile of its thread (publish, reads)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([sys.executable, "-c", _CROSS_RANK_WORKER, str(r), str(port),
                               str(compiles)], stdout=subprocess.PIPE, text=True, env=env)
             for r in (0, 1)]
    results = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=600)
            line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
            results.append(json.loads(line[len("RESULT "):]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    off, on, own, hit, background = (statistics.mean(r[i] for r in results) for i in range(5))
    return off, on, own, hit, background
def bench_ledger(compiles: int, rounds: int) -> tuple[float, float, float, int, float]:
    """(j) The compile ledger: otel_jax's work per compile with it off and on (the
    persistent cache on for both), the ledger's own median per compile, its calls on
    persistent-cache hits, and the seconds to read a full ledger (2 x 2 MiB) once."""
    import shutil
    import tempfile

    from jax._src import compilation_cache

    from otel_jax._fleet import _ledger

    root = tempfile.mkdtemp(prefix="otel-jax-bench-")
    saved = {name: getattr(jax.config, name) for name in (
        "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes")}
    jax.config.update("jax_compilation_cache_dir", os.path.join(root, "cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()  # the earlier measurements ran with the cache off
    spent: list[float] = []
    note = ENGINE.ledger.note

    def timed_note(*args):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        result = note(*args)
        spent.append(time.perf_counter() - t0)
        return result

    ENGINE.ledger.note = timed_note  # type: ignore[method-assign]
    try:
        own = {"off": float("inf"), "on": float("inf")}
        ledger_calls: list[float] = []
        for r in range(rounds):  # alternating sides; each round compiles new programs
            for side in (("off", "on") if r % 2 == 0 else ("on", "off")):
                otel_jax.install(tracer_provider=_tracer_provider,
                                 meter_provider=_meter_provider, log_output=devnull(),
                                 ledger_path=None if side == "on" else False)

                def body(x, scale=2.0 + 2 * r + (side == "on")):  # type: ignore[no-untyped-def]
                    return x * scale + 1

                spent.clear()
                own[side] = min(own[side], own_time_per_compile(jax.jit(body), compiles))
                ledger_calls += spent
                otel_jax.uninstall()
        ledger_own = statistics.median(ledger_calls)
        # The last programs again in a fresh in-memory cache: served from the disk cache.
        install()
        spent.clear()
        jax.clear_caches()
        probe = jax.jit(body)
        for n in range(1, compiles + 1):
            probe(jnp.ones(n))
        calls_on_hits = len(spent)
        otel_jax.uninstall()
        path = os.path.join(root, "full.jsonl")
        with open(ENGINE.ledger.path() or "", "rb") as f:
            line = f.readline()
        for name in (path + ".1", path):
            with open(name, "wb") as f:
                f.write(line * (_ledger.MAX_BYTES // len(line)))
        t0 = time.perf_counter()
        _ledger.Ledger(ENGINE.failopen)._load(path)
        read_s = time.perf_counter() - t0
    finally:
        del ENGINE.ledger.note
        for name, value in saved.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
        shutil.rmtree(root, ignore_errors=True)
    return own["off"], own["on"], ledger_own, calls_on_hits, read_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", default="abcdefghij", help="which measurements, e.g. 'bc'")
    args = parser.parse_args()
    q = args.quick
    print(f"jax {jax.__version__}, otel_jax {otel_jax.__version__}, "
          f"{jax.devices()[0].platform}, {os.cpu_count()} CPUs\n")

    if "a" in args.only:
        off, on = bench_cache_hit(calls=2_000 if q else 20_000, rounds=2 if q else 60)
        print(f"(a) cache-hit call      off {off * 1e6:7.3f} us   on {on * 1e6:7.3f} us   "
              f"ratio {on / off:.3f}  (target <= 1.02)", flush=True)
    if "b" in args.only:
        n = 8 if q else 60
        off, on = bench_compile_loop(shapes=n, rounds=1 if q else 5)
        print(f"(b) compile loop x{n:<3}   off {off:7.3f} s    on {on:7.3f} s    "
              f"ratio {on / off:.3f}  (target <= 1.05)", flush=True)
    if "c" in args.only:
        leaves = 1_000 if q else 10_000
        d = bench_diff(leaves, repeats=5 if q else 50)
        print(f"(c) cause diff, {leaves:,} leaves: {d * 1e3:.3f} ms  (target <= 1 ms)",
              flush=True)
    if "d" in args.only:
        others = 50 if q else 5_000
        before, after, sdk = bench_scaling(others, compiles=5 if q else 60)
        print(f"(d) otel_jax work per compile: {before * 1e3:.3f} ms with 0 other functions, "
              f"{after * 1e3:.3f} ms with {others:,}  ratio {after / before:.3f}  "
              f"(must not grow; target <= 0.4 ms); inside the OpenTelemetry SDK's span and "
              f"metric calls: {sdk * 1e3:.3f} ms of it", flush=True)
    loopback = no_loopback()
    for letter in "ei":
        if letter in args.only and loopback:
            print(f"({letter}) not run: {loopback}", flush=True)
    if "e" in args.only and not loopback:
        nowhere, down = bench_collector_down(steps=100 if q else 1000)
        print(f"(e) step time, collector down vs no exporter: {down * 1e3:.3f} ms vs "
              f"{nowhere * 1e3:.3f} ms  ratio {down / nowhere:.3f}  (target ~1.0)", flush=True)
    if "f" in args.only:
        leaves = 1_000 if q else 10_000
        spent, kept = bench_big_recompile(leaves, recompiles=4 if q else 12)
        print(f"(f) recompile of a {leaves:,}-leaf argument: otel_jax work {spent * 1e3:.3f} ms "
              f"(target <= 2 ms), history {kept / 2**20:.4f} MiB per kept compile "
              "(target <= 0.1 MiB)", flush=True)
    if "g" in args.only:
        n = 4 if q else 10
        off, on, calls = bench_slow_repr(shapes=n, rounds=2 if q else 5)
        loops = 1 + 2 * (2 if q else 5)
        print(f"(g) compile loop x{n:<3} with a {SlowRepr.REPR_S} s __repr__ static: off "
              f"{off:7.3f} s    on {on:7.3f} s    {(on - off) / n * 1e3:.1f} ms more per "
              f"compile  ({calls} repr call(s) in {loops} loops of {n} compiles; before: one "
              "per compile)", flush=True)
    if "h" in args.only:
        for ops in (10, 2_000) if q else (10, 1_000, 20_000):
            sig_ms, prog_ms, compile_ms = bench_fingerprints(ops, compiles=3 if q else 8)
            print(f"(h) fingerprints of a {ops:,}-op program: signature {sig_ms:.3f} ms, "
                  f"program {prog_ms:.3f} ms per compile of {compile_ms:.1f} ms  "
                  f"({(sig_ms + prog_ms) / compile_ms * 100:.2f} % of the compile)", flush=True)
    if "i" in args.only and not loopback:
        off, on, own, hit, background = bench_cross_rank(compiles=10 if q else 40)
        print(f"(i) 2-process job, compile loop: off {off * 1e3:.2f} ms, cross-rank check on "
              f"{on * 1e3:.2f} ms per compile ({(on - off) * 1e3:+.2f} ms, noise included); "
              f"its work on the compiling thread {own * 1e3:.3f} ms, CPU of its own thread "
              f"{background * 1e3:.3f} ms per compile (target < 2 ms); cache hit "
              f"{hit * 1e6:.2f} us either way (no code on that path)", flush=True)
    if "j" in args.only:
        n = 8 if q else 40
        off, on, ledger, hits, read_s = bench_ledger(compiles=n, rounds=2 if q else 6)
        print(f"(j) persistent cache on, work per compile: ledger off {off * 1e3:.3f} ms, "
              f"on {on * 1e3:.3f} ms; the ledger's own {ledger * 1e3:.3f} ms (target < 1 ms), "
              f"{hits} call(s) on {n} cache hits (target 0); reading a full ledger "
              f"(2 x {_ledger_mib()} MiB) once: {read_s * 1e3:.0f} ms", flush=True)


def _ledger_mib() -> int:
    from otel_jax._fleet import _ledger

    return _ledger.MAX_BYTES >> 20


if __name__ == "__main__":
    main()
