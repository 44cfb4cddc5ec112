"""The OTLP protocol of each signal, and what is done when gRPC is asked for but its
exporter is not installed.

``OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_PROTOCOL``
choose (``http/protobuf`` by default). Without the gRPC exporter, HTTP sent to a gRPC port
would be lost, so a signal is never sent to the endpoint it names by the other protocol:
an endpoint at the collector's default OTLP/gRPC port (4317) is sent OTLP/HTTP at the
same host's default OTLP/HTTP port (4318), where a collector serves both; any other
endpoint's HTTP port cannot be known, and that signal is not exported. One line at start
says which, and what to install.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

#: The ports an OpenTelemetry collector takes OTLP on by default (the OTLP specification).
GRPC_PORT = 4317
HTTP_PORT = 4318
#: What installs the gRPC exporter today: the package on PyPI, or otel_jax's own extra
#: from a checkout of its source (otel_jax is not on PyPI).
GRPC_INSTALL = ("pip install opentelemetry-exporter-otlp-proto-grpc, or the grpc extra "
                "from a source checkout: pip install '.[grpc]'")

#: A signal's OTLP/HTTP endpoint where gRPC was asked for without its exporter; None:
#: not exported.
Fallback = str | None


def protocol_variable(signal: str) -> str:
    """The variable that sets ``signal``'s protocol: its own where set, else the general
    one (which may be unset: the default)."""
    own = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
    return own if os.environ.get(own) else "OTEL_EXPORTER_OTLP_PROTOCOL"


def protocol(signal: str) -> str:
    """``signal``'s OTLP protocol: ``grpc``, ``http/protobuf`` (the default), as set."""
    return (os.environ.get(protocol_variable(signal)) or "http/protobuf").strip()


def endpoint_variable(signal: str) -> str:
    own = f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"
    return own if os.environ.get(own) else "OTEL_EXPORTER_OTLP_ENDPOINT"


def _insecure(signal: str) -> bool:
    for var in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE"):
        value = os.environ.get(var)
        if value:
            return value.strip().lower() == "true"
    return False


def http_instead(signal: str, endpoint: str) -> Fallback:
    """The OTLP/HTTP endpoint of ``signal`` for its gRPC ``endpoint``, when that is at the
    default gRPC port: the same host at the default HTTP port, with the signal's path
    (``http://collector:4317`` -> ``http://collector:4318/v1/traces``). None for any other
    port: the collector's HTTP port is not known. An endpoint without a scheme is TLS for
    the gRPC exporter unless ``OTEL_EXPORTER_OTLP_[SIGNAL_]INSECURE=true``, and stays so."""
    text = endpoint.strip()
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
    else:
        parts = urlsplit("//" + text)
        scheme = "http" if _insecure(signal) else "https"
    try:
        port = parts.port
    except ValueError:  # not a port number
        return None
    host = parts.hostname
    if port != GRPC_PORT or not host or scheme not in ("http", "https"):
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return f"{scheme}://{host}:{HTTP_PORT}/v1/{signal}"


def fallback_line(fallen: dict[str, Fallback], endpoints: dict[str, str]) -> str:
    """The one line said at start: which signals go by OTLP/HTTP to which endpoint, which
    are not exported and why, and what to install for gRPC. ``fallen``: signal -> its
    fallback; ``endpoints``: signal -> the gRPC endpoint it named."""
    variables = sorted({protocol_variable(s) for s in fallen})
    moved = {s: url for s, url in fallen.items() if url is not None}
    lost = [s for s, url in fallen.items() if url is None]
    parts = [f"otel_jax: {', '.join(v + '=grpc' for v in variables)}, but the OTLP/gRPC "
             f"exporter is not installed ({GRPC_INSTALL})"]
    if moved:
        where = sorted({url.rsplit("/v1/", 1)[0] for url in moved.values()})
        parts.append(f"{', '.join(moved)} go by OTLP/HTTP to {', '.join(where)} instead "
                     f"(the collector's OTLP/HTTP port, {HTTP_PORT}, beside its gRPC port "
                     f"{GRPC_PORT})")
    if lost:
        named = sorted({endpoints[s] for s in lost})
        parts.append(f"{', '.join(lost)} are not exported "
                     f"at all: {', '.join(named)} is not at the default gRPC port "
                     f"{GRPC_PORT}, so the collector's OTLP/HTTP port is not "
                     "known (or set the protocol to http/protobuf and the endpoint to the "
                     "collector's OTLP/HTTP port); compiles are still in the log lines")
    return "; ".join(parts)
