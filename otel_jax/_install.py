"""``install()`` / ``uninstall()``: wire the compile records to spans, metrics and logs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from opentelemetry import trace

from . import _providers, _scrub
from ._engine import ENGINE, ON_RECOMPILE, Sink
from ._logs import JsonLogEmitter, OtelLogEmitter
from ._metrics import MetricsEmitter
from ._spans import SpanEmitter
from ._version import __version__
from ._vocab import INSTRUMENTATION_SCOPE

_lock = threading.Lock()


@dataclass
class Installation:
    """The handle ``install()`` returns; ``uninstall()`` undoes it."""

    tracer_provider: Any
    meter_provider: Any
    logger_provider: Any | None
    prometheus_address: tuple[str, int] | None
    sinks: list[Sink] = field(default_factory=list)
    _providers: _providers.Providers | None = None

    @property
    def active(self) -> bool:
        return _current is self

    def uninstall(self) -> None:
        """Remove every hook and listener otel_jax added to JAX (same as ``otel_jax.uninstall``)."""
        uninstall()


_current: Installation | None = None


def install(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    logger_provider: Any = None,
    log_output: IO[str] | Literal["stderr"] | None = "stderr",
    log_level: Literal["debug", "info", "warning"] = "info",
    prometheus_port: int | None = None,
    storm_threshold: int = 8,
    warmup_steps: int | None = None,
    on_recompile: Literal["log", "warn", "raise"] = "log",
    scrub: _scrub.ScrubRules | bool | None = None,
) -> Installation:
    """Report every JAX compilation as a span, metrics and a JSON log line, with its cause.

    One line, idempotent: a second call changes nothing and returns the same
    handle. Cache hits of jitted functions cost nothing: otel_jax only runs when
    JAX itself falls back to Python to compile.

    Args:
        tracer_provider, meter_provider, logger_provider: OpenTelemetry
            providers to use. By default the global ones the application
            configured; when it configured none, a default honouring the
            standard ``OTEL_*`` variables (OTLP export when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set).
        log_output: where the ``jax.compile`` JSON lines go: ``"stderr"``
            (default), any text stream, or ``None`` for none.
        log_level: ``"debug"`` also logs JAX's eager op-by-op compiles.
        prometheus_port: serve a Prometheus scrape endpoint on this port
            (or set ``OTEL_EXPORTER_PROMETHEUS_PORT``); only with the default
            meter provider.
        storm_threshold: recompiles of one function after which one WARNING
            names it and the causes seen so far.
        warmup_steps: warm-up ends after this many ``otel_jax.step()`` calls
            (or at ``otel_jax.mark_warmup_done()``); later compiles are marked
            ``jax.compile.after_warmup``.
        on_recompile: what a recompile after warm-up does: ``"log"`` (mark and
            count it), ``"warn"`` (also a Python warning) or ``"raise"``
            (``otel_jax.RecompileError`` from the jit call, for CI and canaries).
        scrub: what is scrubbed from every text emitted (causes, diffs,
            static values, logs): ``None`` (default) the default
            ``otel_jax.ScrubRules()`` unless ``OTEL_JAX_SCRUB`` says ``off`` or
            ``hidden``; an ``otel_jax.ScrubRules`` to extend or replace them
            (``ScrubRules(hide_values=True)``: no static value at all);
            ``False`` for no scrubbing.
    """
    global _current
    if on_recompile not in ON_RECOMPILE:
        raise ValueError(f"on_recompile must be one of {ON_RECOMPILE}, not {on_recompile!r}")
    with _lock:
        if _current is not None:
            return _current
        _scrub.configure(scrub)
        providers = _providers.resolve(tracer_provider, meter_provider, logger_provider,
                                       prometheus_port)
        scope = INSTRUMENTATION_SCOPE
        tracer = trace.get_tracer(scope, __version__, tracer_provider=providers.tracer_provider)
        sinks: list[Sink] = [
            MetricsEmitter(providers.meter_provider.get_meter(scope, __version__))]
        json_log = None
        if log_output is not None:
            json_log = JsonLogEmitter(None if log_output == "stderr" else log_output,  # type: ignore[arg-type]
                                      log_level, failopen=ENGINE.failopen)
            sinks.append(json_log)
        if providers.logger_provider is not None:
            sinks.append(OtelLogEmitter(providers.logger_provider.get_logger(scope, __version__)))
        ENGINE.storm_threshold = storm_threshold
        ENGINE.on_recompile = on_recompile
        ENGINE.configure_warmup(warmup_steps)
        ENGINE.set_storm_sink(json_log.storm if json_log is not None else None)
        # The span emitter hands each record's span ids to every sink: the
        # order in which sinks run does not matter.
        ENGINE.set_span_emitter(SpanEmitter(tracer))
        for sink in sinks:
            ENGINE.add_sink(sink)
        _current = Installation(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
            prometheus_address=providers.prometheus_address,
            sinks=sinks,
            _providers=providers,
        )
        return _current


def uninstall() -> None:
    """Remove every hook and listener otel_jax added; JAX is left exactly as it was.

    Queued JSON log lines are written first (waiting at most 2 s for the
    stream). Providers otel_jax created are flushed (not shut down: the
    application's own spans may still use them). A no-op when not installed.
    """
    global _current
    with _lock:
        current, _current = _current, None
        if current is None:
            return
        ENGINE.set_span_emitter(None)
        for sink in current.sinks:
            ENGINE.remove_sink(sink)
        ENGINE.set_storm_sink(None)
        ENGINE.on_recompile = "log"
        _scrub.configure(None)
        for sink in current.sinks:
            if isinstance(sink, JsonLogEmitter):
                sink.close()  # bounded: waits for the stream at most UNINSTALL_FLUSH_S
        if current._providers is not None:
            for provider in current._providers.owned:
                flush = getattr(provider, "force_flush", None)
                if flush is not None:
                    try:
                        flush(2000)
                    except Exception:  # never let a collector that is down fail uninstall
                        pass
            _providers.stop_prometheus(current._providers)


def installation() -> Installation | None:
    """The active installation, if any."""
    return _current

