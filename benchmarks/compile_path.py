"""What otel_jax adds to a compile where users feel it: the whole first call, end to end.

Each loop times the first call of a jitted function (trace, lower, backend compile, run)
with otel_jax off and on, in one process, as PAIRS: each pair is one compile off and
one on, the side that goes first alternating from pair to pair, so that drift and bursts
of load on a shared machine hit both sides alike. The toggle (``uninstall()`` /
``install()``, which also waits for what otel_jax still has to emit) and a garbage
collection happen before each timed call, never inside it.

(1) a new ``jax.jit(f)`` per call of a small ``f`` (a new function object each time);
(2) one jitted ``f``, a new input shape per call;
(3) eager code: new shapes of ``jnp.sin(x) * 2 + 1`` then ``.sum()`` (about 6 of JAX's
    eager op-by-op compiles per call);
(4) a new shape per call as in (2), with the OpenTelemetry SDK configured by the
    application (global providers, an in-memory span exporter behind a simple processor)
    and otel_jax installed without providers of its own;
(5) a new shape per call as in (2) (a program with temporaries), otel_jax installed on
    both sides, XLA's memory analysis of the program read (on) or not (off: the
    executable the compile returned is dropped before its record is made): what reading
    it adds to the compile;
(6) one jitted ``f`` given a new static value per call (a position passed static: a
    run of new values, the hazard analysis's run-length case), otel_jax installed on both
    sides, hazards on or off (``ENGINE.hazards``): what deciding hazards adds to a
    recompile, the compile and its record made by the time the next pair begins;
(8) one jitted function with a Python loop of 200 passes (1,000 operations), a new shape
    per call, otel_jax installed on both sides, its lowered program analysed (on) or not
    (``ENGINE.programs``): what the analysis adds to the compile, and the analysis's own
    CPU time on the thread that makes the record (the emitting thread by default);
(7) the same function's cache hits (a static value seen before), hazards on or off, per
    call in microseconds (1,000 calls a side): what hazards add to a call that does not
    compile (nothing: no wrapper on the call path).

otel_jax is installed at its defaults with an SDK ``TracerProvider`` and a
``BatchSpanProcessor`` to a discarding exporter, a ``MeterProvider`` with an
``InMemoryMetricReader``, and the JSON log lines to ``/dev/null``
(``benchmarks/overhead.py``'s ``install()``).

For each loop: the median time off and on, the median of the per-pair differences (ms),
the ratio of the medians and the median of the per-pair ratios, and the spread of the
per-pair differences (interquartile range, min-max); and the same for the CPU time of the
calling thread alone, the steadier figure on a loaded machine: the backend compile runs
on XLA's threads, and every other process's load moves the wall clock, while what
otel_jax does on the compiling thread shows in that thread's CPU time. Then a breakdown of one
instrumented run of (2) (timers in this file only): time inside otel_jax's
``jax.monitoring`` listeners, time in its dispatch-miss hooks (their own work, without
what JAX does inside them) and, measured by the same timers, the time of emitting
on otel_jax's background thread when it emits there, and the time of reading XLA's memory
analysis, inside the jit call (on the compiling thread) and after it, and the hazard
analysis per recompile (where records are made: the background thread by default), over a
run of new static values as in (6).

    python benchmarks/compile_path.py              # 60 pairs per loop
    python benchmarks/compile_path.py --repeat 3   # the whole measurement three times
    python benchmarks/compile_path.py --quick      # a smoke run
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead

import otel_jax
from otel_jax._capture._jax import _compile_entry, _memory, _miss_path
from otel_jax._explain import _hazards
from otel_jax._pipeline import _assemble
from otel_jax._pipeline._engine import ENGINE

# Input sizes never repeat in a process: every timed call is a first call.
_sizes = itertools.count(3)


def _array() -> np.ndarray:
    # A NumPy array: making it compiles nothing (jnp.ones of a new shape would).
    return np.ones(next(_sizes), np.float32)


def make_new_function() -> Callable[[], Callable[[], Any]]:
    """Loop (1): a new ``jax.jit(f)`` of a new small function object per call."""
    x = jnp.ones(8)

    def prepare() -> Callable[[], Any]:
        def small(x):  # a new function object: JAX's caches do not know it
            return jnp.tanh(x) * 2 + 1

        jitted = jax.jit(small)
        return lambda: jitted(x).block_until_ready()

    return prepare


def make_new_shape() -> Callable[[], Callable[[], Any]]:
    """Loops (2) and (4): one jitted function, a new input shape per call."""
    @jax.jit
    def shaped(x):
        return jnp.tanh(x) * 2 + 1

    def prepare() -> Callable[[], Any]:
        x = _array()
        return lambda: shaped(x).block_until_ready()

    return prepare


def make_new_shape_with_temporaries() -> Callable[[], Callable[[], Any]]:
    """Loop (5): one jitted function whose program has temporaries, a new shape per call."""
    @jax.jit
    def outer(x):
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]  # temporaries on every XLA

    def prepare() -> Callable[[], Any]:
        x = _array()
        return lambda: outer(x).block_until_ready()

    return prepare


def make_new_static() -> Callable[[], Callable[[], Any]]:
    """Loop (6): one jitted function, a new static value (a position) per call."""
    @functools.partial(jax.jit, static_argnames="pos")
    def decode(x, pos):
        return jnp.tanh(x[: pos % 7 + 1]).sum() + pos

    x = jnp.ones(8)
    positions = itertools.count()

    def prepare() -> Callable[[], Any]:
        pos = next(positions)
        return lambda: decode(x, pos=pos).block_until_ready()

    return prepare


def make_new_unrolled() -> Callable[[], Callable[[], Any]]:
    """Loop (8): one jitted function with a Python loop of 200 passes (1,000 operations:
    a program the analysis names), a new input shape per call."""
    @jax.jit
    def unrolled(x):
        for _ in range(200):
            x = jnp.sin(x) * 0.5 + 1.0
        return x.sum()

    def prepare() -> Callable[[], Any]:
        x = _array()
        return lambda: unrolled(x).block_until_ready()

    return prepare


def make_eager() -> Callable[[], Callable[[], Any]]:
    """Loop (3): eager op-by-op code at a new shape per call."""
    def prepare() -> Callable[[], Any]:
        x = _array()
        return lambda: (jnp.sin(x) * 2 + 1).sum().block_until_ready()

    return prepare


def timed_call(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def timed_call_cpu(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds of ``call``, and the CPU seconds of the calling thread in it."""
    w0, c0 = time.perf_counter(), time.thread_time()
    call()
    return time.perf_counter() - w0, time.thread_time() - c0


Pair = tuple[float, float]  # wall seconds, the compiling thread's CPU seconds


def paired(prepare: Callable[[], Callable[[], Any]], pairs: int,
           install: Callable[[], None]) -> tuple[list[Pair], list[Pair]]:
    """Seconds of each side's first call, pair by pair (off first in even pairs)."""
    offs: list[Pair] = []
    ons: list[Pair] = []
    for i in range(pairs):
        for on in ((False, True) if i % 2 == 0 else (True, False)):
            call = prepare()
            if on:
                install()
            gc.collect()
            elapsed = timed_call_cpu(call)
            if on:
                otel_jax.uninstall()  # waits for what is still being emitted: untimed
            (ons if on else offs).append(elapsed)
    return offs, ons


def paired_installed(prepare: Callable[[], Callable[[], Any]], pairs: int,
                     install: Callable[[], None], switch: Callable[[bool], None],
                     ) -> tuple[list[Pair], list[Pair]]:
    """Installed on both sides; what ``switch`` turns on, on one side only (off first in
    even pairs). What otel_jax still had to make and emit is flushed before each timed
    call, never inside it."""
    offs: list[Pair] = []
    ons: list[Pair] = []
    install()
    try:
        for i in range(pairs):
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                call = prepare()
                switch(on)
                otel_jax.flush()
                gc.collect()
                elapsed = timed_call_cpu(call)
                (ons if on else offs).append(elapsed)
    finally:
        switch(True)
        otel_jax.uninstall()
    return offs, ons


def paired_memory(prepare: Callable[[], Callable[[], Any]], pairs: int,
                  install: Callable[[], None]) -> tuple[list[Pair], list[Pair]]:
    """Loop (5): the memory analysis read on one side only."""
    real = _compile_entry.take_executable

    def dropped() -> Any:
        real()  # taken off the thread as always, then not handed on: nothing is read
        return None

    def switch(on: bool) -> None:
        setattr(_compile_entry, "take_executable", real if on else dropped)

    return paired_installed(prepare, pairs, install, switch)


def paired_hazards(prepare: Callable[[], Callable[[], Any]], pairs: int,
                   install: Callable[[], None]) -> tuple[list[Pair], list[Pair]]:
    """Loop (6): hazards looked for on one side only."""
    return paired_installed(prepare, pairs, install,
                            lambda on: setattr(ENGINE, "hazards", on))


#: Loop (8): the thread CPU seconds of each program analysis, wherever records are made.
PROGRAM_ANALYSES: list[float] = []


def paired_programs(prepare: Callable[[], Callable[[], Any]], pairs: int,
                    install: Callable[[], None]) -> tuple[list[Pair], list[Pair]]:
    """Loop (8): the lowered program analysed on one side only (``ENGINE.programs``); the
    analysis itself timed on the thread that makes the record (the emitting thread by
    default), per compile."""
    real = _assemble._analyse

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            PROGRAM_ANALYSES.append(time.thread_time() - t0)

    _assemble._analyse = timed
    try:
        return paired_installed(prepare, pairs, install,
                                lambda on: setattr(ENGINE, "programs", on))
    finally:
        _assemble._analyse = real


def cache_hits(pairs: int, calls: int = 1000) -> Result:
    """Loop (7): seconds per cache-hit call of a function with a static argument, hazards
    off and on (installed on both sides), the side that goes first alternating."""
    @functools.partial(jax.jit, static_argnames="pos")
    def decode(x, pos):
        return jnp.tanh(x[: pos + 1]).sum()

    x = jnp.ones(8)
    overhead.install()
    try:
        for pos in range(3):
            decode(x, pos=pos).block_until_ready()  # compiled once each: then only hits
        otel_jax.flush()
        offs: list[float] = []
        ons: list[float] = []
        for i in range(pairs):
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                ENGINE.hazards = on
                gc.collect()
                t0 = time.perf_counter()
                for k in range(calls):
                    decode(x, pos=k % 3)
                (ons if on else offs).append((time.perf_counter() - t0) / calls)
    finally:
        ENGINE.hazards = True
        otel_jax.uninstall()
    return Result(offs, ons)


def thread_clock_tick() -> float:
    """The smallest step the calling thread's CPU clock took over 50 ms of work, in
    seconds; 0 where it did not advance. Sandboxed hosts differ: on one TPU host
    ``time.thread_time()`` advanced in 10 ms ticks (a call shorter than that reads 0 or
    10 ms), elsewhere it never advances."""
    last, tick = time.thread_time(), 0.0
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        now = time.thread_time()
        if now > last:
            tick = now - last if tick == 0.0 else min(tick, now - last)
            last = now
    return tick


def clock_text(tick: float) -> str:
    """How the thread CPU clock reads here, for a benchmark's first line."""
    if tick == 0.0:
        return "the thread CPU clock reads 0 here: CPU times not measured"
    if tick >= 1e-3:
        return (f"the thread CPU clock ticks in {tick * 1e3:.0f} ms steps here: CPU "
                "differences below that are not resolved")
    return "the thread CPU clock runs"


class Result:
    """One loop's pairs, summarised. A clock that read 0 (a CPU clock that does not run
    here) is counted in ``zero_reads`` and never divided by: the ratios leave out the pairs
    whose off side read 0, and are ``None`` where every one did."""

    def __init__(self, offs: list[float], ons: list[float]) -> None:
        self.offs, self.ons = offs, ons
        self.diffs = [b - a for a, b in zip(offs, ons)]
        self.off = statistics.median(offs)
        self.on = statistics.median(ons)
        self.diff = statistics.median(self.diffs)
        self.zero_reads = sum(1 for t in (*offs, *ons) if t <= 0)
        self.ratio: float | None = self.on / self.off if self.off > 0 else None
        per_pair = [b / a for a, b in zip(offs, ons) if a > 0]
        self.pair_ratio: float | None = statistics.median(per_pair) if per_pair else None
        q = statistics.quantiles(self.diffs, n=4) if len(self.diffs) > 1 else self.diffs * 3
        self.q1, self.q3 = q[0], q[2]

    def line(self, label: str) -> str:
        ms = 1e3
        zero = (f"  (the clock read 0 in {self.zero_reads} of {2 * len(self.offs)} timings)"
                if self.zero_reads else "")
        if self.ratio is None:
            return f"{label:<34} not measured{zero}"
        pair = f"{self.pair_ratio:.3f}" if self.pair_ratio is not None else "n/a"
        return (f"{label:<34} off {self.off * ms:8.2f} ms  on {self.on * ms:8.2f} ms  "
                f"added {self.diff * ms:+6.2f} ms  ratio {self.ratio:.3f} "
                f"(per pair {pair})  IQR of added "
                f"[{self.q1 * ms:+.2f}, {self.q3 * ms:+.2f}] ms, min-max "
                f"[{min(self.diffs) * ms:+.2f}, {max(self.diffs) * ms:+.2f}] ms{zero}")


# --- loop (4): the SDK configured by the application ---------------------------------------

_app_spans = InMemorySpanExporter()


def configure_application_sdk() -> None:
    """Global providers, as an application configures them (once per process)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_app_spans))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def install_with_application_sdk() -> None:
    _app_spans.clear()  # untimed: what the previous pair exported is dropped here
    otel_jax.install(log_output=overhead.devnull())


# --- the breakdown: timers around otel_jax's listeners and hooks ----------------------------

class Timers:
    """CPU seconds of the threads running otel_jax's listeners, its hooks' own work and
    its emitting thread's jobs, added up while armed; installed by patching, this file
    only. CPU time, not the wall clock: a wait for the GIL held by another thread is not
    work of the code waiting."""

    def __init__(self) -> None:
        self.listeners = 0.0
        self.hooks = 0.0
        self.background = 0.0
        self.memory_compiling = 0.0  # reading XLA's memory analysis, inside the jit calls
        self.memory_elsewhere = 0.0  # ... after them: the background thread, a flush
        self.in_call = False  # a timed jit call is running on the compiling thread
        self.hazards = 0.0  # the hazard analysis, wherever records are made
        self.hazard_calls = 0
        self._saved: list[tuple[Any, str, Any]] = []

    def _timed(self, fn: Callable[..., Any], where: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(self, where, getattr(self, where) + time.thread_time() - t0)
        return timed

    def _timed_memory(self, read: Callable[..., Any], compiling: threading.Thread,
                      ) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return read(*args, **kwargs)
            finally:
                inside = self.in_call and threading.current_thread() is compiling
                where = "memory_compiling" if inside else "memory_elsewhere"
                setattr(self, where, getattr(self, where) + time.thread_time() - t0)
        return timed

    def _own(self, make_wrapper: Callable[..., Any]) -> Callable[..., Any]:
        """``make_wrapper``, whose wrapper's time less its original's counts as hooks."""
        timers = self

        def make(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            def inner(*a: Any, **k: Any) -> Any:
                t0 = time.thread_time()
                try:
                    return original(*a, **k)
                finally:
                    timers.hooks -= time.thread_time() - t0

            wrapper = make_wrapper(inner, *args, **kwargs)
            return timers._outer(wrapper)
        return make

    def _outer(self, wrapper: Callable[..., Any]) -> Callable[..., Any]:
        timers = self

        def outer(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return wrapper(*a, **k)
            finally:
                timers.hooks += time.thread_time() - t0
        return outer

    def _own_infer_params(self) -> Callable[..., Any]:
        """The trace entry's wrapper asks whether JAX's dispatch miss called it (its
        caller's code): the timer keeps that answer by calling it through a function of
        its own that it names as the miss path, only for calls from the real one."""
        timers = self
        real = _miss_path.wrap_infer_params

        def make(original: Callable[..., Any], miss_path: Any = None,
                 on_trace_only: Any = None) -> Any:
            def inner(fun: Any, ji: Any, args: Any, kwargs: Any) -> Any:
                t0 = time.thread_time()
                try:
                    return original(fun, ji, args, kwargs)
                finally:
                    timers.hooks -= time.thread_time() - t0

            def via_miss(fun: Any, ji: Any, args: Any, kwargs: Any) -> Any:
                return wrapper(fun, ji, args, kwargs)

            def via_other(fun: Any, ji: Any, args: Any, kwargs: Any) -> Any:
                return wrapper(fun, ji, args, kwargs)

            wrapper = real(inner, via_miss.__code__ if miss_path is not None else None,
                           on_trace_only)

            def outer(fun: Any, ji: Any, args: Any, kwargs: Any) -> Any:
                t0 = time.thread_time()
                try:
                    via = via_miss if sys._getframe(1).f_code is miss_path else via_other
                    return via(fun, ji, args, kwargs)
                finally:
                    timers.hooks += time.thread_time() - t0
            return outer
        return make

    def arm(self) -> None:
        """Time from the next install() on (the hooks are made at install)."""
        patches = [
            (_miss_path, "wrap_infer_params", self._own_infer_params()),
            (_miss_path, "wrap_run_python_pjit", self._own(_miss_path.wrap_run_python_pjit)),
            (_miss_path, "wrap_call_impl_python",
             self._own(_miss_path.wrap_call_impl_python)),
            (_compile_entry, "wrap_compile_or_get_cached",
             self._own(_compile_entry.wrap_compile_or_get_cached)),
        ]
        for name in ("_on_time_span", "_on_event", "_on_trace_only"):
            patches.append((ENGINE, name, self._timed(getattr(ENGINE, name), "listeners")))
        patches.append((_memory, "program_memory",
                        self._timed_memory(_memory.program_memory, threading.current_thread())))
        patches.append((_hazards, "hazards", self._timed_hazards(_hazards.hazards)))
        worker = _background_worker_class()
        if worker is not None:
            patches.append((worker, "_emit", self._timed_method(worker._emit)))
        for owner, name, value in patches:
            self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
            setattr(owner, name, value)

    def _timed_hazards(self, analysis: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t0 = time.thread_time()
            try:
                return analysis(*args)
            finally:
                self.hazards += time.thread_time() - t0
                self.hazard_calls += 1
        return timed

    def _timed_method(self, method: Callable[..., Any]) -> Callable[..., Any]:
        timers = self

        def timed(worker_self: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return method(worker_self, *args, **kwargs)
            finally:
                timers.background += time.thread_time() - t0
        return timed

    def disarm(self) -> None:
        for owner, name, value in reversed(self._saved):
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        self._saved.clear()


_MISSING = object()


def _background_worker_class() -> Any:
    """The class of otel_jax's emitting thread, where there is one."""
    try:
        from otel_jax._pipeline import _background
    except ImportError:
        return None
    return getattr(_background, "Worker", None)


def hazard_cost(compiles: int) -> tuple[float, int]:
    """CPU seconds of the hazard analysis per recompile over a run of new static values
    (loop (6)'s function), installed with hazards on; and how many times it ran."""
    prepare = make_new_static()
    timers = Timers()
    timers.arm()
    try:
        overhead.install()
        for _ in range(compiles):
            prepare()()
        otel_jax.flush()
        otel_jax.uninstall()
    finally:
        timers.disarm()
    return timers.hazards / max(1, timers.hazard_calls), timers.hazard_calls


def breakdown(compiles: int) -> tuple[float, float, float, float, float, float]:
    """Per compile of loop (2), installed: whole call, listeners, hooks' own work, the
    emitting thread's work (seconds; 0 when otel_jax emits on the compiling thread), and
    the time of reading XLA's memory analysis inside the jit calls (on the compiling
    thread) and after them (the background thread, or the flush that follows them)."""
    prepare = make_new_shape()
    timers = Timers()
    timers.arm()
    try:
        overhead.install()
        calls = [prepare() for _ in range(compiles)]
        gc.collect()
        timers.in_call = True
        try:
            total = sum(timed_call(call) for call in calls)
        finally:
            timers.in_call = False
        flush = getattr(otel_jax, "flush", None)
        if flush is not None:
            flush()
        otel_jax.uninstall()
    finally:
        timers.disarm()
    n = compiles
    return (total / n, timers.listeners / n, timers.hooks / n, timers.background / n,
            timers.memory_compiling / n, timers.memory_elsewhere / n)


LOOPS = (
    ("(1) new jax.jit(f) per call", make_new_function, overhead.install),
    ("(2) one jitted f, new shape", make_new_shape, overhead.install),
    ("(3) eager sin*2+1, sum, new shape", make_eager, overhead.install),
    ("(4) application's SDK, new shape", make_new_shape, install_with_application_sdk),
    ("(5) memory analysis, new shape", make_new_shape_with_temporaries, overhead.install),
    ("(6) hazards, new static value", make_new_static, overhead.install),
    ("(8) program analysis, unrolled loop", make_new_unrolled, overhead.install),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60, help="pairs per loop (default 60)")
    parser.add_argument("--repeat", type=int, default=1, help="whole measurements (default 1)")
    parser.add_argument("--only", default="12345678", help="which loops, e.g. '12'")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 6 pairs per loop")
    args = parser.parse_args()
    pairs = 6 if args.quick else args.pairs
    configure_application_sdk()
    tick = thread_clock_tick()
    clock = tick > 0.0
    print(f"jax {jax.__version__}, otel_jax {otel_jax.__version__}, "
          f"{jax.devices()[0].platform}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {pairs} pairs per loop; "
          f"{clock_text(tick)}\n", flush=True)
    for label, make, install in LOOPS:  # first-use costs (imports, caches) land here
        _pairs_of(label)(make(), 2, install)
    runs: dict[str, list[Result]] = {}
    cpus: dict[str, list[Result]] = {}
    for run in range(args.repeat):
        if args.repeat > 1:
            print(f"run {run + 1} of {args.repeat}", flush=True)
        for label, make, install in LOOPS:
            if label[1] not in args.only:
                continue
            offs, ons = _pairs_of(label)(make(), pairs, install)
            result = Result([w for w, _ in offs], [w for w, _ in ons])
            cpu = Result([c for _, c in offs], [c for _, c in ons])
            runs.setdefault(label, []).append(result)
            cpus.setdefault(label, []).append(cpu)
            print(result.line(label), flush=True)
            print(cpu.line("    compiling thread's CPU"), flush=True)
            if label.startswith("(8)") and PROGRAM_ANALYSES:
                print(f"    the analysis on the emitting thread: median "
                      f"{statistics.median(PROGRAM_ANALYSES) * 1e3:.2f} ms CPU per compile "
                      f"({len(PROGRAM_ANALYSES)} compiles)", flush=True)
                PROGRAM_ANALYSES.clear()
        if "7" in args.only:
            hits = cache_hits(pairs)
            print(_per_call_line("(7) hazards, cache hit (per call)", hits), flush=True)
        total, listeners, hooks, background, memory_here, memory_there = breakdown(
            12 if args.quick else 40)
        if clock:
            print(f"breakdown, loop (2) installed, per compile (CPU): whole call (wall) "
                  f"{total * 1e3:.2f} ms; "
                  f"inside otel_jax's listeners {listeners * 1e3:.3f} ms; its dispatch-miss "
                  f"hooks' own work {hooks * 1e3:.3f} ms; its emitting thread "
                  f"{background * 1e3:.3f} ms; reading XLA's memory analysis: inside the jit "
                  f"call {memory_here * 1e3:.3f} ms, after it {memory_there * 1e3:.3f} ms",
                  flush=True)
        else:  # its timers read the thread CPU clock
            print(f"breakdown, loop (2) installed: whole call (wall) {total * 1e3:.2f} ms "
                  "per compile; the rest not measured (the thread CPU clock reads 0 here)",
                  flush=True)
        if clock:
            per, calls = hazard_cost(12 if args.quick else 40)
            print(f"hazard analysis, loop (6) installed: {per * 1e6:.1f} µs (CPU) per "
                  f"recompile, over {calls} compiles", flush=True)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n", flush=True)
    if args.repeat > 1:
        print("over the runs (median added, ratio of medians, median per-pair ratio):")
        for label, results in runs.items():
            diffs = [r.diff * 1e3 for r in results]
            ratios = [r.ratio for r in results if r.ratio is not None]
            pair_ratios = [r.pair_ratio for r in results if r.pair_ratio is not None]
            cpu_diffs = [r.diff * 1e3 for r in cpus[label]]
            print(f"{label:<34} added {min(diffs):+.2f} to {max(diffs):+.2f} ms, ratio "
                  f"{_range(ratios)}, per pair {_range(pair_ratios)}; the compiling "
                  f"thread's CPU " + (f"{min(cpu_diffs):+.2f} to {max(cpu_diffs):+.2f} ms"
                                      if clock else "not measured (its clock reads 0)"))


def _per_call_line(label: str, result: Result) -> str:
    """A cache-hit loop's line: per call in microseconds."""
    us = 1e6
    return (f"{label:<34} off {result.off * us:8.2f} µs  on {result.on * us:8.2f} µs  "
            f"added {result.diff * us:+6.2f} µs  ratio {result.ratio or 0:.3f}  IQR of "
            f"added [{result.q1 * us:+.2f}, {result.q3 * us:+.2f}] µs, min-max "
            f"[{min(result.diffs) * us:+.2f}, {max(result.diffs) * us:+.2f}] µs")


def _range(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}" if values else "n/a"


def _pairs_of(label: str) -> Callable[..., tuple[list[Pair], list[Pair]]]:
    """How a loop's pairs are made: otel_jax off and on, or, for loop (5), the memory
    analysis read or not."""
    if label.startswith("(5)"):
        return paired_memory
    if label.startswith("(8)"):
        return paired_programs
    return paired_hazards if label.startswith("(6)") else paired


if __name__ == "__main__":
    main()
