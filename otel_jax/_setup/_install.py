"""``install()`` / ``uninstall()``: wire the compile records to spans, metrics and logs."""

from __future__ import annotations

import atexit
import gc
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal

from opentelemetry import trace

from .._capture._jax._capabilities import Capability
from .._core import _scrub
from .._core._failopen import Topic, WarnKey, warn_once
from .._core._vocab import INSTRUMENTATION_SCOPE, SCRUB_ENV
from .._emit import _logs, _providers
from .._emit._app_structlog import StructlogEmitter
from .._emit._console import LogFormat
from .._emit._logs import (
    STDERR,
    STRUCTLOG,
    JsonLogEmitter,
    LogEmitter,
    LogOutput,
)
from .._emit._metrics import MetricsEmitter
from .._emit._otel_logs import OtelLogEmitter
from .._emit._spans import SpanEmitter
from .._fleet import _ledger_remote
from .._pipeline._background import WORKER
from .._pipeline._emitter import STDLIB_WARNINGS, Emitter, Route
from .._pipeline._engine import ENGINE
from .._pipeline._history import DEFAULT_MAX_FUNCTIONS
from .._pipeline._steps import STEPS, StepTelemetry
from .._version import __version__
from . import _exit
from ._checks import CROSS_RANK, LEDGER
from ._options import InstallOptions

if TYPE_CHECKING:
    from .._emit import _barrier

_lock = threading.Lock()


@dataclass
class Installation:
    """The handle ``install()`` returns; ``uninstall()`` undoes it."""

    tracer_provider: Any
    meter_provider: Any
    logger_provider: Any | None
    prometheus_address: tuple[str, int] | None
    #: The emitters that receive each record with its compile span's ids (the span
    #: emitter, which makes those ids, is not among them).
    sinks: list[Emitter] = field(default_factory=list)
    #: What this JAX version's internals do not give (empty on the tested versions):
    #: those facts fall back, as install()'s one ``OtelJaxWarning`` said.
    unavailable: frozenset[Capability] = frozenset()
    _providers: _providers.Providers | None = None
    _log: LogEmitter | None = None  # the log-line emitter, flushed at uninstall()
    #: The barriers in the providers: their flush and shutdown emit otel_jax's pending work.
    _barriers: _barrier.Attached | None = None
    #: Replaced, not kept, by a later install() with other arguments (``otel-jax run``'s).
    _yields: bool = field(default=False, repr=False)
    _options: InstallOptions = field(default_factory=InstallOptions, repr=False)

    @property
    def active(self) -> bool:
        return _current is self

    def uninstall(self) -> None:
        """Remove every hook and listener otel_jax added to JAX (same as ``otel_jax.uninstall``)."""
        uninstall()


_current: Installation | None = None
#: Text streams every installation also writes its JSON lines to (JAX's eager ops' DEBUG
#: lines too), whatever ``log_output`` says: ``otel-jax run``'s per-process file, read for
#: its summary at exit.
EXTRA_JSON_STREAMS: list[IO[str]] = []


def install(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    logger_provider: Any = None,
    log_output: IO[str] | LogOutput | None = "stderr",
    log_format: LogFormat = "auto",
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
    emit_in_background: bool = True,
    hazards: bool = True,
    max_functions: int = 4096,
    programs: str | os.PathLike[str] | None = None,
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
        log_format: how those lines read: ``"auto"`` (default) one short console
            line per event when the output is a terminal (colors unless ``NO_COLOR``
            is set), JSON otherwise; ``"json"`` always JSON; ``"console"`` always
            console lines. Not used with ``log_output="structlog"``.
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
        emit_in_background: ``True`` (default): what dies with the jit call (the
            signature's parts, the caller's frame) is read inside it; each compile's
            record and cause, then its spans, metrics and log lines, are made on
            otel_jax's one background thread after the compile, in the context
            captured at the compile (they still nest under the application's current
            span, with the compile's own start and end times), and are visible after
            ``otel_jax.flush()``. The testing kit and ``on_recompile="warn"`` /
            ``"raise"`` still get each record before the jit call returns (it is made
            there while they are in use), and ``compile_history`` waits for the
            records still being made. ``False``: all of it on the compiling thread,
            inside the jit call.
        hazards: ``True`` (default): name the recompiles a compile shows are coming,
            before they are paid for (a weakly typed scalar fed back as an array, a
            static argument hashed by identity, a jitted function defined in a loop, a
            length that changes at every compile): a ``jax.compile.hazard`` span event
            on the compile span, log line and counter, and one ``OtelJaxWarning`` per
            function and kind (notes, less sure, are INFO lines only). Looked for where
            the cause is worded (off the compiling thread by default); a cache hit
            costs nothing. ``False``: none.
        max_functions: the distinct functions whose compile detail is kept (default
            4096): their last signatures (what a recompile is compared with), their
            ``compile_history`` and their cause counts. Past it the least recently
            compiled function's detail is dropped first (its next compile is compared
            with nothing earlier, its history starts again), counted by the
            ``jax.compile.functions_dropped`` counter; compile counts stay exact.
        programs: a folder to keep each distinct lowered program in, once (by its
            program fingerprint, gzip-compressed, ``<function>-<fingerprint>.mlir.gz``,
            with its source locations and large constants elided), the folder bounded
            in bytes with the oldest dropped first; named on the compile's span
            (``jax.compile.program.file``) and log line, listed by ``otel-jax report``.
            ``None`` (default): ``OTEL_JAX_PROGRAMS`` when set, else none kept: nothing
            of a program leaves the process.

    Environment: an option left at its default takes its ``OTEL_JAX_*`` variable when
    that is set (``OTEL_JAX_STORM_THRESHOLD=4``, ``OTEL_JAX_LOG_OUTPUT=none``,
    ``OTEL_JAX_RANK_LOCAL=evaluate,*.log_images``): the way to configure the zero-code
    path. Each option's variable is its name upper-cased after ``OTEL_JAX_``
    (``OTEL_JAX_LEDGER`` for ``ledger_path``); the providers have none and
    ``prometheus_port`` reads ``OTEL_EXPORTER_PROMETHEUS_PORT``. A value a variable cannot
    give costs one ``OtelJaxWarning`` and the default is kept.

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
    # The parameters above are InstallOptions' fields (a test keeps them the same):
    # checked here, at the caller's line, before anything is set up.
    options = InstallOptions(**locals()).with_environment(
        warn=lambda key, message: warn_once(WarnKey(Topic.ENVIRONMENT, key), message))
    # JAX is imported before the lock is taken: ``otel-jax run`` installs otel_jax when the
    # program imports JAX, so a program that calls install() before it imports JAX would
    # otherwise import JAX (in the hooks) with the lock held, and wait for ever on the
    # command's install() waiting for the lock. Imported here, the command's installation
    # is made first and gives way to this one, as when the program imports JAX first.
    import jax  # noqa: F401
    with _lock:
        active = _current
        if active is not None and not (active._yields and active._options.differing(options)):
            _warn_ignored(active._options, options)
            return active
    if active is not None:  # ``otel-jax run``'s installation gives way to the program's own
        uninstall()
    with _lock:
        if _current is not None:  # another thread installed meanwhile
            return _current
        # What is set up below is the checked options' (the environment's included).
        o = options
        tracer_provider, meter_provider, logger_provider = (
            o.tracer_provider, o.meter_provider, o.logger_provider)
        log_output, log_level, prometheus_port = o.log_output, o.log_level, o.prometheus_port
        storm_threshold, warmup_steps, on_recompile = (
            o.storm_threshold, o.warmup_steps, o.on_recompile)
        scrub, on_divergence, divergence_timeout_s = (
            o.scrub, o.on_divergence, o.divergence_timeout_s)
        rank_local, ledger_path, eager_op_spans = o.rank_local, o.ledger_path, o.eager_op_spans
        ENGINE.emit_in_background = o.emit_in_background
        ENGINE.hazards = o.hazards
        ENGINE.history.set_max_functions(o.max_functions)
        ENGINE.programs_dir = os.fspath(o.programs) if o.programs is not None else None
        _scrub.configure(scrub)
        refusal = _scrub.refusal() if scrub is None else None
        if refusal is not None:
            warn_once(WarnKey(Topic.ENVIRONMENT, SCRUB_ENV), refusal)
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
        sinks: list[Emitter] = [
            MetricsEmitter(providers.meter_provider.get_meter(scope, __version__),
                           lambda: ENGINE.history.dropped_functions)]
        json_log: LogEmitter | None = None
        if isinstance(log_output, str) and log_output == STRUCTLOG:
            json_log = StructlogEmitter(log_level, failopen=ENGINE.failopen)
        elif log_output is not None:
            json_log = JsonLogEmitter(None if log_output == STDERR else log_output,
                                      log_level, failopen=ENGINE.failopen,
                                      log_format=o.log_format)
        if json_log is not None:
            sinks.append(json_log)
        # Every compile, JAX's eager ops' (DEBUG) too: ``otel-jax run``'s summary counts them.
        extra = [JsonLogEmitter(stream, "debug", failopen=ENGINE.failopen)
                 for stream in EXTRA_JSON_STREAMS]
        sinks += extra
        if providers.logger_provider is not None:
            sinks.append(OtelLogEmitter(providers.logger_provider.get_logger(scope, __version__),
                                        eager_ops=log_level == "debug"))
        ENGINE.storm_threshold = storm_threshold
        ENGINE.on_recompile = on_recompile
        ENGINE.configure_warmup(warmup_steps)
        LEDGER.configure(ledger_path)
        # The span emitter runs first and hands each record's span ids to every
        # other emitter: the order in which those run does not matter. Without log
        # lines, storms and divergences are WARNINGs on the ``logging`` logger.
        route = Route(ENGINE.failopen, SpanEmitter(tracer, eager_op_spans),
                      [*(sinks if json_log is not None else [*sinks, STDLIB_WARNINGS]),
                       _exit.COMPILES])
        STEPS.telemetry = StepTelemetry(tracer, providers.meter_provider.get_meter(
            scope, __version__), [e for e in (json_log, *extra) if e is not None])
        ENGINE.connect(route)
        CROSS_RANK.rank_local = tuple(rank_local)
        CROSS_RANK.configure(on_divergence, float(divergence_timeout_s),
                                    route.divergence)
        # After the providers' own exit handlers (atexit runs the latest first): what is
        # still queued at exit reaches them before they shut down.
        atexit.unregister(_flush_at_exit)
        atexit.register(_flush_at_exit)
        _exit.flush_in_forked_children(_flush_in_child)
        _exit.flush_after_tasks(_flush_after_task)
        from .._emit import _barrier  # the SDK's span processor: imported at install()

        barriers = _barrier.attach(_flush_for_provider, providers.tracer_provider,
                                   providers.meter_provider, providers.logger_provider)
        ENGINE.watch = _barrier.attach_when_set(
            _flush_for_provider, barriers, providers.tracer_provider,
            providers.meter_provider, providers.logger_provider)
        _current = Installation(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
            prometheus_address=providers.prometheus_address,
            sinks=sinks,
            unavailable=ENGINE.unavailable,
            _providers=providers,
            _log=json_log,
            _barriers=barriers,
            _options=options,
        )
        return _current


def _metrics_api() -> Any:
    from opentelemetry import metrics

    return metrics


def _warn_ignored(active: InstallOptions, asked: InstallOptions) -> None:
    """A repeated install() asking for something else: say what is ignored, once."""
    ignored = active.differing(asked)
    if not ignored:
        return
    described = ", ".join(f"{name}={_short(getattr(asked, name))} "
                          f"(active: {_short(getattr(active, name))})" for name in ignored)
    warn_once(WarnKey(Topic.INSTALL_IGNORED, ",".join(ignored)), (
        f"otel_jax is already installed; install() ignored {described}. Call "
        "otel_jax.uninstall() first to install with other arguments."))


def _short(value: Any) -> str:
    from .._core._text import safe_repr

    return safe_repr(value, 60)


def uninstall() -> None:
    """Remove every hook and listener otel_jax added; JAX is left exactly as it was.

    Records still to be made are made first, and compiles still being emitted on the
    background thread are emitted and queued JSON log lines written (waiting at most 2 s
    for the thread in all, :func:`flush`).
    Providers otel_jax created are flushed (not shut down: the application's own
    spans may still use them), for at most 2 s in all: what a collector that does
    not answer keeps is dropped with one ``OtelJaxWarning`` saying so. A no-op
    when not installed.
    """
    global _current
    with _lock:
        current, _current = _current, None
        if current is None:
            return
        ENGINE.watch = None
        ENGINE.connect(None)
        # Before the log stream closes and the providers flush: what was handed to the
        # background thread reaches them (bounded, like the rest of uninstall).
        flush(UNINSTALL_FLUSH_S)
        ENGINE.emit_in_background = True
        ENGINE.hazards = True
        ENGINE.history.set_max_functions(DEFAULT_MAX_FUNCTIONS)
        ENGINE.programs_dir = None
        STEPS.telemetry = None
        ENGINE.on_recompile = "log"
        CROSS_RANK.configure("off", CROSS_RANK.timeout_s, None)
        LEDGER.configure(None)
        _scrub.configure(None)
        if current._log is not None:
            current._log.close()  # bounded: waits for the stream at most UNINSTALL_FLUSH_S
        if current._providers is not None:
            try:  # bounded: a hung collector costs at most _bounded.UNINSTALL_SECONDS
                _providers.flush(current._providers)
            except Exception:  # never let a collector that is down fail uninstall
                pass
            _providers.stop_prometheus(current._providers)
        if current._barriers is not None:
            current._barriers.detach()


#: How long uninstall() waits for what is still being emitted (the log stream and the
#: providers' flushes have their own bounds).
UNINSTALL_FLUSH_S = 2.0
#: How long the process's exit waits for it.
EXIT_FLUSH_S = 2.0
#: flush()'s default bound.
FLUSH_TIMEOUT_S = 10.0


def flush(timeout: float | None = FLUSH_TIMEOUT_S) -> bool:
    """Emit what otel_jax still holds: wait until every compile so far has reached the
    providers and the log output.

    By default a compile's spans, metrics and log lines are made on otel_jax's
    background thread after the jit call returned (``install(emit_in_background=...)``):
    call this before reading an in-memory exporter, a metric reader or the log stream
    right after a compile. It hands them to the OpenTelemetry providers; exporting them
    is the providers' (``force_flush()`` on a batching one). With a remote persistent
    cache, it also waits for the compile ledger's writes still queued (process 0's), so
    that the next run explains its misses. ``uninstall()`` and the process's exit call
    it, boundedly.

    Args:
        timeout: the longest wait in seconds (default 10); ``None`` waits as long as it
            takes. A compile whose emission is still running then (an exporter that
            blocks) is left to finish on its own.

    Returns:
        Whether everything was emitted within ``timeout``. Never raises.
    """
    try:
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        made = ENGINE.settle(timeout)  # records still to be made, made here: then emitted
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done = WORKER.flush(left) and made
        left = _logs.UNINSTALL_FLUSH_S if deadline is None else max(
            0.0, deadline - time.monotonic())
        done = _logs.flush_all(left) and done
        # the compile ledger's writes to a remote cache (process 0's), queued by compiles
        left = _ledger_remote.EXIT_WAIT_S if deadline is None else max(
            0.0, deadline - time.monotonic())
        return _ledger_remote.flush_all(left) and done
    except Exception:  # flushing never fails the program
        return False


#: Set once the exit's own flush ran: what it could not emit in its bound (an exporter that
#: blocks otel_jax's thread) is not waited for again by each provider that shuts down.
_exiting = False
#: How long a provider's flush or shutdown waits for otel_jax once the exit's flush ran.
EXITING_WAIT_S = 0.1


#: How long the exit waits, once its flush ran, for the background thread to end.
EXIT_STOP_S = 0.5


def _flush_at_exit() -> None:
    global _exiting
    # The program's garbage is freed first, here, on the exiting thread, where the program
    # has its collector on (its own gc.disable() holds): a finalizer of its own (one that
    # compiles, say) then runs here rather than on a thread of otel_jax's as that thread
    # does the exit's work, which the exit waits for only so long.
    if gc.isenabled():
        gc.collect()
    flush(EXIT_FLUSH_S)
    # Then the thread ends (``_background.end_threads_at_exit`` waits for it, bounded):
    # nothing runs on it while the interpreter tears down (a compile there, in a finalizer
    # or a processor of the user's, aborts the process). Later compiles are emitted on the
    # exiting thread.
    WORKER.stop(EXIT_STOP_S)
    _exiting = True


def _flush_for_provider(seconds: float) -> bool:
    """``flush`` as a provider's flush or shutdown calls it (``_barrier``)."""
    return flush(min(seconds, EXITING_WAIT_S) if _exiting else seconds)


def _flush_in_child() -> None:
    """A process forked after install() ends through ``multiprocessing``'s exit path
    (``os._exit``, no ``atexit``): its compiles reach the providers and are exported,
    boundedly, as at a normal exit."""
    current = _current
    flush(EXIT_FLUSH_S)
    if current is not None:
        _exit.flush_providers(current.tracer_provider, current.meter_provider,
                              current.logger_provider)
    _logs.flush_all(_logs.EXIT_FLUSH_S)


#: Just before ``os.exec*`` replaces the process (``otel-jax run`` watches for it, see
#: ``_run._exec``): what it holds written and exported, boundedly, as at a child's exit.
flush_before_exec = _flush_in_child


def _flush_after_task(exports: bool) -> bool:
    """A ``multiprocessing.Pool`` worker's task compiled: its lines are written and, with
    ``exports``, its spans, points and records exported, before the parent has the result
    (and may terminate the worker); bounded. Whether all of it was done in time."""
    current = _current
    started = time.monotonic()
    done = flush(_exit.TASK_FLUSH_S)
    if current is not None and exports:
        _exit.flush_providers(current.tracer_provider, current.meter_provider,
                              current.logger_provider, seconds=_exit.TASK_FLUSH_S)
        done = done and time.monotonic() - started < 2 * _exit.TASK_FLUSH_S
    return done


def installation() -> Installation | None:
    """The active installation, if any."""
    return _current

