"""Training steps: a span per step, a step-time histogram that says whether the step compiled.

``otel_jax.step()`` counts a step toward ``install(warmup_steps=...)``; used as
a context manager or decorator it also times the step. The step's span is the
current span while the step runs, so compile spans nest under it; the
engine adds each compile that happens inside it (on the same thread) to the
step's tally, and the step-duration histogram carries whether the step
compiled, so a dashboard can show that the slow step was the one that
recompiled.

Steps nest (a ``train_step`` inside an ``epoch`` step, a ``forward`` phase inside
a ``train_step``): a compile inside is charged to every step open around it on its
thread, since it slowed each of them. Only the outermost step is a training step:
a step opened inside another one on the same thread is a part of it, takes its
number and does not count toward warm-up.

Each step can also be one ``jax.step`` log line (:class:`StepLog`): every step that
compiled, and of the others at most one a second per step name, chosen when the step
begins (so a slow step is not more likely to be chosen than a fast one). Each line
carries how many steps of its name ended since the previous line and their seconds, so
a reader counts every step and sums every step second from the lines alone.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ContextDecorator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from .._core._vocab import Attr, Field, Metric

F = TypeVar("F", bound=Callable[..., Any])

#: Step times span a millisecond (a small CPU step) to minutes (a step that compiled).
STEP_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0, 600.0,
)
DEFAULT_NAME = "step"
#: A step that did not compile is logged at most once per this many seconds per step name.
SAMPLE_INTERVAL_S = 1.0
#: Step names tracked for sampling; a step of a name past these is logged only when it
#: compiled (a program does not have hundreds of step names; memory stays bounded).
MAX_SAMPLED_NAMES = 256


class StepCounter(Protocol):
    """What counts steps toward warm-up (the engine's policy)."""

    @property
    def steps(self) -> int: ...

    def step(self, n: int = 1) -> int: ...

    def begin_step(self, counted: bool) -> int: ...


@dataclass
class StepTally:
    """The compiles one open step has seen so far (on its own thread)."""

    compiles: int = 0
    compile_s: float = 0.0


class StepLineSink(Protocol):
    """Where ``jax.step`` lines go (a log emitter of :mod:`otel_jax._emit._logs`)."""

    def step(self, fields: dict[str, Any]) -> None: ...


#: What is kept of the latest step not logged, to log it at exit: (number, seconds,
#: nested, its span).
_Unlogged = tuple[int, float, bool, Any]


class _NameTally:
    __slots__ = ("chosen_at", "steps", "steps_s", "last")

    def __init__(self) -> None:
        self.chosen_at = -float("inf")  # when a step of this name was last chosen
        self.steps = 0  # steps ended since this name's last line
        self.steps_s = 0.0
        self.last: _Unlogged | None = None


class StepLog:
    """Which steps become ``jax.step`` lines, and what each line says about the steps it
    stands for (see the module's text)."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S,
                 max_names: int = MAX_SAMPLED_NAMES) -> None:
        self.interval_s = interval_s
        self.max_names = max_names
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # a fresh lock in a forked child: the parent's may have been held by another thread
        self._lock = threading.Lock()
        self._names: dict[str, _NameTally] = {}

    def choose(self, name: str) -> bool:
        """At a step's start: whether it is this second's sample of its name."""
        now = time.monotonic()
        with self._lock:
            tally = self._names.get(name)
            if tally is None:
                if len(self._names) >= self.max_names:
                    return False
                tally = self._names[name] = _NameTally()
            if now - tally.chosen_at < self.interval_s:
                return False
            tally.chosen_at = now
            return True

    def ended(self, name: str, seconds: float, logged: bool,
              unlogged: _Unlogged) -> tuple[int, float]:
        """At a step's end: counted; when it is ``logged``, the steps and seconds its
        line stands for (itself and the unlogged ones before it), and the count starts
        over; when not, ``unlogged`` is kept to be logged at exit if no line follows."""
        with self._lock:
            tally = self._names.get(name)
            if tally is None:  # a name past the cap
                return 1, seconds
            tally.steps += 1
            tally.steps_s += seconds
            out = (tally.steps, tally.steps_s)
            if logged:
                tally.steps, tally.steps_s, tally.last = 0, 0.0, None
            else:
                tally.last = unlogged
            return out

    def pending(self) -> list[tuple[str, int, float, _Unlogged]]:
        """The names whose latest steps have no line yet (at exit): the latest step's
        name, the count, seconds, and what was kept of it; the counts start over."""
        with self._lock:
            out = [(name, t.steps, t.steps_s, t.last) for name, t in self._names.items()
                   if t.steps and t.last is not None]
            for name, *_ in out:
                tally = self._names[name]
                tally.steps, tally.steps_s, tally.last = 0, 0.0, None
        return out


class StepTelemetry:
    """The tracer, step-time histogram and ``jax.step`` lines of one installation."""

    def __init__(self, tracer: Tracer, meter: Meter,
                 lines: Sequence[StepLineSink] = ()) -> None:
        self.tracer = tracer
        self.duration = meter.create_histogram(
            Metric.STEP_DURATION, unit="s",
            description="Wall time of one training step, by whether it compiled",
            explicit_bucket_boundaries_advisory=list(STEP_BUCKETS))
        self.lines = tuple(lines)
        self.log = StepLog()
        if self.lines:
            # After the log emitters' own exit flush was registered: runs before it.
            atexit.unregister(_log_pending_at_exit)
            atexit.register(_log_pending_at_exit)

    def line(self, name: str, number: int, seconds: float, compiles: int, compile_s: float,
             nested: bool, steps: int, steps_s: float, span: Any) -> None:
        """One ``jax.step`` line to every line sink."""
        fields: dict[str, Any] = {
            Field.STEP_NAME: name, Field.STEP_NUMBER: number,
            Field.DURATION_S: round(seconds, 6), Field.COMPILED: compiles > 0,
            Field.COMPILES: compiles, Field.COMPILE_S: round(compile_s, 6),
            Field.NESTED: nested, Field.STEPS: steps, Field.STEPS_S: round(steps_s, 6)}
        context = span.get_span_context() if span is not None else None
        if context is not None and context.is_valid:
            fields[Field.TRACE_ID] = trace.format_trace_id(context.trace_id)
            fields[Field.SPAN_ID] = trace.format_span_id(context.span_id)
        for sink in self.lines:
            sink.step(fields)

    def log_pending(self) -> None:
        """At exit: the latest step of each name that has steps without a line, so
        that the lines count every step."""
        for name, steps, steps_s, (number, seconds, nested, span) in self.log.pending():
            self.line(name, number, seconds, 0, 0.0, nested, steps, steps_s, span)


def _log_pending_at_exit() -> None:
    telemetry = STEPS.telemetry
    if telemetry is not None:
        try:
            telemetry.log_pending()
        except Exception:  # exit must never fail because of otel_jax
            pass


class _Steps:
    """Per-thread stack of open steps; the engine reports compiles into the innermost."""

    def __init__(self) -> None:
        self._tls = threading.local()
        self.telemetry: StepTelemetry | None = None

    def _stack(self) -> list[StepTally]:
        stack: list[StepTally] | None = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def open(self) -> StepTally:
        tally = StepTally()
        self._stack().append(tally)
        return tally

    def close(self, tally: StepTally) -> None:
        stack = self._stack()
        if tally in stack:
            stack.remove(tally)

    def open_here(self) -> bool:
        """Whether a step is open on this thread (a step begun now is nested in it)."""
        return bool(getattr(self._tls, "stack", None))

    def compiled(self, seconds: float) -> None:
        """A compile on this thread: charged to every step open around it."""
        for tally in getattr(self._tls, "stack", None) or ():
            tally.compiles += 1
            tally.compile_s += seconds


STEPS = _Steps()


class StepScope(ContextDecorator):
    """One training step, as a context manager (or, through ``otel_jax.step``, a decorator)."""

    def __init__(self, name: str, counter: StepCounter, counted: bool) -> None:
        self.name = name
        self._counter = counter
        self._counted = counted  # otel_jax.step(name) counted it already, as a bare call
        self._number = 0
        self._tally: StepTally | None = None
        self._span: Any = None
        self._token: object = None
        self._start = 0.0
        self._chosen = False
        self._nested = False

    def _recreate_cm(self) -> StepScope:
        # As a decorator: each call is a step of its own, counted when it starts.
        return StepScope(self.name, self._counter, counted=False)

    def __call__(self, func: F) -> F:
        if self._counted:  # the decorator's own creation was not a step
            self._counter.step(-1)
            self._counted = False
        return super().__call__(func)

    def __enter__(self) -> StepScope:
        counted, self._counted = self._counted, False  # entered again: another step
        self._nested = STEPS.open_here()
        if self._nested:
            # A part of the enclosing step: its number, no warm-up count of its own.
            if counted:
                self._counter.step(-1)
            self._number = self._counter.steps
        else:
            self._number = self._counter.begin_step(counted)
        self._tally = STEPS.open()
        telemetry = STEPS.telemetry
        self._chosen = False
        if telemetry is not None and telemetry.lines:
            try:
                self._chosen = telemetry.log.choose(self.name)
            except Exception:  # telemetry must not fail the step
                pass
        self._start = time.perf_counter()
        if telemetry is not None:
            try:
                self._span = telemetry.tracer.start_span(
                    self.name, kind=SpanKind.INTERNAL,
                    attributes={Attr.STEP_NAME: self.name, Attr.STEP_NUMBER: self._number})
                self._token = otel_context.attach(trace.set_span_in_context(self._span))
            except Exception:  # telemetry must not fail the step
                self._span = self._token = None
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        seconds = time.perf_counter() - self._start
        tally = self._tally or StepTally()
        STEPS.close(tally)
        compiled = tally.compiles > 0
        telemetry = STEPS.telemetry
        try:
            if self._token is not None:
                otel_context.detach(self._token)  # type: ignore[arg-type]
            context = None
            if self._span is not None:
                if exc is not None:  # as the SDK's own span context manager does
                    _mark_failed(self._span, exc)
                self._span.set_attributes({
                    Attr.STEP_COMPILED: compiled, Attr.STEP_COMPILES: tally.compiles,
                    Attr.STEP_COMPILE_S: tally.compile_s})
                self._span.end()
                if self._span.get_span_context().is_valid:
                    # The step's own span, no longer the current one: its time's
                    # exemplar opens this step's trace (the SDK's trace-based filter).
                    context = trace.set_span_in_context(self._span)
            if telemetry is not None:
                telemetry.duration.record(seconds, {Attr.STEP_NAME: self.name,
                                                    Attr.STEP_COMPILED: compiled},
                                          context=context)
                if telemetry.lines:
                    self._log_line(telemetry, seconds, tally)
        except Exception:  # telemetry must not fail the step
            pass
        finally:
            self._span = self._token = self._tally = None

    def _log_line(self, telemetry: StepTelemetry, seconds: float, tally: StepTally) -> None:
        """The step's ``jax.step`` line, when it compiled or was chosen as a sample."""
        logged = tally.compiles > 0 or self._chosen
        steps, steps_s = telemetry.log.ended(
            self.name, seconds, logged, (self._number, seconds, self._nested, self._span))
        if logged:
            telemetry.line(self.name, self._number, seconds, tally.compiles, tally.compile_s,
                           self._nested, steps, steps_s, self._span)


def _mark_failed(span: Any, exc: BaseException) -> None:
    """ERROR status and the exception as an event; an exception whose ``__str__`` fails
    still leaves the span to be ended."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    try:
        span.set_status(Status(StatusCode.ERROR, text[:200]))
        span.record_exception(exc)
    except Exception:
        pass


def decorate(func: F, counter: StepCounter) -> F:
    """``@otel_jax.step``: every call of ``func`` is one step, named after it."""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", DEFAULT_NAME)

    @functools.wraps(func)
    def step(*args: Any, **kwargs: Any) -> Any:
        with StepScope(str(name), counter, counted=False):
            return func(*args, **kwargs)

    return step  # type: ignore[return-value]
