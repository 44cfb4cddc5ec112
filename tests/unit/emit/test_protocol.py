"""Where a signal goes when gRPC is asked for without its exporter (``_emit._protocol``)."""

from __future__ import annotations

import pytest

from otel_jax._emit import _protocol


@pytest.mark.parametrize(("endpoint", "insecure", "expected"), [
    ("http://collector:4317", None, "http://collector:4318/v1/traces"),
    ("https://collector.example.com:4317/", None, "https://collector.example.com:4318/v1/traces"),
    ("HTTP://127.0.0.1:4317", None, "http://127.0.0.1:4318/v1/traces"),
    ("http://[::1]:4317", None, "http://[::1]:4318/v1/traces"),
    ("collector:4317", None, "https://collector:4318/v1/traces"),  # TLS, as gRPC reads it
    ("collector:4317", "true", "http://collector:4318/v1/traces"),
    ("http://collector:14317", None, None),  # another port: its HTTP port is not known
    ("http://collector", None, None),
    ("http://collector:notaport", None, None),
    ("unix:///tmp/otlp.sock", None, None),
])
def test_http_instead_only_beside_the_default_grpc_port(monkeypatch, endpoint, insecure,
                                                         expected):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", raising=False)
    if insecure is None:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_INSECURE", raising=False)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", insecure)
    assert _protocol.http_instead("traces", endpoint) == expected


def test_the_protocol_of_a_signal_is_its_own_variable_first(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    assert _protocol.protocol("logs") == "grpc"
    assert _protocol.protocol_variable("logs") == "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
    assert _protocol.protocol("traces") == "http/protobuf"
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL")
    assert _protocol.protocol("traces") == "http/protobuf"  # the specification's default


def test_the_line_says_where_each_signal_goes_and_what_installs_grpc(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    line = _protocol.fallback_line(
        {"traces": "http://c:4318/v1/traces", "metrics": None},
        {"traces": "http://c:4317", "metrics": "http://m:9000"})
    assert line.startswith("otel_jax: OTEL_EXPORTER_OTLP_PROTOCOL=grpc, but the OTLP/gRPC "
                           "exporter is not installed (pip install "
                           "opentelemetry-exporter-otlp-proto-grpc, or the grpc extra "
                           "from a source checkout: pip install '.[grpc]')")
    assert "traces go by OTLP/HTTP to http://c:4318 instead" in line
    assert "metrics are not exported at all: http://m:9000 is not at the default" in line
    assert "otel_jax[grpc]" not in line
