"""OpenTelemetry providers: the application's when it set them up, a working default otherwise.

The default honours the standard ``OTEL_*`` variables (service name, by default
the program's (:mod:`._resource`), and resource attributes, OTLP endpoint,
protocol, headers, timeouts, the ``OTEL_{TRACES,METRICS,LOGS}_EXPORTER`` selectors
and the Prometheus exporter's host and port). Export never blocks the training loop: spans and
logs go through batch processors with bounded queues, metrics through a
periodic reader, all on background threads.

Fail open: nothing read from the environment can make ``install()`` raise. A
Prometheus port that is taken or not a port, an exporter that cannot be built,
cost one ``OtelJaxWarning`` each; providers become global only once all of
them were built, so a failure leaves no half set-up behind. The providers
otel_jax creates are shut down at exit within ``_bounded.EXIT_SECONDS``.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import _logs as otel_logs
from opentelemetry import metrics, trace

from .._core._failopen import Topic, WarnKey, emit, once, warn_once


@dataclass
class Providers:
    """What install() uses; ``owned`` lists what otel_jax created and must shut down."""

    tracer_provider: Any
    meter_provider: Any
    logger_provider: Any | None
    prometheus_address: tuple[str, int] | None = None
    owned: list[Any] = field(default_factory=list)
    prometheus_server: Any = None


#: The API's stand-ins for a global provider nobody set, by signal: its proxy, or its no-op.
STAND_INS = {"traces": ("ProxyTracerProvider", "NoOpTracerProvider"),
             "metrics": ("_ProxyMeterProvider", "NoOpMeterProvider"),
             "logs": ("ProxyLoggerProvider", "NoOpLoggerProvider")}


def is_stand_in(signal: str, provider: Any) -> bool:
    """Whether ``provider`` is the API's stand-in for ``signal``'s (``STAND_INS``)."""
    return type(provider).__name__ in STAND_INS[signal]


def global_provider(signal: str) -> Any:
    """The API's global provider of ``signal`` (traces, metrics, logs): the application's,
    or the API's stand-in."""
    if signal == "traces":
        return trace.get_tracer_provider()
    if signal == "metrics":
        return metrics.get_meter_provider()
    return otel_logs.get_logger_provider()


def tracer_provider_configured() -> bool:
    return not is_stand_in("traces", global_provider("traces"))


def meter_provider_configured() -> bool:
    return not is_stand_in("metrics", global_provider("metrics"))


def logger_provider_configured() -> bool:
    return not is_stand_in("logs", global_provider("logs"))


def otlp_endpoint(signal: str) -> str | None:
    """The OTLP endpoint for ``signal`` (traces/metrics/logs), if any is configured."""
    return (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None)


def _selected(signal: str) -> list[str]:
    """``OTEL_{TRACES,METRICS,LOGS}_EXPORTER``: a comma-separated list, ``otlp`` by default."""
    value = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").strip().lower()
    return [v.strip() for v in value.split(",") if v.strip()]


def _wants_otlp(signal: str) -> bool:
    return "otlp" in _selected(signal) and otlp_endpoint(signal) is not None


def _wants_console(signal: str) -> bool:
    return "console" in _selected(signal)


def sdk_disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _protocol(signal: str) -> str:
    return (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()


_DEFAULT_TIMEOUT_S = 10.0


def export_timeout(signal: str) -> float:
    """The OTLP export timeout for ``signal``, in seconds.

    The Python SDK reads ``OTEL_EXPORTER_OTLP_[SIGNAL_]TIMEOUT`` as seconds, the
    specification as milliseconds: a value of 1000 or more is read as milliseconds
    (``2000`` is 2 s), a smaller one as seconds. A value that is not a positive
    number costs one warning and the default, 10 s.
    """
    for var in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = os.environ.get(var)
        if raw is None or not raw.strip():
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            warn_once(WarnKey(Topic.EXPORT_TIMEOUT, var),
                      f"otel_jax: {var}={raw!r} is not a positive number of seconds; using "
                      f"{_DEFAULT_TIMEOUT_S:g} s")
            return _DEFAULT_TIMEOUT_S
        return value / 1000 if value >= 1000 else value
    return _DEFAULT_TIMEOUT_S


def _exporter(signal: str) -> Any:
    """The OTLP exporter for ``signal`` (gRPC when asked for and installed, else HTTP),
    wrapped so that an unreachable collector costs one warning, not the user's time."""
    from . import _export, _health, _observe

    names = {"traces": "trace_exporter.OTLPSpanExporter",
             "metrics": "metric_exporter.OTLPMetricExporter",
             "logs": "_log_exporter.OTLPLogExporter"}
    wrappers = {"traces": _export.FailOpenSpanExporter,
                "metrics": _export.FailOpenMetricExporter,
                "logs": _export.FailOpenLogExporter}
    module, cls = names[signal].split(".")
    timeout = export_timeout(signal)
    inner = None
    observed = False
    if _protocol(signal) == "grpc":
        try:
            mod = __import__(f"opentelemetry.exporter.otlp.proto.grpc.{module}",
                             fromlist=[cls])
        except ImportError:
            if once(Topic.GRPC_MISSING):  # once, not once per signal
                emit("otel_jax: OTEL_EXPORTER_OTLP_PROTOCOL=grpc but the gRPC exporter "
                             "is not installed (pip install "
                             "opentelemetry-exporter-otlp-proto-grpc); using http/protobuf")
        else:
            inner = getattr(mod, cls)(timeout=timeout)
            observed = _observe.observe_grpc(inner)
    if inner is None:
        mod = __import__(f"opentelemetry.exporter.otlp.proto.http.{module}", fromlist=[cls])
        # The session records each request's status or error, so that a signal the
        # endpoint does not take is told from an endpoint that cannot be reached. A
        # credential provider (OTEL_PYTHON_EXPORTER_OTLP_HTTP_*CREDENTIAL_PROVIDER) brings
        # its own session: then failures are told apart less finely.
        if not _credential_provider(signal):
            try:
                inner = getattr(mod, cls)(timeout=timeout, session=_observe.observing_session())
                observed = True
            except (ImportError, TypeError):  # no requests, or an exporter without session=
                inner = None
        if inner is None:
            inner = getattr(mod, cls)(timeout=timeout)
    endpoint = otlp_endpoint(signal) or "the OTLP endpoint"
    _observe.quiet_exporter_logs()
    return wrappers[signal](inner, _health.breaker_for(endpoint, signal), timeout, observed)


def _credential_provider(signal: str) -> bool:
    return bool(os.environ.get("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER")
                or os.environ.get(
                    f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal.upper()}_CREDENTIAL_PROVIDER"))


def _resource() -> Any:
    from . import _resource

    return _resource.resource()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, the program


class _Build:
    """Providers being built: made global only when every one of them was built."""

    def __init__(self) -> None:
        self.owned: list[Any] = []
        self.make_global: list[Any] = []
        self.server: Any = None
        self.prometheus_address: tuple[str, int] | None = None


def _default_tracer_provider(build: _Build) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Shut down by otel_jax at exit, within a bound (see shutdown_at_exit).
    provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
    build.owned.append(provider)
    if _wants_otlp("traces"):
        provider.add_span_processor(BatchSpanProcessor(_exporter("traces")))
    if _wants_console("traces"):
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    build.make_global.append(lambda: trace.set_tracer_provider(provider))
    return provider


_PORT_HELP = ("Several processes on one host need one port each: set "
              "OTEL_EXPORTER_PROMETHEUS_PORT per process (e.g. 9464 + local rank).")


def _prometheus_request(port: int | None) -> tuple[str, int | None] | None:
    """``(host, port)`` when a Prometheus endpoint is asked for (``port`` None: asked for,
    but the environment's port is unusable, which cost one warning); None when not asked."""
    env_port = os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT")
    selected = [v.strip() for v in
                os.environ.get("OTEL_METRICS_EXPORTER", "").lower().split(",")]
    host = (os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST") or "").strip() or "localhost"
    if port is not None:  # install(prometheus_port=...), validated by install()
        return host, port
    if env_port is not None and env_port.strip():
        try:
            value = int(env_port.strip())
        except ValueError:
            value = -1
        if not 0 <= value <= 65535:
            warn_once(Topic.PROMETHEUS_PORT, (
                f"otel_jax: OTEL_EXPORTER_PROMETHEUS_PORT={env_port!r} is not a port number "
                "(0-65535); no Prometheus scrape endpoint is served. Metrics are still "
                "recorded in this process."))
            return host, None
        return host, value
    if "prometheus" in selected:
        return host, 9464
    return None


def _start_prometheus(build: _Build, host: str, port: int) -> None:
    from prometheus_client import start_http_server

    try:
        started = start_http_server(port, addr=host)
    except Exception as exc:  # port in use, host unknown, ...
        warn_once(Topic.PROMETHEUS_PORT, (
            f"otel_jax: cannot serve Prometheus metrics on {host}:{port} "
            f"({type(exc).__name__}: {exc}); no scrape endpoint in this process. Metrics are "
            f"still recorded in this process. {_PORT_HELP}"))
        return
    if isinstance(started, tuple):  # prometheus_client >= 0.20: (server, thread)
        build.server = started
        try:
            port = int(started[0].server_address[1])  # the real one when port was 0
        except Exception:
            pass
    build.prometheus_address = (host, port)


def _default_meter_provider(build: _Build, prometheus: tuple[str, int | None] | None) -> Any:
    readers: list[Any] = []
    if _wants_otlp("metrics"):
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(_exporter("metrics")))
    if _wants_console("metrics"):
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )

        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    if prometheus is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
        if prometheus[1] is not None:
            _start_prometheus(build, prometheus[0], prometheus[1])
    if not readers:
        return metrics.get_meter_provider()  # a proxy: binds if the app sets one later
    from opentelemetry.sdk.metrics import MeterProvider

    provider = MeterProvider(metric_readers=readers, resource=_resource(),
                             shutdown_on_exit=False)
    build.owned.append(provider)
    build.make_global.append(lambda: metrics.set_meter_provider(provider))
    return provider


def _default_logger_provider(build: _Build) -> Any | None:
    if not (_wants_otlp("logs") or _wants_console("logs")):
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource(), shutdown_on_exit=False)
    build.owned.append(provider)
    if _wants_otlp("logs"):
        provider.add_log_record_processor(BatchLogRecordProcessor(_exporter("logs")))
    if _wants_console("logs"):
        from opentelemetry.sdk._logs.export import ConsoleLogExporter

        provider.add_log_record_processor(BatchLogRecordProcessor(ConsoleLogExporter()))
    build.make_global.append(lambda: otel_logs.set_logger_provider(provider))
    return provider


def resolve(tracer_provider: Any = None, meter_provider: Any = None,
            logger_provider: Any = None, prometheus_port: int | None = None) -> Providers:
    """Providers passed in, else the global ones the application set, else defaults.

    Never raises for what the environment says: when the default set-up fails,
    one warning, nothing of it is left behind (no global provider, no open
    port), and the API's providers are used (the JSON lines still work).
    """
    if sdk_disabled():
        # OTEL_SDK_DISABLED=true: the API's no-op providers (and the JSON lines) only.
        return Providers(tracer_provider or trace.get_tracer_provider(),
                         meter_provider or metrics.get_meter_provider(), logger_provider)
    build = _Build()
    try:
        providers = _resolve(build, tracer_provider, meter_provider, logger_provider,
                             prometheus_port)
    except Exception as exc:
        _discard(build)
        warn_once(Topic.SETUP, (
            f"otel_jax: cannot set up OpenTelemetry export ({type(exc).__name__}: {exc}); "
            "compiles are still reported in the JSON log lines, and in the application's "
            "own providers if it sets them up."))
        return Providers(tracer_provider or trace.get_tracer_provider(),
                         meter_provider or metrics.get_meter_provider(),
                         logger_provider if logger_provider is not None else None)
    for make_global in build.make_global:
        make_global()
    _exit_owned.extend(build.owned)
    if build.owned:
        _register_exit()
    return providers


def _resolve(build: _Build, tracer_provider: Any, meter_provider: Any, logger_provider: Any,
             prometheus_port: int | None) -> Providers:
    if tracer_provider is None:
        tracer_provider = (trace.get_tracer_provider() if tracer_provider_configured()
                           else _default_tracer_provider(build))
    prometheus = _prometheus_request(prometheus_port)
    if meter_provider is None:
        if meter_provider_configured():
            meter_provider = metrics.get_meter_provider()
            if prometheus is not None and prometheus_port is not None:
                warn_once(Topic.PROMETHEUS_IGNORED, (
                    f"otel_jax: prometheus_port={prometheus_port} ignored: the application "
                    "configured its own MeterProvider; add a PrometheusMetricReader to it"))
        else:
            meter_provider = _default_meter_provider(build, prometheus)
    if logger_provider is None:
        logger_provider = (otel_logs.get_logger_provider() if logger_provider_configured()
                           else _default_logger_provider(build))
    return Providers(tracer_provider, meter_provider, logger_provider,
                     build.prometheus_address, build.owned, build.server)


def _discard(build: _Build) -> None:
    """Undo a set-up that failed half-way: close its port, shut its providers down."""
    if build.server is not None:
        _stop_server(build.server)
    for provider in build.owned:
        try:
            _bounded(provider.shutdown, 1.0)
        except Exception:
            pass


def _stop_server(server: Any) -> None:
    httpd, _thread = server
    try:
        httpd.shutdown()
        httpd.server_close()
    except Exception:
        pass


def stop_prometheus(providers: Providers) -> None:
    """Close the scrape endpoint so that its port is free again."""
    server = providers.prometheus_server
    providers.prometheus_server = None
    if server is not None:
        _stop_server(server)


def _bounded(fn: Any, seconds: float, *args: Any) -> None:
    from ._bounded import run_bounded

    run_bounded(fn, seconds, *args)


def flush(providers: Providers) -> None:
    """Flush what otel_jax created, within ``_bounded.UNINSTALL_SECONDS`` in all."""
    if not providers.owned:
        return
    from ._bounded import UNINSTALL_SECONDS, close_window, open_window, run_all_bounded

    window = open_window(UNINSTALL_SECONDS, "uninstall()")
    try:
        millis = max(1, int(window.remaining() * 1000))
        flushes = [getattr(p, "force_flush", None) for p in providers.owned]
        # Side by side: one signal's collector that does not answer costs no other its time.
        run_all_bounded([(f, (millis,)) for f in flushes if f is not None],
                        window.deadline, name="otel_jax-flush")
    finally:
        close_window(window)


# --- exit ------------------------------------------------------------------------------------

_exit_owned: list[Any] = []
_exit_registered = False
_exit_lock = threading.Lock()


def _register_exit() -> None:
    global _exit_registered
    # Imported now (nothing may be imported at exit): the exporters' module, with the
    # bounded calls it uses, whose exit threads are named here.
    from . import _export  # noqa: F401
    from ._bounded import prestart_exit_threads

    with _exit_lock:
        if not _exit_registered:
            _exit_registered = True
            atexit.register(shutdown_at_exit)
            before_exit(prestart_exit_threads)
    # Now: on Python 3.12.0-3.12.1 not even threading's exit hook can start them.
    prestart_exit_threads()


def before_exit(fn: Any) -> None:
    """Run ``fn`` when the main thread has ended, before ``atexit``'s handlers, while the
    interpreter still starts threads (from Python 3.12 an ``atexit`` handler cannot). That
    is ``threading``'s own exit hook (what ``concurrent.futures`` uses); without it, no
    hook: the bounded calls of the exit then make no call they cannot bound."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - CPython has had it since 3.9
        return
    try:
        register(fn)
    except Exception:  # already shutting down: nothing can be started any more
        pass


def shutdown_at_exit() -> None:
    """Shut down the providers otel_jax created, within ``_bounded.EXIT_SECONDS`` in all
    (the SDK's own exit handlers wait up to 30 s per signal on a hung collector)."""
    with _exit_lock:
        owned, _exit_owned[:] = list(_exit_owned), []
    if not owned:
        return
    bounded = sys.modules["otel_jax._emit._bounded"]
    window = bounded.open_window(bounded.EXIT_SECONDS, "exit")
    try:
        # Side by side: one signal's collector that does not answer costs no other its time.
        bounded.run_all_bounded([(p.shutdown, ()) for p in owned],
                                max(window.deadline, time.monotonic() + 0.2),
                                name="otel_jax-shutdown")
    finally:
        bounded.close_window(window)
