"""Shared fixtures: real JAX on several CPU devices, otel_jax installed on in-memory exporters."""

from __future__ import annotations

import io
import json
import os

# Several CPU devices for the sharding and device-placement tests; must be set
# before JAX starts its backend.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402
import pytest  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import otel_jax  # noqa: E402
from otel_jax._engine import ENGINE  # noqa: E402


class Telemetry:
    """What one installed otel_jax emitted during a test."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.log = io.StringIO()
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self, name_prefix: str = "jax.compile ") -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(name_prefix)]

    def compiles(self, function: str | None = None, *, eager: bool = False) -> list:
        out = []
        for s in self.spans():
            if s.attributes.get("jax.compile.eager_op") and not eager:
                continue
            if function is None or s.attributes["code.function.name"] == function:
                out.append(s)
        return out

    def last(self, function: str):
        spans = self.compiles(function)
        assert spans, f"no compile span for {function}"
        return spans[-1]

    def log_lines(self) -> list[dict]:
        from otel_jax import _logs

        _logs.flush_all()  # lines are written off the compiling thread (at once for a StringIO)
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line.strip()]

    def metric_points(self, name: str) -> list:
        return self.collect_metrics().get(name, [])

    def collect_metrics(self) -> dict[str, list]:
        """All data points by metric name, from one collection (exemplars reset per one)."""
        data = self.reader.get_metrics_data()
        out: dict[str, list] = {}
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out


@pytest.fixture
def telemetry():
    otel_jax.uninstall()
    t = Telemetry()
    errors_before = ENGINE.internal_errors
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log)
    try:
        yield t
    finally:
        otel_jax.uninstall()
    t.internal_errors = ENGINE.internal_errors - errors_before


@pytest.fixture(autouse=True)
def _no_internal_errors(request):
    """Any otel_jax internal error is a bug, unless the test injects one on purpose."""
    before = ENGINE.internal_errors
    ENGINE.failopen.reset()
    yield
    if "injects_errors" not in request.keywords:
        assert ENGINE.internal_errors == before, "otel_jax hit an internal error"


@pytest.fixture
def library_module(tmp_path, monkeypatch):
    """``make(name, source)``: a module in a file otel_jax treats as a wrapper library's."""
    import importlib.util

    from otel_jax import _source

    files: set[str] = set()
    real = _source.is_library_file

    def is_library(filename):
        return filename in files or real(filename)

    monkeypatch.setattr(_source, "is_library_file", is_library)

    def make(name: str, source: str):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        files.add(str(path))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return make


def diff_of(span) -> list[dict]:
    return json.loads(span.attributes["jax.compile.cause.diff"])


def cpu_devices(n: int = 2):
    devices = jax.devices()
    assert len(devices) >= n, "tests need XLA_FLAGS=--xla_force_host_platform_device_count"
    return devices
