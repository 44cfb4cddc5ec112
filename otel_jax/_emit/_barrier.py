"""The application's own flush and shutdown include what otel_jax still holds.

A compile's spans, metrics and log lines are made on otel_jax's background thread shortly
after its jit call returns. An application, or its test suite, reads what was exported the
way OpenTelemetry documents: ``tracer_provider.force_flush()`` (or ``shutdown()``, often a
script's last line), ``meter_provider.force_flush()``, ``logger_provider.force_flush()``,
then the exporter. A *barrier* of otel_jax's sits in each provider install() reports to (the
application's and the ones otel_jax built) and runs first when the provider flushes or shuts
down: it hands every compile seen so far to the providers (``otel_jax.flush``), so that the
application's processors and readers, flushed next, export them too.

- Traces: a span processor (``add_span_processor``), moved to the front of the provider's
  processors so that it runs before a ``BatchSpanProcessor`` flushes its queue.
- Logs: a log-record processor, the same way.
- Metrics: the SDK's ``MeterProvider`` flushes its readers in order and takes no reader
  after it is built; a barrier that acts as the first reader for ``force_flush`` and
  ``shutdown`` only (it collects nothing).

Where a provider cannot take a barrier first (another SDK, a multi-processor that runs
processors side by side), the barrier still runs and then flushes the processors that ran
before it, once more. Attaching never fails install(): a provider that takes none is left
as it is, and ``otel_jax.flush()`` remains the way to wait. Where install() was given the
API's global proxy (``otel-jax run``, before the program set up OpenTelemetry), the barrier
goes into the provider the program sets as global, at the first compile after it did
(:func:`attach_when_set`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

#: ``otel_jax.flush``: emit what is still held, waiting at most this many seconds.
Flush = Callable[[float], bool]

#: The longest a provider's flush waits for otel_jax, whatever its own timeout: what is
#: left is emitted later (the provider's own bound still holds for exporting it).
MAX_WAIT_S = 10.0
#: The longest a provider's shutdown waits for otel_jax (it has no timeout of its own; at
#: exit, after otel_jax's own bounded flush, the flush passed in waits less still).
SHUTDOWN_WAIT_S = 2.0

_inside = threading.local()


def _run(flush: Flush, timeout_millis: float | None) -> bool:
    """``flush`` once per provider call, bounded; never raises, never recurses (otel_jax's
    own flush of the providers ends up here again)."""
    if getattr(_inside, "active", False):
        return True
    seconds = SHUTDOWN_WAIT_S if timeout_millis is None else min(
        MAX_WAIT_S, max(0.0, float(timeout_millis) / 1000.0))
    _inside.active = True
    try:
        return bool(flush(seconds))
    except Exception:  # the application's flush must go on
        return False
    finally:
        _inside.active = False


class SpanBarrier(SpanProcessor):
    """The first span processor of a tracer provider: its flush and shutdown emit otel_jax's
    pending compiles first. Ends and starts of spans pass through untouched."""

    def __init__(self, flush: Flush) -> None:
        self._flush = flush
        #: The processors that run before this one (none when it is first): flushed again
        #: after otel_jax's compiles reached them.
        self.before: Callable[[], tuple[Any, ...]] = tuple

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: Any) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        started = time.monotonic()
        done = _run(self._flush, timeout_millis)
        return _flush_again(self.before(), started, timeout_millis) and done

    def shutdown(self) -> None:
        _run(self._flush, None)


class LogBarrier:
    """The first log-record processor of a logger provider (the SDK's processor interface,
    which changed names across versions: ``emit`` and ``on_emit`` are both accepted)."""

    def __init__(self, flush: Flush) -> None:
        self._flush = flush
        self.before: Callable[[], tuple[Any, ...]] = tuple

    def on_emit(self, log_record: Any) -> None:
        return None

    def emit(self, log_data: Any) -> None:
        return None

    def enabled(self, **kwargs: Any) -> bool:
        return False  # it wants no record: a provider with only this one logs nothing

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        started = time.monotonic()
        done = _run(self._flush, timeout_millis)
        return _flush_again(self.before(), started, timeout_millis) and done

    def shutdown(self) -> None:
        _run(self._flush, None)


class MetricBarrier:
    """First among a meter provider's readers for ``force_flush`` and ``shutdown`` (the
    only calls a ``MeterProvider`` makes of its readers after it is built)."""

    def __init__(self, flush: Flush) -> None:
        self._flush = flush

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return _run(self._flush, timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        _run(self._flush, None)


def _flush_again(processors: tuple[Any, ...], started: float,
                 timeout_millis: float | None) -> bool:
    """Flush the processors that ran before the barrier, within what is left of the
    provider's timeout."""
    ok = True
    for processor in processors:
        left = (30_000.0 if timeout_millis is None else float(timeout_millis)) \
            - (time.monotonic() - started) * 1000.0
        if left <= 0:
            return False
        try:
            ok = bool(processor.force_flush(int(left))) and ok
        except Exception:
            ok = False
    return ok


@dataclass
class Attached:
    """The barriers install() put in providers, to be taken out at uninstall()."""

    undo: list[Callable[[], None]] = field(default_factory=list)

    def detach(self) -> None:
        for undo in reversed(self.undo):
            try:
                undo()
            except Exception:
                pass
        self.undo.clear()


def attach(flush: Flush, tracer_provider: Any, meter_provider: Any,
           logger_provider: Any | None) -> Attached:
    """Put a barrier first in each provider that can take one; never raises."""
    attached = Attached()
    for provider, how in ((tracer_provider, _attach_spans), (meter_provider, _attach_metrics),
                          (logger_provider, _attach_logs)):
        if provider is None:
            continue
        try:
            undo = how(flush, provider)
        except Exception:  # a provider of another make: it flushes without otel_jax
            undo = None
        if undo is not None:
            attached.undo.append(undo)
    return attached


def attach_when_set(flush: Flush, attached: Attached, tracer_provider: Any,
                    meter_provider: Any, logger_provider: Any | None,
                    ) -> Callable[[], bool] | None:
    """For each of the providers that is the API's global proxy (``otel-jax run`` installs
    before the program sets up OpenTelemetry): a check that puts a barrier in the provider
    the application sets as global later, once, adding it to ``attached``. The check is
    cheap (a read of each global still waited for) and returns whether it still waits for
    one; ``None`` when no provider is a proxy. Called at each compile, on the compiling
    thread, before the jit call returns: a flush of the application's right after it
    includes that compile."""
    from . import _providers

    how = {"traces": _attach_spans, "metrics": _attach_metrics, "logs": _attach_logs}
    waiting = [(signal, how[signal]) for signal, provider in (
        ("traces", tracer_provider), ("metrics", meter_provider), ("logs", logger_provider))
        if provider is not None and _providers.is_stand_in(signal, provider)]
    if not waiting:
        return None
    lock = threading.Lock()

    def check() -> bool:
        if not lock.acquire(False):  # another thread's compile is looking: it attaches
            return True
        try:
            for signal, attach_one in tuple(waiting):
                provider = _providers.global_provider(signal)
                if _providers.is_stand_in(signal, provider):
                    continue
                waiting.remove((signal, attach_one))
                try:
                    undo = attach_one(flush, provider)
                except Exception:  # a provider of another make: it flushes without otel_jax
                    continue
                if undo is not None:
                    attached.undo.append(undo)
            return bool(waiting)
        finally:
            lock.release()
    return check


def _to_front(multi: Any, attribute: str, barrier: Any) -> bool:
    """Move ``barrier``, just added, to the front of ``multi``'s tuple of processors (the
    SDK's multi-processors keep one, replaced whole under their lock)."""
    lock = getattr(multi, "_lock", None)
    current = getattr(multi, attribute, None)
    if not isinstance(current, tuple) or lock is None:
        return False
    with lock:
        current = getattr(multi, attribute)
        if not isinstance(current, tuple) or barrier not in current:
            return False
        setattr(multi, attribute, (barrier, *(p for p in current if p is not barrier)))
    return True


def _remove(multi: Any, attribute: str, barrier: Any) -> None:
    lock = getattr(multi, "_lock", None)
    if lock is None:
        return
    with lock:
        current = getattr(multi, attribute, None)
        if isinstance(current, tuple):
            setattr(multi, attribute, tuple(p for p in current if p is not barrier))


def _before(multi: Any, attribute: str, barrier: Any) -> Callable[[], tuple[Any, ...]]:
    """The processors that run before ``barrier`` in ``multi`` (read at each flush: a
    processor run side by side, or one put first by someone else)."""
    def before() -> tuple[Any, ...]:
        current = getattr(multi, attribute, None)
        if not isinstance(current, tuple) or barrier not in current:
            return ()
        if type(multi).__name__.startswith("Concurrent"):
            return tuple(p for p in current if p is not barrier)  # run side by side
        return current[:current.index(barrier)]
    return before


def _attach_processor(barrier: SpanBarrier | LogBarrier, provider: Any, add: str,
                      multi: str, processors: str) -> Callable[[], None] | None:
    """``barrier`` added by the provider's ``add`` method, then put first among the
    ``processors`` of its ``multi``-processor; how to take it out again."""
    adding = getattr(provider, add, None)
    if adding is None:
        return None  # the API's proxy or no-op provider: nothing of otel_jax's is exported
    adding(barrier)
    found = getattr(provider, multi, None)
    if found is None:
        return None
    _to_front(found, processors, barrier)
    barrier.before = _before(found, processors, barrier)
    return lambda: _remove(found, processors, barrier)


def _attach_spans(flush: Flush, provider: Any) -> Callable[[], None] | None:
    return _attach_processor(SpanBarrier(flush), provider, "add_span_processor",
                             "_active_span_processor", "_span_processors")


def _attach_logs(flush: Flush, provider: Any) -> Callable[[], None] | None:
    return _attach_processor(LogBarrier(flush), provider, "add_log_record_processor",
                             "_multi_log_record_processor", "_log_record_processors")


def _attach_metrics(flush: Flush, provider: Any) -> Callable[[], None] | None:
    readers = getattr(provider, "_metric_readers", None)
    if readers is None:
        return None
    barrier = MetricBarrier(flush)
    # The SDK builds this sequence once and only iterates it (force_flush, shutdown).
    provider._metric_readers = (barrier, *readers)

    def undo() -> None:
        current = getattr(provider, "_metric_readers", ())
        provider._metric_readers = tuple(r for r in current if r is not barrier)
    return undo
