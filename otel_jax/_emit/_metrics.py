"""Record -> metrics: compile counts by function and cause, compile durations, cache counters."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from .._core._vocab import Attr, Metric
from .._pipeline._background import WORKER
from .._pipeline._record import CompileRecord, Divergence, SpanLink, Storm
from ._spans import link_context

# Compile times span 1 ms (a small CPU program) to 10 minutes (a large model on TPU/GPU).
DURATION_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0, 600.0,
)


def _dropped(options: CallbackOptions) -> Iterable[Observation]:
    # No series until something is dropped: an absent counter reads as none.
    dropped = WORKER.dropped
    return [Observation(dropped)] if dropped else []


class MetricsEmitter:
    """The instruments of docs/telemetry.md; low-cardinality attributes only."""

    #: The user's code this emitter calls: its exceptions are named as theirs.
    reaches = "metric reader"

    def __init__(self, meter: Meter, functions_dropped: Callable[[], int] | None = None) -> None:
        self._compilations = meter.create_counter(
            Metric.COMPILATIONS, unit="{compilation}",
            description="JAX backend (XLA) compilations, by function and cause kind")
        self._duration = meter.create_histogram(
            Metric.COMPILE_DURATION, unit="s",
            description="Wall time of one JAX compilation: trace, lower and backend compile",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        self._after_warmup = meter.create_counter(
            Metric.AFTER_WARMUP, unit="{compilation}",
            description="Compilations that happened after warm-up was declared done")
        self._cache_requests = meter.create_counter(
            Metric.CACHE_REQUESTS, unit="{request}",
            description="Compilations that looked up the persistent compilation cache")
        self._cache_hits = meter.create_counter(
            Metric.CACHE_HITS, unit="{hit}",
            description="Compilations served from the persistent compilation cache")
        self._cache_misses = meter.create_counter(
            Metric.CACHE_MISSES, unit="{miss}",
            description="Persistent-cache lookups that had to compile")
        self._cache_writes = meter.create_counter(
            Metric.CACHE_WRITES, unit="{entry}",
            description="Entries JAX wrote to the persistent compilation cache")
        self._cache_not_written = meter.create_counter(
            Metric.CACHE_NOT_WRITTEN, unit="{entry}",
            description="Misses whose result JAX did not write to the persistent cache "
                        "(too fast to be worth caching, or the write failed)")
        self._cache_lookups = meter.create_counter(
            Metric.CACHE_LOOKUPS, unit="{lookup}",
            description="Persistent-cache lookups of user functions, by function, hit or "
                        "not, and why a miss missed (the hit ratio per function)")

        # Read off the emitting thread's own count at each collection: a compile it had no
        # room for never reaches the other instruments, so it cannot be counted there.
        meter.create_observable_counter(
            Metric.DROPPED, callbacks=[_dropped], unit="{compilation}",
            description="Compiles whose spans, metrics and log lines otel_jax dropped: "
                        "its emitting thread's queue was full")
        if functions_dropped is not None:
            def _functions_dropped(options: CallbackOptions) -> Iterable[Observation]:
                dropped = functions_dropped()
                return [Observation(dropped)] if dropped else []

            meter.create_observable_counter(
                Metric.FUNCTIONS_DROPPED, callbacks=[_functions_dropped], unit="{function}",
                description="Functions whose compile detail (signatures, compile history) "
                            "otel_jax dropped, the least recently compiled first: more "
                            "distinct functions compiled than max_functions")
        self._divergences = meter.create_counter(
            Metric.DIVERGENCES, unit="{divergence}",
            description="Compiles for which the ranks of a multi-process job compiled "
                        "different programs, or some ranks none, as seen by this rank")

        self._hazards = meter.create_counter(
            Metric.HAZARDS, unit="{hazard}",
            description="Recompiles named before they happen, by function, hazard kind "
                        "and level (warning, or info for a note)")

    def storm(self, storm: Storm) -> None:
        """Storms are read off ``jax.compilations`` (the alert rules), not counted apart."""

    def divergence(self, div: Divergence) -> None:
        """One divergence this rank detected."""
        self._divergences.add(1, {Attr.FUNCTION: div.function,
                                  Attr.DIVERGENCE_KIND: div.kind.value})

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        name = record.function.qualname
        recompile = record.is_recompile
        attributes: dict[str, str | bool] = {
            Attr.FUNCTION: name,
            Attr.CAUSE_KIND: record.cause_kind.value,
            Attr.IS_RECOMPILE: recompile,
        }
        if record.eager_op:
            # Only on JAX's own op-by-op compiles, so that user functions keep
            # exactly the labels the contract names and alerts can leave these out.
            attributes[Attr.EAGER_OP] = True
        # Recorded in the compile span's context: under the SDK's default (trace-based)
        # exemplar filter each point keeps an exemplar that opens the compile's trace.
        # ``context=`` is part of every synchronous instrument since API 1.27.
        context = link_context(link)
        self._compilations.add(1, attributes, context=context)
        for hazard in record.hazards:
            self._hazards.add(1, {Attr.FUNCTION: name, Attr.HAZARD_KIND: hazard.kind.value,
                                  Attr.HAZARD_LEVEL: hazard.level}, context=context)
        self._duration.record(record.compile_s, {
            Attr.FUNCTION: name,
            Attr.IS_RECOMPILE: recompile,
        }, context=context)
        if record.after_warmup:
            self._after_warmup.add(1, {
                Attr.FUNCTION: name,
                Attr.CAUSE_KIND: record.cause_kind.value,
            }, context=context)
        cache = record.persistent_cache
        if cache is not None:
            self._cache_requests.add(1)
            if cache.hit:
                self._cache_hits.add(1)
            else:
                self._cache_misses.add(1)
                if cache.written:
                    self._cache_writes.add(1)
                else:
                    reason = cache.not_written_reason
                    self._cache_not_written.add(1, {
                        Attr.REASON: reason.value if reason is not None else "other"})
            if not record.eager_op:
                lookup: dict[str, str | bool] = {
                    Attr.FUNCTION: name, Attr.PERSISTENT_CACHE_HIT: cache.hit}
                if cache.miss_reason is not None:
                    lookup[Attr.PERSISTENT_CACHE_MISS_REASON] = cache.miss_reason.value
                self._cache_lookups.add(1, lookup)
