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
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from contextlib import ContextDecorator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from .._core._vocab import Attr, Metric

F = TypeVar("F", bound=Callable[..., Any])

#: Step times span a millisecond (a small CPU step) to minutes (a step that compiled).
STEP_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0, 600.0,
)
DEFAULT_NAME = "step"


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


class StepTelemetry:
    """The tracer and step-time histogram of one installation."""

    def __init__(self, tracer: Tracer, meter: Meter) -> None:
        self.tracer = tracer
        self.duration = meter.create_histogram(
            Metric.STEP_DURATION, unit="s",
            description="Wall time of one training step, by whether it compiled",
            explicit_bucket_boundaries_advisory=list(STEP_BUCKETS))


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
        if STEPS.open_here():
            # A part of the enclosing step: its number, no warm-up count of its own.
            if counted:
                self._counter.step(-1)
            self._number = self._counter.steps
        else:
            self._number = self._counter.begin_step(counted)
        self._tally = STEPS.open()
        telemetry = STEPS.telemetry
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
            if self._span is not None:
                if exc is not None:  # as the SDK's own span context manager does
                    _mark_failed(self._span, exc)
                self._span.set_attributes({
                    Attr.STEP_COMPILED: compiled, Attr.STEP_COMPILES: tally.compiles,
                    Attr.STEP_COMPILE_S: tally.compile_s})
                self._span.end()
            if telemetry is not None:
                telemetry.duration.record(seconds, {Attr.STEP_NAME: self.name,
                                                    Attr.STEP_COMPILED: compiled})
        except Exception:  # telemetry must not fail the step
            pass
        finally:
            self._span = self._token = self._tally = None


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
