"""``install()`` / ``uninstall()``: wire the compile records to spans, metrics and logs."""

from __future__ import annotations

import numbers
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from opentelemetry import trace

from .._capture._jax_hooks import Capability
from .._core import _scrub
from .._core._failopen import Topic, WarnKey, warn_once
from .._core._vocab import INSTRUMENTATION_SCOPE
from .._emit import _providers
from .._emit._logs import (
    LOG_OUTPUTS,
    STDERR,
    STRUCTLOG,
    JsonLogEmitter,
    LogEmitter,
    LogOutput,
    OtelLogEmitter,
    StructlogEmitter,
)
from .._emit._metrics import MetricsEmitter
from .._emit._spans import EAGER_OP_SPANS, SpanEmitter
from .._fleet._ranks import ON_DIVERGENCE
from .._pipeline._engine import ENGINE, ON_RECOMPILE, Sink
from .._pipeline._steps import STEPS, StepTelemetry
from .._version import __version__

_lock = threading.Lock()


@dataclass
class Installation:
    """The handle ``install()`` returns; ``uninstall()`` undoes it."""

    tracer_provider: Any
    meter_provider: Any
    logger_provider: Any | None
    prometheus_address: tuple[str, int] | None
    sinks: list[Sink] = field(default_factory=list)
    #: What this JAX version's internals do not give (empty on the tested versions):
    #: those facts fall back, as install()'s one ``OtelJaxWarning`` said.
    unavailable: frozenset[Capability] = frozenset()
    _providers: _providers.Providers | None = None
    _options: dict[str, Any] = field(default_factory=dict, repr=False)

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
    log_output: IO[str] | LogOutput | None = "stderr",
    log_level: Literal["debug", "info", "warning"] = "info",
    prometheus_port: int | None = None,
    storm_threshold: int = 8,
    warmup_steps: int | None = None,
    on_recompile: Literal["log", "warn", "raise"] = "log",
    scrub: _scrub.ScrubRules | bool | None = None,
    on_divergence: Literal["log", "raise", "off"] = "log",
    divergence_timeout_s: float = 30.0,
    rank_local: Sequence[str] = (),
    ledger_path: str | os.PathLike[str] | bool | None = None,
    eager_op_spans: Literal["nested", "always"] = "nested",
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
            (default), any text stream, or ``None`` for none. ``"structlog"``:
            no JSON lines of otel_jax's own; the compile, storm and divergence
            events go through the application's structlog configuration
            (``structlog.get_logger("otel_jax")``: its processors, renderer and,
            with ``structlog.stdlib``, its ``logging`` handlers), with the
            ``structlog.contextvars`` context bound on the compiling thread.
        log_level: ``"debug"`` also logs JAX's eager op-by-op compiles.
        prometheus_port: serve a Prometheus scrape endpoint on this port
            (or set ``OTEL_EXPORTER_PROMETHEUS_PORT``); only with the default
            meter provider. ``0`` picks a free port (``prometheus_address``
            says which). A port that is taken (several processes on one host
            sharing one environment) or an unusable
            ``OTEL_EXPORTER_PROMETHEUS_PORT`` costs one ``OtelJaxWarning``:
            no endpoint is served (``prometheus_address`` is None), metrics
            are still recorded in the process, and install() succeeds.
        storm_threshold: recompiles of one function after which one WARNING
            names it and the causes seen so far.
        warmup_steps: warm-up ends after this many ``otel_jax.step()`` calls
            (or at ``otel_jax.mark_warmup_done()``); later compiles are marked
            ``jax.compile.after_warmup``. With step scopes (``with
            otel_jax.step():``), the first compiles after warm-up are those of
            step ``warmup_steps + 1``; nested scopes count once (``otel_jax.step``).
        on_recompile: what a recompile after warm-up does: ``"log"`` (mark and
            count it), ``"warn"`` (also a Python warning) or ``"raise"``
            (``otel_jax.RecompileError`` from the jit call, for CI and canaries).
        scrub: what is scrubbed from every text emitted (causes, diffs,
            static values, logs): ``None`` (default) the default
            ``otel_jax.ScrubRules()`` unless ``OTEL_JAX_SCRUB`` says ``off`` or
            ``hidden``; an ``otel_jax.ScrubRules`` to extend or replace them
            (``ScrubRules(hide_values=True)``: no static value at all);
            ``False`` for no scrubbing.
        on_divergence: multi-process jobs (``jax.distributed.initialize``, more than
            one process): each compile is compared with the other ranks' over JAX's
            coordination service, off the compiling thread. ``"log"`` (default)
            reports ranks that compiled different programs for the same call (a
            ``jax.compile.divergence`` WARNING, span and counter); ``"raise"`` waits,
            at most ``divergence_timeout_s`` at each compile, for the peers and raises
            ``otel_jax.DivergenceError`` from the diverging jit call; ``"off"`` compares
            nothing. Single-process programs are unaffected (no thread, no key).
        divergence_timeout_s: how long after this rank compiled something the other
            ranks may take to compile it too before they are reported as missing
            (and the longest ``"raise"`` waits).
        rank_local: functions compiled on purpose by some ranks only (rank 0
            evaluating or writing checkpoints), as patterns of qualified names
            (``fnmatch``: ``("evaluate", "*.log_images")``): not compared across
            ranks, so they are never reported as missing on the others.
        ledger_path: the compile ledger that says why JAX's persistent compilation
            cache did not serve a compile (``jax.persistent_cache.miss_reason``):
            ``None`` (default) ``OTEL_JAX_LEDGER`` when set (a path, or ``off``), else
            ``<cache dir>.otel_jax-ledger.jsonl`` beside the cache directory; a path;
            or ``False`` for none. Off whenever the persistent cache is off.
        eager_op_spans: JAX's eager op-by-op compiles (``x + 1`` outside jit):
            ``"nested"`` (default) gives them a span only inside a span of the
            application's (a step, an epoch); outside any, each would be a trace of
            its own that buries the application's traces in Jaeger's trace list, so
            it is counted in the metrics and logged at DEBUG only. ``"always"``: a
            span for each, a root span outside any other.

    Raises:
        ValueError: for an invalid argument passed here (``log_level="verbose"``,
            ``storm_threshold=-1``, ``warmup_steps=2.5``, ``prometheus_port="abc"``):
            a mistake in the program, said at once. Nothing read from the
            environment raises: bad ``OTEL_*`` values cost one ``OtelJaxWarning``.

    Once installed, a second call returns the same handle; arguments that differ
    from the active installation's (and are not the default) are ignored with one
    ``OtelJaxWarning`` naming them: ``uninstall()`` first to change them.
    """
    global _current
    options = _validated(tracer_provider=tracer_provider, meter_provider=meter_provider,
                         logger_provider=logger_provider, log_output=log_output,
                         log_level=log_level, prometheus_port=prometheus_port,
                         storm_threshold=storm_threshold, warmup_steps=warmup_steps,
                         on_recompile=on_recompile, scrub=scrub,
                         on_divergence=on_divergence,
                         divergence_timeout_s=divergence_timeout_s, rank_local=rank_local,
                         ledger_path=ledger_path, eager_op_spans=eager_op_spans)
    with _lock:
        if _current is not None:
            _warn_ignored(_current._options, options)
            return _current
        _scrub.configure(scrub)
        try:
            providers = _providers.resolve(tracer_provider, meter_provider, logger_provider,
                                           prometheus_port)
        except Exception as exc:  # resolve() fails open itself; this is the last guard
            warn_once(Topic.SETUP, (
                f"otel_jax: cannot set up OpenTelemetry ({type(exc).__name__}: {exc}); "
                "compiles are reported in the JSON log lines only."))
            providers = _providers.Providers(trace.get_tracer_provider(),
                                             _metrics_api().get_meter_provider(), None)
        scope = INSTRUMENTATION_SCOPE
        tracer = trace.get_tracer(scope, __version__, tracer_provider=providers.tracer_provider)
        sinks: list[Sink] = [
            MetricsEmitter(providers.meter_provider.get_meter(scope, __version__))]
        json_log: LogEmitter | None = None
        if isinstance(log_output, str) and log_output == STRUCTLOG:
            json_log = StructlogEmitter(log_level, failopen=ENGINE.failopen)
        elif log_output is not None:
            json_log = JsonLogEmitter(None if log_output == STDERR else log_output,
                                      log_level, failopen=ENGINE.failopen)
        if json_log is not None:
            sinks.append(json_log)
        if providers.logger_provider is not None:
            sinks.append(OtelLogEmitter(providers.logger_provider.get_logger(scope, __version__)))
        ENGINE.storm_threshold = storm_threshold
        ENGINE.on_recompile = on_recompile
        ENGINE.configure_warmup(warmup_steps)
        ENGINE.ledger.configure(ledger_path)
        ENGINE.set_storm_sink(json_log.storm if json_log is not None else None)
        # The span emitter hands each record's span ids to every sink: the
        # order in which sinks run does not matter.
        span_emitter = SpanEmitter(tracer, eager_op_spans)
        ENGINE.set_span_emitter(span_emitter)
        STEPS.telemetry = StepTelemetry(tracer, providers.meter_provider.get_meter(
            scope, __version__))
        for sink in sinks:
            ENGINE.add_sink(sink)
        ENGINE.cross_rank.rank_local = tuple(rank_local)
        ENGINE.cross_rank.configure(on_divergence, float(divergence_timeout_s),
                                    _divergence_reporter([span_emitter, *sinks]))
        _current = Installation(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
            prometheus_address=providers.prometheus_address,
            sinks=sinks,
            unavailable=ENGINE.unavailable,
            _providers=providers,
            _options=options,
        )
        return _current


_DEFAULTS: dict[str, Any] = {
    "tracer_provider": None, "meter_provider": None, "logger_provider": None,
    "log_output": "stderr", "log_level": "info", "prometheus_port": None,
    "storm_threshold": 8, "warmup_steps": None, "on_recompile": "log", "scrub": None,
    "on_divergence": "log", "divergence_timeout_s": 30.0, "rank_local": (),
    "ledger_path": None, "eager_op_spans": "nested",
}
_LOG_LEVELS = ("debug", "info", "warning")
_BY_IDENTITY = ("tracer_provider", "meter_provider", "logger_provider", "log_output")


def _metrics_api() -> Any:
    from opentelemetry import metrics

    return metrics


def _is_int(value: Any) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _validated(**options: Any) -> dict[str, Any]:
    """install()'s arguments, checked: a clear ValueError for a programming mistake."""
    if options["on_recompile"] not in ON_RECOMPILE:
        raise ValueError(f"on_recompile must be one of {ON_RECOMPILE}, "
                         f"not {options['on_recompile']!r}")
    if options["log_level"] not in _LOG_LEVELS:
        raise ValueError(f"log_level must be one of {_LOG_LEVELS}, not {options['log_level']!r}")
    out = options["log_output"]
    if not (out is None or (isinstance(out, str) and out in LOG_OUTPUTS)
            or (not isinstance(out, str) and callable(getattr(out, "write", None)))):
        raise ValueError(f"log_output must be one of {LOG_OUTPUTS}, None or a text stream "
                         f"with a write() method, not {out!r}")
    threshold = options["storm_threshold"]
    if not _is_int(threshold) or threshold < 1:
        raise ValueError(f"storm_threshold must be an int >= 1 (recompiles of one function "
                         f"before the storm warning), not {threshold!r}")
    warmup = options["warmup_steps"]
    if warmup is not None and (not _is_int(warmup) or warmup < 0):
        raise ValueError(f"warmup_steps must be None or an int >= 0 (otel_jax.step() calls), "
                         f"not {warmup!r}")
    scrub = options["scrub"]
    if not (scrub is None or isinstance(scrub, (bool, _scrub.ScrubRules))):
        raise TypeError(f"scrub must be None, a bool or an otel_jax.ScrubRules, not {scrub!r}")
    if options["on_divergence"] not in ON_DIVERGENCE:
        raise ValueError(f"on_divergence must be one of {ON_DIVERGENCE}, "
                         f"not {options['on_divergence']!r}")
    local = options["rank_local"]
    if isinstance(local, str) or not all(isinstance(p, str) and p for p in local):
        raise ValueError("rank_local must be a sequence of function-name patterns "
                         f"(e.g. ('evaluate', '*.log_images')), not {local!r}")
    options["rank_local"] = tuple(local)
    timeout = options["divergence_timeout_s"]
    if (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
            or not 0 < float(timeout) <= 3600):
        raise ValueError(f"divergence_timeout_s must be seconds, > 0 and <= 3600, "
                         f"not {timeout!r}")
    ledger = options["ledger_path"]
    if not (ledger is None or isinstance(ledger, (bool, str, os.PathLike))) or ledger is True \
            or (isinstance(ledger, str) and not ledger.strip()):
        raise ValueError(f"ledger_path must be None, False or a file path, not {ledger!r}")
    if options["eager_op_spans"] not in EAGER_OP_SPANS:
        raise ValueError(f"eager_op_spans must be one of {EAGER_OP_SPANS}, "
                         f"not {options['eager_op_spans']!r}")
    port = options["prometheus_port"]
    if port is not None and (not _is_int(port) or not 0 <= port <= 65535):
        raise ValueError(f"prometheus_port must be None or an int port number 0-65535, "
                         f"not {port!r}")
    return options


def _divergence_reporter(targets: list[Any]) -> Any:
    """What a divergence between ranks produces: each emitter's view of it (a span, a
    counter, a WARNING log line and log record); a WARNING on the ``otel_jax`` logger
    when no JSON log is written."""
    emitters = [t for t in targets if callable(getattr(t, "divergence", None))]
    json_log = any(isinstance(t, LogEmitter) for t in emitters)

    def report(div: Any) -> None:
        for emitter in emitters:
            with ENGINE.failopen.guard("divergence report"):
                emitter.divergence(div)
        if not json_log:
            import logging

            logging.getLogger("otel_jax").warning("%s: ranks diverge at compile #%d (%s): %s",
                                                  div.function, div.count, div.kind.value,
                                                  div.text)
    return report


def _same(name: str, a: Any, b: Any) -> bool:
    if name in _BY_IDENTITY and not (isinstance(a, str) and isinstance(b, str)):
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return False


def _warn_ignored(active: dict[str, Any], asked: dict[str, Any]) -> None:
    """A repeated install() asking for something else: say what is ignored, once."""
    ignored = [name for name, value in asked.items()
               if not _same(name, value, _DEFAULTS[name]) and name in active
               and not _same(name, value, active[name])]
    if not ignored:
        return
    described = ", ".join(f"{name}={_short(asked[name])} (active: {_short(active[name])})"
                          for name in ignored)
    warn_once(WarnKey(Topic.INSTALL_IGNORED, ",".join(ignored)), (
        f"otel_jax is already installed; install() ignored {described}. Call "
        "otel_jax.uninstall() first to install with other arguments."))


def _short(value: Any) -> str:
    from .._core._text import safe_repr

    return safe_repr(value, 60)


def uninstall() -> None:
    """Remove every hook and listener otel_jax added; JAX is left exactly as it was.

    Queued JSON log lines are written first (waiting at most 2 s for the
    stream). Providers otel_jax created are flushed (not shut down: the
    application's own spans may still use them), for at most 2 s in all: what
    a collector that does not answer keeps is dropped with one
    ``OtelJaxWarning`` saying so. A no-op when not installed.
    """
    global _current
    with _lock:
        current, _current = _current, None
        if current is None:
            return
        ENGINE.set_span_emitter(None)
        STEPS.telemetry = None
        for sink in current.sinks:
            ENGINE.remove_sink(sink)
        ENGINE.set_storm_sink(None)
        ENGINE.on_recompile = "log"
        ENGINE.cross_rank.configure("off", ENGINE.cross_rank.timeout_s, None)
        ENGINE.ledger.configure(None)
        _scrub.configure(None)
        for sink in current.sinks:
            if isinstance(sink, LogEmitter):
                sink.close()  # bounded: waits for the stream at most UNINSTALL_FLUSH_S
        if current._providers is not None:
            try:  # bounded: a hung collector costs at most _export.UNINSTALL_SECONDS
                _providers.flush(current._providers)
            except Exception:  # never let a collector that is down fail uninstall
                pass
            _providers.stop_prometheus(current._providers)


def installation() -> Installation | None:
    """The active installation, if any."""
    return _current

