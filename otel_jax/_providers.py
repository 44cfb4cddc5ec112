"""OpenTelemetry providers: the application's when it set them up, a working default otherwise.

The default honours the standard ``OTEL_*`` variables (service name and
resource attributes, OTLP endpoint, protocol, headers, timeouts, the
``OTEL_{TRACES,METRICS,LOGS}_EXPORTER`` selectors and the Prometheus
exporter's host and port). Export never blocks the training loop: spans and
logs go through batch processors with bounded queues, metrics through a
periodic reader, all on background threads.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry import _logs as otel_logs

_log = logging.getLogger("otel_jax")


@dataclass
class Providers:
    """What install() uses; ``owned`` lists what otel_jax created and must shut down."""

    tracer_provider: Any
    meter_provider: Any
    logger_provider: Any | None
    prometheus_address: tuple[str, int] | None = None
    owned: list[Any] = field(default_factory=list)
    prometheus_server: Any = None


def _configured(provider: Any, *proxy_names: str) -> bool:
    return type(provider).__name__ not in proxy_names


def tracer_provider_configured() -> bool:
    return _configured(trace.get_tracer_provider(), "ProxyTracerProvider", "NoOpTracerProvider")


def meter_provider_configured() -> bool:
    return _configured(metrics.get_meter_provider(), "_ProxyMeterProvider", "NoOpMeterProvider")


def logger_provider_configured() -> bool:
    return _configured(otel_logs.get_logger_provider(), "ProxyLoggerProvider",
                       "NoOpLoggerProvider")


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


_breakers: dict[str, Any] = {}


def _exporter(signal: str) -> Any:
    """The OTLP exporter for ``signal`` (gRPC when asked for and installed, else HTTP),
    wrapped so that an unreachable collector costs one warning, not the user's time."""
    from . import _export

    names = {"traces": "trace_exporter.OTLPSpanExporter",
             "metrics": "metric_exporter.OTLPMetricExporter",
             "logs": "_log_exporter.OTLPLogExporter"}
    wrappers = {"traces": _export.FailOpenSpanExporter,
                "metrics": _export.FailOpenMetricExporter,
                "logs": _export.FailOpenLogExporter}
    module, cls = names[signal].split(".")
    inner = None
    if _protocol(signal) == "grpc":
        try:
            mod = __import__(f"opentelemetry.exporter.otlp.proto.grpc.{module}",
                             fromlist=[cls])
            inner = getattr(mod, cls)()
        except ImportError:
            _log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=grpc but the gRPC exporter is not "
                         "installed (pip install 'otel_jax[grpc]'); using http/protobuf")
    if inner is None:
        mod = __import__(f"opentelemetry.exporter.otlp.proto.http.{module}", fromlist=[cls])
        inner = getattr(mod, cls)()
    endpoint = otlp_endpoint(signal) or "the OTLP endpoint"
    breaker = _breakers.setdefault(endpoint, _export.Breaker(endpoint))
    _export.quiet_exporter_logs()
    return wrappers[signal](inner, breaker)


def _resource() -> Any:
    from opentelemetry.sdk.resources import Resource

    return Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES


def _default_tracer_provider(owned: list[Any]) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=_resource())
    if _wants_otlp("traces"):
        provider.add_span_processor(BatchSpanProcessor(_exporter("traces")))
    if _wants_console("traces"):
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    owned.append(provider)
    return provider


def _prometheus_address(port: int | None) -> tuple[str, int] | None:
    env_port = os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT")
    selected = os.environ.get("OTEL_METRICS_EXPORTER", "").lower().split(",")
    if port is None and (env_port or "prometheus" in selected):
        port = int(env_port or 9464)
    if port is None:
        return None
    return os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "localhost"), int(port)


def _default_meter_provider(owned: list[Any], prometheus: tuple[str, int] | None,
                            servers: list[Any]) -> Any:
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
        from prometheus_client import start_http_server

        readers.append(PrometheusMetricReader())
        servers.append(start_http_server(prometheus[1], addr=prometheus[0]))
    if not readers:
        return metrics.get_meter_provider()  # a proxy: binds if the app sets one later
    from opentelemetry.sdk.metrics import MeterProvider

    provider = MeterProvider(metric_readers=readers, resource=_resource())
    metrics.set_meter_provider(provider)
    owned.append(provider)
    return provider


def _default_logger_provider(owned: list[Any]) -> Any | None:
    if not (_wants_otlp("logs") or _wants_console("logs")):
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    provider = LoggerProvider(resource=_resource())
    if _wants_otlp("logs"):
        provider.add_log_record_processor(BatchLogRecordProcessor(_exporter("logs")))
    if _wants_console("logs"):
        from opentelemetry.sdk._logs.export import ConsoleLogExporter

        provider.add_log_record_processor(BatchLogRecordProcessor(ConsoleLogExporter()))
    otel_logs.set_logger_provider(provider)
    owned.append(provider)
    return provider


def resolve(tracer_provider: Any = None, meter_provider: Any = None,
            logger_provider: Any = None, prometheus_port: int | None = None) -> Providers:
    """Providers passed in, else the global ones the application set, else defaults."""
    owned: list[Any] = []
    servers: list[Any] = []
    if sdk_disabled():
        # OTEL_SDK_DISABLED=true: the API's no-op providers (and the JSON lines) only.
        return Providers(tracer_provider or trace.get_tracer_provider(),
                         meter_provider or metrics.get_meter_provider(), logger_provider)
    if tracer_provider is None:
        tracer_provider = (trace.get_tracer_provider() if tracer_provider_configured()
                           else _default_tracer_provider(owned))
    prometheus = _prometheus_address(prometheus_port)
    if meter_provider is None:
        if meter_provider_configured():
            meter_provider = metrics.get_meter_provider()
            if prometheus is not None and prometheus_port is not None:
                _log.warning("prometheus_port=%s ignored: the application configured its "
                             "own MeterProvider; add a PrometheusMetricReader to it",
                             prometheus_port)
            prometheus = None
        else:
            meter_provider = _default_meter_provider(owned, prometheus, servers)
    else:
        prometheus = None
    if logger_provider is None:
        logger_provider = (otel_logs.get_logger_provider() if logger_provider_configured()
                           else _default_logger_provider(owned))
    return Providers(tracer_provider, meter_provider, logger_provider, prometheus, owned,
                     servers[0] if servers else None)


def stop_prometheus(providers: Providers) -> None:
    """Close the scrape endpoint so that its port is free again."""
    server = providers.prometheus_server
    providers.prometheus_server = None
    if server is not None:
        httpd, _thread = server
        httpd.shutdown()
        httpd.server_close()
