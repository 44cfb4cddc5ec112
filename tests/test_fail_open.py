"""Fail open: no configuration, collector or record may break, block or hang the program.

Each family of the fault matrix is one parametrised test: bad Prometheus ports, bad
``OTEL_*`` values, collectors that are down or never answer, records that cannot be
encoded, invalid install() arguments. Providers are global, so set-ups run in fresh
processes; the exporter wrappers are also tested in-process with fakes.
"""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import jax
import pytest
from conftest import PLAIN_SCRIPT, clean_env, free_port, loopback_listener, needs_loopback

import otel_jax
from otel_jax._core import _failopen, _text
from otel_jax._emit import _bounded, _export, _health, _observe, _providers
from otel_jax._pipeline._engine import OtelJaxWarning

ROOT = Path(__file__).resolve().parent.parent




def python(script: str, env: dict[str, str], *args: str, timeout: float = 240,
           cmd: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*(cmd or [sys.executable]), "-c", script, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def result_of(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def without_jax_warnings(lines: list[str]) -> list[str]:
    """``lines`` less the warnings JAX's own files give as it starts (a TPU host's runtime
    warns about its page size, say), each with the source line Python shows under it."""
    jax_dir = str(Path(jax.__file__).parent)
    kept: list[str] = []
    skip_next = False
    for line in lines:
        if skip_next and line.startswith("  "):
            skip_next = False
            continue
        skip_next = line.startswith(jax_dir) and "Warning: " in line
        if not skip_next:
            kept.append(line)
    return kept


def otel_jax_warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "OtelJaxWarning" in ln]


# --- install() never fails on the environment -------------------------------------------------

INSTALL_SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("always")
    from opentelemetry import trace
    import jax, jax.numpy as jnp, otel_jax
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = otel_jax.install(log_output=None)
    jax.jit(lambda x: x * 2)(jnp.ones(3))
    from prometheus_client import REGISTRY, generate_latest
    print("RESULT " + json.dumps({
        "address": handle.prometheus_address,
        "warnings": [str(w.message) for w in caught
                     if issubclass(w.category, otel_jax.OtelJaxWarning)],
        "tracer_provider": type(trace.get_tracer_provider()).__name__,
        "recorded": "jax_compilations" in generate_latest(REGISTRY).decode(),
    }))
""")


@pytest.fixture
def port_in_use():
    with loopback_listener() as s:
        s.listen(1)
        yield str(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize("port", ["in use", "abc", "-1", "70000"])
def test_bad_prometheus_port_costs_one_warning(port, request):
    if port == "in use":
        port = request.getfixturevalue("port_in_use")
    env = clean_env(OTEL_EXPORTER_PROMETHEUS_PORT=port, OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1")
    result = result_of(python(INSTALL_SCRIPT, env))
    assert result["address"] is None  # no scrape endpoint in this process
    assert len(result["warnings"]) == 1 and "Prometheus" in result["warnings"][0]
    assert result["recorded"]  # the metrics are still recorded in the process
    assert result["tracer_provider"] == "TracerProvider"


@pytest.mark.slow
def test_two_processes_sharing_one_prometheus_port():
    """Several ranks on one host with one environment: the first serves, the rest warn."""
    port = str(free_port())
    env = clean_env(OTEL_EXPORTER_PROMETHEUS_PORT=port, OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, otel_jax; h = otel_jax.install(log_output=None);"
         " print(h.prometheus_address, flush=True); time.sleep(120)"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert port in holder.stdout.readline()
        second = result_of(python(INSTALL_SCRIPT, env))
    finally:
        holder.kill()
        holder.wait(timeout=20)
    assert second["address"] is None and len(second["warnings"]) == 1
    assert "OTEL_EXPORTER_PROMETHEUS_PORT per process" in second["warnings"][0]


@pytest.mark.slow
def test_prometheus_port_zero_serves_on_a_free_port_and_says_which():
    needs_loopback()
    script = textwrap.dedent("""
        import json, urllib.request
        import jax, jax.numpy as jnp, otel_jax
        handle = otel_jax.install(log_output=None, prometheus_port=0)
        jax.jit(lambda x: x - 1)(jnp.ones(2))
        host, port = handle.prometheus_address
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read().decode()
        print("RESULT " + json.dumps({"port": port, "served": "jax_compilations" in body}))
    """)
    env = clean_env(OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1")
    result = result_of(python(script, env))
    assert result["port"] > 0 and result["served"] is True


@pytest.mark.slow
@pytest.mark.parametrize("variables", [
    {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TIMEOUT": "abc"},
    {"OTEL_EXPORTER_OTLP_TIMEOUT": "-5"},
    {"OTEL_BSP_MAX_QUEUE_SIZE": "-3"},
    {"OTEL_METRIC_EXPORT_INTERVAL": "0"},
], ids=["grpc-timeout-abc", "timeout-negative", "bsp-queue-negative", "metric-interval-0"])
def test_bad_environment_never_raises(variables):
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}", **variables)
    result = result_of(python(INSTALL_SCRIPT, env))
    assert len(result["warnings"]) == 1
    assert any(name in result["warnings"][0] for name in (*variables, "cannot set up"))


FAILED_SETUP_SCRIPT = textwrap.dedent("""
    import json, warnings
    from opentelemetry import trace
    import otel_jax
    from otel_jax._emit import _providers

    def broken(build):
        raise RuntimeError("injected")

    _providers._default_logger_provider = broken  # fails after the TracerProvider was built
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = otel_jax.install(log_output=None)
    left_behind = type(trace.get_tracer_provider()).__name__
    from opentelemetry.sdk.trace import TracerProvider
    app_provider = TracerProvider()
    trace.set_tracer_provider(app_provider)  # the application can still set its own
    print("RESULT " + json.dumps({
        "installed": handle.active,
        "left_behind": left_behind,
        "app_provider_set": trace.get_tracer_provider() is app_provider,
        "warnings": [str(w.message) for w in caught
                     if issubclass(w.category, otel_jax.OtelJaxWarning)],
    }))
""")


@pytest.mark.slow
def test_a_failed_set_up_leaves_no_global_provider_behind():
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    result = result_of(python(FAILED_SETUP_SCRIPT, env))
    assert result["installed"] is True  # the JSON lines still work
    assert result["left_behind"] == "ProxyTracerProvider"
    assert result["app_provider_set"] is True
    assert len(result["warnings"]) == 1 and "injected" in result["warnings"][0]


# --- install() arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"prometheus_port": "abc"}, {"prometheus_port": -1}, {"prometheus_port": 70000},
    {"prometheus_port": True}, {"log_level": "verbose"}, {"storm_threshold": -1},
    {"storm_threshold": 0}, {"storm_threshold": 2.5}, {"warmup_steps": 2.5},
    {"warmup_steps": -1}, {"warmup_steps": "3"}, {"log_output": 42},
    {"on_recompile": "explode"},
], ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_invalid_arguments_raise_a_clear_value_error(kwargs):
    otel_jax.uninstall()
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        otel_jax.install(**kwargs)
    assert otel_jax.installation() is None  # nothing half-installed


def test_a_second_install_names_what_it_ignores(telemetry, monkeypatch):
    _failopen.reset_warnings()
    active = otel_jax.installation()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        same = otel_jax.install(tracer_provider=telemetry.tracer_provider,
                                meter_provider=telemetry.meter_provider,
                                log_output=telemetry.log)
        plain = otel_jax.install()  # defaults ask for nothing in particular
        other = otel_jax.install(storm_threshold=3, log_level="debug")
        again = otel_jax.install(storm_threshold=3, log_level="debug")
    assert same is active and plain is active and other is active and again is active
    ours = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "storm_threshold=3 (active: 8)" in message and "log_level='debug'" in message
    assert ours[0].filename == __file__  # points at the caller's line


# --- collectors that do not answer ---------------------------------------------------------------

class BlackHole:
    """A collector that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = loopback_listener()
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def black_hole():
    hole = BlackHole()
    yield hole
    hole.close()


HANG_SCRIPT = textwrap.dedent("""
    import sys, time
    import jax, jax.numpy as jnp, otel_jax
    otel_jax.install(log_output=None)
    jax.jit(lambda x: x + 1)(jnp.ones(2))
    if sys.argv[1] == "uninstall":
        started = time.monotonic()
        otel_jax.uninstall()
        print("UNINSTALL", time.monotonic() - started, flush=True)
    print("END", time.time(), flush=True)
    import faulthandler
    faulthandler.dump_traceback_later(25)  # an exit that waits says where, in the failure
""")


@pytest.mark.slow
@pytest.mark.parametrize("timeout,mode,protocol", [
    ("2000", "exit", "http/protobuf"), ("600", "exit", "http/protobuf"),
    ("600", "uninstall", "http/protobuf"), ("600", "exit", "grpc")])
def test_hung_collector_bounds_exit_and_uninstall(black_hole, timeout, mode, protocol):
    # 2000: the specification's milliseconds, which the Python SDK reads as seconds;
    # 600 s: a long timeout that only the bounded windows cut short.
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{black_hole.port}",
                    OTEL_EXPORTER_OTLP_TIMEOUT=timeout, OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
    proc = python(HANG_SCRIPT, env, mode, timeout=280)
    ended = time.time()
    assert proc.returncode == 0, proc.stderr[-3000:]
    end = float(re.search(r"^END (\S+)", proc.stdout, re.M).group(1))
    # the SDK alone waits 90 s (30 s per signal), or for ever
    assert ended - end < 30, proc.stderr[-4000:]
    if mode == "uninstall":
        assert float(re.search(r"^UNINSTALL (\S+)", proc.stdout, re.M).group(1)) < 15
    said = otel_jax_warnings(proc.stderr)
    assert len(said) == 1, proc.stderr[-3000:]
    assert f"127.0.0.1:{black_hole.port}" in said[0]
    assert "Traceback" not in proc.stderr


def test_timeout_variable_read_as_the_specification_says(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
    assert _providers.export_timeout("traces") == 2.0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3")  # the SDK's seconds
    assert _providers.export_timeout("traces") == 3.0
    assert _providers.export_timeout("logs") == 2.0


class FakeExporter:
    """Serialises like the OTLP exporters (and fails the same way on bad text)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.exported: list = []

    def export(self, batch, **kwargs):
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        time.sleep(self.delay)
        try:
            encode_spans(batch).SerializeToString()
        except Exception:
            return _export.SpanExportResult.FAILURE
        self.exported.extend(batch)
        return _export.SpanExportResult.SUCCESS

    def shutdown(self):
        pass


def finished_spans(*attribute_values: str) -> list:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i, value in enumerate(attribute_values):
        with tracer.start_as_current_span(f"s{i}") as span:
            span.set_attribute("text", value)
    return list(memory.get_finished_spans())


@pytest.fixture
def fresh_warnings():
    _failopen.reset_warnings()


@pytest.mark.parametrize("bad", ["lone \udcff surrogate", "\ud800", "x" * 10 + "\udfff"])
def test_a_bad_record_is_not_an_outage(bad, fresh_warnings):
    inner = FakeExporter()
    breaker = _health.Breaker("http://collector:4318")
    exporter = _export.FailOpenSpanExporter(inner, breaker, 5.0)
    spans = finished_spans("fine", bad, "also fine")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert exporter.export(spans) == _export.SpanExportResult.SUCCESS
        assert exporter.export(finished_spans(bad)) == _export.SpanExportResult.SUCCESS
    assert [s.name for s in inner.exported] == ["s0", "s2"]
    assert breaker.allows() and breaker.failures == 0  # the breaker stays closed
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "dropped 1 spans" in ours[0] and "cannot export" not in ours[0]


def test_bad_metric_points_are_dropped_the_rest_exported(fresh_warnings):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult

    reader = InMemoryMetricReader()
    counter = MeterProvider(metric_readers=[reader]).get_meter("m").create_counter("c")
    counter.add(1, {"f": "good"})
    counter.add(1, {"f": "bad \udcff"})
    data = reader.get_metrics_data()

    sent = []

    class Inner:
        _preferred_temporality: dict = {}
        _preferred_aggregation: dict = {}

        def export(self, metrics_data, **kwargs):
            sent.append(metrics_data)
            return MetricExportResult.SUCCESS

    breaker = _health.Breaker("http://collector:4318")
    exporter = _export.FailOpenMetricExporter(Inner(), breaker, 5.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert exporter.export(data) == MetricExportResult.SUCCESS
    points = sent[0].resource_metrics[0].scope_metrics[0].metrics[0].data.data_points
    assert [dict(p.attributes) for p in points] == [{"f": "good"}]
    assert breaker.allows()
    assert sum(issubclass(w.category, OtelJaxWarning) for w in caught) == 1


def test_a_hung_export_is_cut_and_not_piled_up(fresh_warnings):
    inner = FakeExporter(delay=30.0)
    breaker = _health.Breaker("http://hung:4318")
    exporter = _export.FailOpenSpanExporter(inner, breaker, 0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        assert exporter.export(finished_spans("a")) == _export.SpanExportResult.FAILURE
        first = time.monotonic() - started
        breaker.succeeded()  # as if the breaker had closed again: the hung call is still out
        started = time.monotonic()
        assert exporter.export(finished_spans("b")) == _export.SpanExportResult.FAILURE
        second = time.monotonic() - started
    assert first < 15 and second < 5
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "no answer within" in ours[0]


def test_a_window_bounds_exports_and_says_what_it_dropped(fresh_warnings):
    endpoint = "http://window-test:4318"
    _health._breakers.pop((endpoint, "traces"), None)
    _health._endpoints.pop(endpoint, None)
    breaker = _health.breaker_for(endpoint, "traces")
    exporter = _export.FailOpenSpanExporter(FakeExporter(delay=30.0), breaker, 600.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        window = _bounded.open_window(0.5, "uninstall()")
        started = time.monotonic()
        exporter.export(finished_spans("a", "b", "c"))
        exporter.export(finished_spans("d"))
        _bounded.close_window(window)
        elapsed = time.monotonic() - started
    assert elapsed < 10
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1
    assert "uninstall() dropped 4 spans" in ours[0] and endpoint in ours[0]


# --- records that cannot be encoded, end to end --------------------------------------------------

SURROGATE_SCRIPT = textwrap.dedent("""
    import functools, time
    import jax, jax.numpy as jnp, otel_jax
    from opentelemetry import trace
    otel_jax.install(log_output=None)

    class Mode:
        def __init__(self, name): self.name = name
        def __repr__(self): return "Mode(" + self.name + ")"
        def __hash__(self): return hash(self.name)
        def __eq__(self, other): return isinstance(other, Mode) and other.name == self.name

    @functools.partial(jax.jit, static_argnums=1)
    def f(x, mode):
        return x + 1

    tracer = trace.get_tracer("app")
    f(jnp.ones(2), Mode("a"))
    f(jnp.ones(2), Mode("\\udcff"))  # a lone surrogate in a static argument's repr
    with tracer.start_as_current_span("app-bad") as span:
        span.set_attribute("path", "/data/\\udcff.npy")  # the application's own bad text
    time.sleep(1.5)
    with tracer.start_as_current_span("app-after"):
        f(jnp.ones(3), Mode("a"))
""")


@pytest.mark.slow
def test_unencodable_text_does_not_switch_telemetry_off():
    pytest.importorskip("oteltest")
    from oteltest.sink import HttpSink
    from oteltest.sink.handler import RequestHandler

    class Collected(RequestHandler):
        def __init__(self) -> None:
            self.spans: list[tuple[str, dict]] = []
            self.logs = 0

        def handle_trace(self, request, headers):
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append((s.name, {kv.key: kv.value.string_value
                                                    for kv in s.attributes}))

        def handle_logs(self, request, headers):
            self.logs += sum(len(sl.log_records) for rl in request.resource_logs
                             for sl in rl.scope_logs)

        def handle_metrics(self, request, headers):
            pass

    collected = Collected()
    port = free_port()
    sink = HttpSink(collected, logging.getLogger("otlp-receiver"), port=port)
    sink.start()
    try:
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                        OTEL_BSP_SCHEDULE_DELAY="200", OTEL_BLRP_SCHEDULE_DELAY="200")
        proc = python(SURROGATE_SCRIPT, env)
    finally:
        sink.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = [name for name, _ in collected.spans]
    assert "app-after" in names  # telemetry was not switched off
    causes = [a.get("jax.compile.cause", "") for name, a in collected.spans
              if name == "jax.compile f"]
    assert len(causes) == 3 and any("\\udcff" in c for c in causes)
    assert collected.logs >= 3  # the compile log records with the escaped text too
    said = otel_jax_warnings(proc.stderr)
    assert len(said) == 1 and "cannot be encoded" in said[0], proc.stderr[-3000:]
    assert "Failed to encode" not in proc.stderr


def test_clean_text_makes_any_repr_encodable():
    class Nasty:
        def __repr__(self):
            return "Nasty(\udcff\ud800 ok é)"

    text = _text.safe_repr(Nasty())
    text.encode("utf-8")  # would raise on a lone surrogate
    assert text == "Nasty(\\udcff\\ud800 ok é)"
    assert _text.clean_text("plain") == "plain"
    assert _text.truncate("\udcff" * 500, 40).encode("utf-8")


# --- exporter noise: one warning, whoever configured the exporter ---------------------------------

def test_grpc_fallback_never_sends_http_to_a_grpc_port(monkeypatch):
    for name in ("opentelemetry.exporter.otlp.proto.grpc",
                 "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                 "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
                 "opentelemetry.exporter.otlp.proto.grpc._log_exporter"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    signals = ("traces", "metrics", "logs")
    # At a port that is not the default gRPC port: no exporter, nothing said here (the one
    # line is resolve()'s, for every signal at once).
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    build = _providers._Build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [_providers._exporter(s, build) for s in signals] == [None] * 3
    assert not caught
    assert build.fallen == dict.fromkeys(signals)
    # At the default gRPC port: OTLP/HTTP at the collector's HTTP port, each signal's path.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    build = _providers._Build()
    exporters = [_providers._exporter(s, build) for s in signals]
    assert all(e is not None for e in exporters)
    assert [e._inner._endpoint for e in exporters] == [
        f"http://127.0.0.1:4318/v1/{s}" for s in signals]
    for exporter in exporters:
        exporter.shutdown()




@pytest.mark.slow
def test_collector_down_under_opentelemetry_instrument_costs_one_warning(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SCRIPT)
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",
                    OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_SERVICE_NAME="zero-code",
                    OTEL_EXPORTER_OTLP_TIMEOUT="3")
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    proc = subprocess.run([str(instrument), sys.executable, str(script)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = otel_jax_warnings(proc.stderr)
    other = [ln for ln in proc.stderr.splitlines()
             if ln.strip() and '"event": "jax.compile"' not in ln and ln not in said]
    assert len(said) == 1 and "exporter reports" in said[0], proc.stderr[-3000:]
    assert not [ln for ln in other if "Transient error" in ln or "Failed to export" in ln]
    assert sum('"event": "jax.compile"' in ln for ln in proc.stderr.splitlines()) == 2


def test_application_exporter_noise_is_announced_not_hidden(monkeypatch):
    _failopen.reset_warnings()
    _observe.quiet_exporter_logs()
    log = logging.getLogger("opentelemetry.exporter.otlp.common.http")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):  # not one of otel_jax's exporters: the first is said, once
            log.warning("Transient error %s encountered while exporting %s batch, retrying.",
                        "Connection refused", "spans")
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "Connection refused" in ours[0]


def test_the_docs_state_the_history_bounds_precisely():
    from otel_jax._pipeline import _history

    readme = (ROOT / "docs" / "how-it-works.md").read_text()
    assert (f"among the last {_history.DEFAULT_SIGNATURES_PER_FUNCTION} signatures"
            in readme)
    assert f"the last {_history.DEFAULT_ENTRIES_PER_FUNCTION} compiles" in readme
    assert "16 signatures and 64 entries per function" not in readme


# --- the one warning path ---------------------------------------------------------------------

def _ours(caught):
    return [w for w in caught if issubclass(w.category, OtelJaxWarning)]


def test_a_warning_points_at_the_users_line_and_is_given_once_per_kind():
    key = _failopen.WarnKey(_failopen.Topic.LEDGER, "/tmp/a")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        assert _failopen.warn_once(key, "otel_jax: first")
        assert not _failopen.warn_once(key, "otel_jax: again")
        assert _failopen.warn_once(_failopen.WarnKey(_failopen.Topic.LEDGER, "/tmp/b"),
                                   "otel_jax: another ledger")
        assert _failopen.warn_once(_failopen.Topic.SETUP, "otel_jax: a topic alone")
        assert not _failopen.warn_once(_failopen.WarnKey(_failopen.Topic.SETUP), "otel_jax: x")
    ours = _ours(caught)
    assert [str(w.message) for w in ours] == [
        "otel_jax: first", "otel_jax: another ledger", "otel_jax: a topic alone"]
    assert (ours[0].filename, ours[0].lineno) == (__file__, line)
    _failopen.reset_warnings()  # the one reset: each kind may be said again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _failopen.warn_once(key, "otel_jax: first")
    assert len(_ours(caught)) == 1


def test_a_failopen_seam_and_the_process_share_one_registry():
    seen: list[str] = []
    failopen = _failopen.FailOpen(warn=seen.append)
    other = _failopen.FailOpen(warn=seen.append)
    for guard in (failopen, other, failopen):
        with guard.guard("step"):
            raise KeyError("boom")
    assert len(seen) == 1 and "internal error in step (KeyError" in seen[0]
    assert failopen.internal_errors == 2 and other.internal_errors == 1


def test_warnings_turned_into_errors_are_logged_instead(caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.WARNING, logger="otel_jax"):
            _failopen.emit("otel_jax: said on the logger")
            assert _failopen.warn_once(_failopen.Topic.BAD_RECORDS, "otel_jax: once, logged")
    assert [r.getMessage() for r in caplog.records if r.name == "otel_jax"] == [
        "otel_jax: said on the logger", "otel_jax: once, logged"]


def test_a_warning_from_an_installed_librarys_callback_is_located_at_nothing(tmp_path):
    # Installed code past otel_jax's frames is another library calling back (the SDK's
    # export thread, an event loop): its line is no place of the user's.
    import importlib.util

    installed = tmp_path / "site-packages" / "thirdparty.py"
    installed.parent.mkdir()
    installed.write_text("def call(fn, *args):\n    return fn(*args)\n")
    spec = importlib.util.spec_from_file_location("thirdparty", installed)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.call(_failopen.emit, "otel_jax: from a callback")
    [warning] = _ours(caught)
    assert (warning.filename, warning.lineno) == NO_FRAME


#: Where Python itself locates a warning that has no frame (``warnings.warn`` past the stack,
#: a ``ResourceWarning`` at shutdown): what otel_jax's warnings with no line of the user's say.
NO_FRAME = ("<sys>", 0) if sys.version_info >= (3, 13) else ("sys", 1)
AT_NOTHING = f"{NO_FRAME[0]}:{NO_FRAME[1]}: OtelJaxWarning: "


def test_the_walk_skips_namespace_packages_and_the_standard_library():
    import opentelemetry.sdk.trace

    assert _failopen.is_library_file(opentelemetry.sdk.trace.__file__)  # a namespace package
    assert _failopen.is_library_file(threading.__file__)
    assert _failopen.is_library_file(_failopen.__file__)
    assert not _failopen.is_library_file(__file__)
    frame, level = _failopen.user_frame()
    assert frame is sys._getframe() and level == 1
    assert _failopen.user_stacklevel() == 1  # for a warnings.warn made right here


def test_stream_of_warning_output_is_one_line_per_problem():
    # The warnings otel_jax emits from background threads and at exit are located at
    # nothing: one line each, no source line below them.
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        original = warnings.showwarning
        warnings.showwarning = lambda *a, **k: buf.write(warnings.formatwarning(*a[:4]))
        try:
            thread = threading.Thread(target=_failopen.emit, args=("otel_jax: test",))
            thread.start()
            thread.join(30)
        finally:
            warnings.showwarning = original
    assert buf.getvalue() == f"{AT_NOTHING}otel_jax: test\n"


WITHOUT_A_USER_FRAME = textwrap.dedent("""
    import atexit, threading
    from otel_jax._core import _failopen
    # Where no line of the user's is on the stack: a thread of otel_jax's or of an
    # exporter (only the standard library's frames and otel_jax's), and the exit.
    thread = threading.Thread(target=_failopen.emit, args=("otel_jax: on a thread",))
    thread.start()
    thread.join()
    atexit.register(_failopen.emit, "otel_jax: at exit")
""")


def test_a_warning_with_no_user_frame_prints_no_otel_jax_location():
    done = python(WITHOUT_A_USER_FRAME, clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    # Exactly Python's own form for a warning with no frame, and nothing under it.
    assert lines == [f"{AT_NOTHING}otel_jax: on a thread",
                     f"{AT_NOTHING}otel_jax: at exit"], done.stderr


#: A warning one of otel_jax's lines on stderr says too (``told``), under each way an
#: application or a test runner routes warnings.
TOLD = textwrap.dedent("""
    import json, logging, sys, warnings
    from otel_jax._core import _failopen
    from otel_jax import OtelJaxWarning

    here = __file__ + ":4"
    show, filters = warnings.showwarning, list(warnings.filters)
    out = {}
    # Python would write it to this stderr itself: left to otel_jax's line
    _failopen.emit_at("otel_jax: by default", here, told=True)
    with warnings.catch_warnings():  # made an error: given, and caught as ever
        warnings.simplefilter("error", OtelJaxWarning)
        _failopen.emit_at("otel_jax: an error", here, told=True)
    with warnings.catch_warnings(record=True) as caught:  # a test runner's capture
        warnings.simplefilter("always")
        _failopen.emit_at("otel_jax: recorded", here, told=True)
    out["recorded"] = [(str(w.message), w.category.__name__) for w in caught]
    seen = []
    with warnings.catch_warnings():  # the application's own showwarning
        warnings.showwarning = lambda message, *rest, **kw: seen.append(str(message))
        _failopen.emit_at("otel_jax: theirs", here, told=True)
    out["theirs"] = seen
    logged = []
    keep = logging.Handler()
    keep.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("py.warnings").addHandler(keep)
    logging.captureWarnings(True)  # warnings routed to logging
    _failopen.emit_at("otel_jax: to logging", here, told=True)
    logging.captureWarnings(False)
    out["logged"] = [text.split(": ", 1)[1].splitlines()[0] for text in logged]
    _failopen.emit_at("otel_jax: not told", here)  # said by no line of otel_jax's
    out["unchanged"] = warnings.showwarning is show and warnings.filters == filters
    print("RESULT " + json.dumps(out))
""")


def test_a_warning_a_line_on_stderr_says_is_left_to_it_only_where_python_writes_it(tmp_path):
    script = tmp_path / "told.py"
    script.write_text(TOLD)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=clean_env(PYTHONPATH=str(ROOT)))
    result = result_of(done)
    assert result == {"recorded": [["otel_jax: recorded", "OtelJaxWarning"]],
                      "theirs": ["otel_jax: theirs"],
                      "logged": ["OtelJaxWarning: otel_jax: to logging"], "unchanged": True}
    # by default and as an error: nothing of Python's on stderr, nor on otel_jax's logger
    said = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert said == [f"{script}:4: OtelJaxWarning: otel_jax: not told",
                    '  from otel_jax import OtelJaxWarning'], done.stderr


def test_a_warning_from_code_whose_globals_have_no_name_is_said_at_its_line(tmp_path):
    # exec() of a file's code with globals of its own (a notebook cell, a config
    # language): no ``__name__``, which Python must not be handed as module None
    path = tmp_path / "cell.py"
    code = compile("emit('otel_jax: from a cell')\n", str(path), "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, {"emit": _failopen.emit})
    assert [(w.filename, w.lineno) for w in caught
            if issubclass(w.category, OtelJaxWarning)] == [(str(path), 1)]


@pytest.mark.slow
def test_prometheus_port_ignored_with_the_applications_meter_provider_is_said():
    script = textwrap.dedent("""
        import json, warnings
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        metrics.set_meter_provider(MeterProvider())
        import otel_jax
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            handle = otel_jax.install(log_output=None, prometheus_port=0)
        print("RESULT " + json.dumps({
            "address": handle.prometheus_address,
            "warnings": [str(w.message) for w in caught
                         if issubclass(w.category, otel_jax.OtelJaxWarning)]}))
    """)
    result = result_of(python(script, clean_env()))
    assert result["address"] is None
    assert len(result["warnings"]) == 1 and "prometheus_port=0 ignored" in result["warnings"][0]


class Answering:
    """A collector that answers every request with one HTTP status."""

    def __init__(self, status: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        needs_loopback()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("collector", ["closed", "black hole", "500", "429", "garbage URL"])
def test_collector_faults_cost_one_warning_and_a_bounded_exit(collector):
    servers: list = []
    if collector == "closed":
        endpoint = f"http://127.0.0.1:{free_port()}"
    elif collector == "black hole":
        servers.append(BlackHole())
        endpoint = f"http://127.0.0.1:{servers[0].port}"
    elif collector == "garbage URL":
        endpoint = "http://exa mple:notaport"
    else:
        servers.append(Answering(int(collector)))
        endpoint = f"http://127.0.0.1:{servers[0].port}"
    try:
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="3")
        proc = python(HANG_SCRIPT, env, "exit", timeout=280)
        ended = time.time()
    finally:
        for server in servers:
            server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    end = float(re.search(r"^END (\S+)", proc.stdout, re.M).group(1))
    assert ended - end < 30, proc.stderr[-4000:]
    said = otel_jax_warnings(proc.stderr)
    assert len(said) == 1, proc.stderr[-3000:]
    others = [ln for ln in without_jax_warnings(proc.stderr.splitlines())
              if ln.strip() and ln not in said]
    assert not others, others  # no retry lines, no traceback


class Answers:
    """An inner exporter whose every export meets ``answer`` (as the SDK's would, through
    the observing session) and fails; counts its calls."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls = 0

    def export(self, batch, **kwargs):
        self.calls += 1
        _observe._observe(self.answer)
        return _export.LogRecordExportResult.FAILURE

    def shutdown(self):
        pass


@pytest.mark.parametrize("answer", [
    _health.Answer(http_status=404, reason="Not Found"),
    _health.Answer(grpc_code="UNIMPLEMENTED"),
    _health.Answer(http_status=503, reason="Service Unavailable"),
    _health.answer_from_error(ConnectionRefusedError(111, "Connection refused")),
], ids=["404", "UNIMPLEMENTED", "503", "refused"])
def test_one_signals_failure_never_stops_another(fresh_warnings, answer):
    endpoint = f"http://health-{answer.describe(short=True).replace(' ', '-')}:4318"
    for signal in ("traces", "logs"):
        _health._breakers.pop((endpoint, signal), None)
    _health._endpoints.pop(endpoint, None)
    inner_logs, inner_traces = Answers(answer), FakeExporter()
    logs = _export.FailOpenLogExporter(inner_logs, _health.breaker_for(endpoint, "logs"), 5.0,
                                       observed=True)
    traces = _export.FailOpenSpanExporter(inner_traces, _health.breaker_for(endpoint, "traces"),
                                          5.0, observed=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            assert logs.export([f"record {i}"]) == _export.LogRecordExportResult.FAILURE
            assert traces.export(finished_spans(f"span {i}")) == _export.SpanExportResult.SUCCESS
    assert len(inner_traces.exported) == 3  # every span, whatever happened to the logs
    assert inner_logs.calls == 1  # off, or its breaker open: not retried batch after batch
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1, ours
    if answer.health is _health.Health.NOT_ACCEPTED:
        assert (f"the OTLP endpoint does not accept logs ({answer.describe(short=True)}): "
                "logs off, traces" in ours[0])
        assert _health.breaker_for(endpoint, "logs").off == answer.describe(short=True)
    elif answer.health is _health.Health.UNREACHABLE:
        assert "unreachable (ConnectionRefusedError" in ours[0]
    else:
        assert "answered HTTP 503 Service Unavailable" in ours[0]
        assert "unreachable" not in ours[0]
    assert _health.breaker_for(endpoint, "traces").allows()


def test_a_window_does_not_count_what_a_signal_turned_off_dropped(fresh_warnings):
    endpoint = "http://window-off:4318"
    _health._breakers.pop((endpoint, "logs"), None)
    _health._endpoints.pop(endpoint, None)
    logs = _export.FailOpenLogExporter(Answers(_health.Answer(http_status=404)),
                                       _health.breaker_for(endpoint, "logs"), 5.0, observed=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        window = _bounded.open_window(2.0, "exit")
        logs.export(["a"])
        logs.export(["b"])
        _bounded.close_window(window)
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "does not accept logs (HTTP 404)" in ours[0], ours


def test_a_collector_that_is_down_is_one_warning_naming_each_signal_at_the_set_up_line(
        fresh_warnings):
    # No collector at all (connection refused), as the first signal's export finds it on
    # an exporter's thread: every signal sent there is down, named so, and the warning is
    # located at the user's line that set the export up (no line of theirs is on that
    # thread's stack), not at Python's "sys:1".
    import requests

    endpoint = f"http://127.0.0.1:{free_port()}"
    for signal in _health.SIGNALS:
        _health._breakers.pop((endpoint, signal), None)
    _health._endpoints.pop(endpoint, None)
    line = sys._getframe().f_lineno + 1
    breakers = {signal: _health.breaker_for(endpoint, signal) for signal in _health.SIGNALS}
    with pytest.raises(requests.exceptions.ConnectionError) as raised:
        requests.post(f"{endpoint}/v1/logs", data=b"", timeout=10)
    refused = _health.answer_from_error(raised.value)
    assert refused.health is _health.Health.UNREACHABLE and refused.endpoint_down
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thread = threading.Thread(target=breakers["logs"].failed,
                                  args=(refused.health, refused.describe(), refused))
        thread.start()
        thread.join(30)
    [warning] = _ours(caught)
    assert str(warning.message).startswith(
        f"otel_jax: cannot export traces, metrics and logs to {endpoint}: the collector is "
        "unreachable (ConnectionError"), warning.message
    assert (warning.filename, warning.lineno) == (__file__, line)
    # a connection closed on one path only is that signal's: the endpoint still answers
    closed = _health.answer_from_error(requests.exceptions.ConnectionError(
        ConnectionResetError(104, "Connection reset by peer")))
    assert closed.health is _health.Health.UNREACHABLE and not closed.endpoint_down


def test_a_warning_said_at_exit_keeps_the_line_it_is_located_at(tmp_path):
    # A collector found down only at the exit's last export (a gRPC exporter retrying until
    # its timeout, on a busy machine): its warning is still located at the line that set
    # the export up, as it is while the program runs, not at no line.
    program = tmp_path / "prog.py"
    program.write_text(textwrap.dedent("""\
        import atexit
        from otel_jax._core import _failopen

        def at_exit():
            _failopen.emit("otel_jax: found at exit", at="/srv/job/train.py:91")

        atexit.register(at_exit)
        """))
    proc = subprocess.run([sys.executable, str(program)], env=clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "/srv/job/train.py:91: OtelJaxWarning: otel_jax: found at exit" in proc.stderr, \
        proc.stderr
