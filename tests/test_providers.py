"""The default OpenTelemetry set-up when the application configured none, and respect for
the application's own providers (each case in a fresh process: providers are global)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest
from conftest import clean_env, needs_loopback

SCRIPT = textwrap.dedent("""
    import io, json, sys
    from opentelemetry import trace
    if sys.argv[1] == "app":
        from opentelemetry.sdk.trace import TracerProvider
        app_provider = TracerProvider()
        trace.set_tracer_provider(app_provider)
    import jax, jax.numpy as jnp, otel_jax
    buf = io.StringIO()
    handle = otel_jax.install(log_output=buf)
    jax.jit(lambda x: x + 1)(jnp.ones(2))
    otel_jax.flush()
    line = json.loads(buf.getvalue().splitlines()[-1])
    print("RESULT " + json.dumps({
        "provider": type(trace.get_tracer_provider()).__module__,
        "same_as_app": sys.argv[1] == "app" and handle.tracer_provider is app_provider,
        "trace_id": line.get("trace_id"),
    }))
""")


def run(mode: str, **env: str) -> tuple[dict, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env={**base, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT ")), out.stdout + out.stderr


def test_default_sdk_when_nothing_is_configured():
    result, _ = run("bare")
    assert result["provider"].startswith("opentelemetry.sdk.trace")
    assert len(result["trace_id"]) == 32  # real ids, so log lines link to traces


def test_the_applications_provider_is_used_untouched():
    result, _ = run("app")
    assert result["same_as_app"] is True


def test_console_exporter_selected_by_environment():
    _, output = run("bare", OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    assert '"name": "jax.compile <lambda>"' in output


def test_sdk_disabled_by_environment():
    result, _ = run("bare", OTEL_SDK_DISABLED="true")
    assert not result["provider"].startswith("opentelemetry.sdk")
    assert result["trace_id"] is None


# --- per-signal export health: real OTLP endpoints that take some signals only -------------

# A program that compiles inside the application's own span, lets the batch processors
# export while it runs (OTEL_BSP_SCHEDULE_DELAY), and exits: what reaches the endpoint, and
# every warning on stderr, is what a user sees.
HEALTH_SCRIPT = textwrap.dedent("""
    import sys, time
    import jax, jax.numpy as jnp, otel_jax
    from opentelemetry import trace
    otel_jax.install(log_output=None)

    @jax.jit
    def step(x):
        return x * 2

    tracer = trace.get_tracer("app")
    for round in range(int(sys.argv[1])):
        x = jnp.ones(round + 1)
        with tracer.start_as_current_span(f"round-{round}"):
            step(x)
        time.sleep(float(sys.argv[2]))
""")

PATHS = {"traces": "/v1/traces", "metrics": "/v1/metrics", "logs": "/v1/logs"}


class OtlpHttpEndpoint:
    """A real HTTP server standing for an OTLP endpoint: each signal's path answers its
    own status (``statuses``, 200 by default); ``close`` paths drop the connection at once
    without an answer. Records every request and the spans it was sent."""

    def __init__(self, statuses: dict[str, int] | None = None,
                 retry_after: str | None = None, close: tuple[str, ...] = (),
                 address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        endpoint = self
        self.requests: Counter[str] = Counter()
        self.span_names: list[str] = []
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with endpoint.lock:
                    endpoint.requests[self.path] += 1
                if self.path in close:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status = (statuses or {}).get(self.path, 200)
                if status == 200 and self.path == PATHS["traces"]:
                    request = ExportTraceServiceRequest.FromString(body)
                    with endpoint.lock:
                        endpoint.span_names.extend(
                            s.name for rs in request.resource_spans
                            for ss in rs.scope_spans for s in ss.spans)
                self.send_response(status)
                if retry_after is not None and status != 200:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        needs_loopback()
        self.server = ThreadingHTTPServer(address, Handler)
        self.server.daemon_threads = True
        self.url = f"http://{address[0]}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_health(endpoint: str, rounds: int = 3, pause: float = 0.6, **env: str):
    proc = subprocess.run(
        [sys.executable, "-c", HEALTH_SCRIPT, str(rounds), str(pause)],
        env=clean_env(**{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                         "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100",
                         "OTEL_METRIC_EXPORT_INTERVAL": "200", **env}),
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings_, others = split_stderr(proc.stderr)
    assert not others, others  # no retry lines, no traceback
    return warnings_


def split_stderr(stderr: str) -> tuple[list[str], list[str]]:
    """``stderr``'s OtelJaxWarning lines, and its other lines but the source line Python
    prints under a warning located at the program's line (Python 3.13 keeps a ``-c``
    program's source for that)."""
    lines = stderr.splitlines()
    warnings_ = [ln for ln in lines if "OtelJaxWarning" in ln]
    quoted = {i + 1 for i, ln in enumerate(lines) if "OtelJaxWarning" in ln
              and i + 1 < len(lines) and lines[i + 1].startswith("  ")}
    others = [ln for i, ln in enumerate(lines)
              if ln.strip() and ln not in warnings_ and i not in quoted]
    return warnings_, others


def user_spans(names: list[str]) -> Counter[str]:
    """The spans of ``names`` that are not JAX's own eager op compiles."""
    return Counter(n for n in names if not n.startswith("jax.compile ") or n.endswith(" step"))


def spans_of_health_script(rounds: int = 3) -> Counter[str]:
    return Counter({"jax.compile step": rounds, "jax.trace": rounds, "jax.lower": rounds,
                    "jax.backend_compile": rounds,
                    **{f"round-{i}": 1 for i in range(rounds)}})


@pytest.fixture
def endpoints():
    made: list[OtlpHttpEndpoint] = []

    def make(**kwargs) -> OtlpHttpEndpoint:
        made.append(OtlpHttpEndpoint(**kwargs))
        return made[-1]

    yield make
    for e in made:
        e.close()


@pytest.mark.slow
def test_an_endpoint_that_takes_traces_only_turns_the_others_off(endpoints):
    # What Jaeger v2 does with its defaults: /v1/traces 200, /v1/metrics and /v1/logs 404.
    endpoint = endpoints(statuses={PATHS["metrics"]: 404, PATHS["logs"]: 404})
    said = run_health(endpoint.url)
    # Every span arrived: neither 404 dropped a single one.
    assert user_spans(endpoint.span_names) == spans_of_health_script()
    assert len(said) == 2, said
    by_signal = {s: next(w for w in said if f"does not accept {s} " in w)
                 for s in ("logs", "metrics")}
    # Each says what still flows when it is said: the one found first names both others.
    first, second = sorted(by_signal, key=lambda s: said.index(by_signal[s]))
    assert (f"the OTLP endpoint does not accept {first} (HTTP 404): {first} off, "
            f"{' and '.join(s for s in ('traces', 'metrics', 'logs') if s != first)} "
            "still sent" in by_signal[first])
    assert (f"the OTLP endpoint does not accept {second} (HTTP 404): {second} off, "
            "traces still sent" in by_signal[second])
    assert all(endpoint.url in w for w in said)
    assert not any("unreachable" in w for w in said)
    # Off means off: one request found it out, none came after.
    assert endpoint.requests[PATHS["logs"]] == 1
    assert endpoint.requests[PATHS["metrics"]] == 1
    assert endpoint.requests[PATHS["traces"]] >= 2  # exported while running, not only at exit


@pytest.mark.slow
@pytest.mark.parametrize("status", [405, 415])
def test_other_statuses_that_say_not_this_signal(endpoints, status):
    endpoint = endpoints(statuses={PATHS["logs"]: status})
    said = run_health(endpoint.url)
    assert user_spans(endpoint.span_names) == spans_of_health_script()
    assert len(said) == 1, said
    assert (f"does not accept logs (HTTP {status}): logs off, traces and metrics still sent"
            in said[0])
    assert endpoint.requests[PATHS["logs"]] == 1 and endpoint.requests[PATHS["metrics"]] >= 2


@pytest.mark.slow
@pytest.mark.parametrize("failing", ["500", "closed"])
def test_a_failing_signal_drops_no_other_signals_data(endpoints, failing):
    # Logs fail on every request (a server error, or the connection dropped at once);
    # traces and metrics keep flowing, and say nothing.
    if failing == "closed":
        endpoint = endpoints(close=(PATHS["logs"],))
    else:
        endpoint = endpoints(statuses={PATHS["logs"]: int(failing)})
    said = run_health(endpoint.url, OTEL_EXPORTER_OTLP_TIMEOUT="2")
    assert user_spans(endpoint.span_names) == spans_of_health_script()
    assert endpoint.requests[PATHS["metrics"]] >= 2
    assert len(said) == 1, said
    assert f"cannot export logs to {endpoint.url}" in said[0]
    if failing == "closed":  # a connection failure: the only case called unreachable
        assert "unreachable" in said[0] and "ConnectionError" in said[0]
    else:
        assert "answered HTTP 500" in said[0] and "unreachable" not in said[0]


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["429 with Retry-After", "connection closed at once"])
def test_the_exit_warning_says_what_the_endpoint_answered(endpoints, answer):
    # Nothing is exported before exit (long intervals); at exit the exporters keep
    # retrying past the 3 s exit bound: the warning says what they met, not "no answer".
    if answer.startswith("429"):
        endpoint = endpoints(statuses={p: 429 for p in PATHS.values()}, retry_after="1")
    else:
        endpoint = endpoints(close=tuple(PATHS.values()))
    said = run_health(endpoint.url, rounds=1, pause=0, OTEL_EXPORTER_OTLP_TIMEOUT="20",
                      OTEL_BSP_SCHEDULE_DELAY="60000", OTEL_BLRP_SCHEDULE_DELAY="60000",
                      OTEL_METRIC_EXPORT_INTERVAL="60000")
    assert len(said) == 1, said
    assert "exit dropped" in said[0] and endpoint.url in said[0]
    assert "no answer within" not in said[0]
    if answer.startswith("429"):
        assert "answered HTTP 429 Too Many Requests, Retry-After: 1" in said[0]
        assert "unreachable" not in said[0]
    else:
        assert "ConnectionError" in said[0]
    assert sum(endpoint.requests.values()) >= 3  # each signal asked, and was answered


class OtlpGrpcTracesOnly:
    """A real gRPC server with the OTLP trace service only (what Jaeger v2 serves with its
    defaults): the metrics and logs services answer UNIMPLEMENTED."""

    def __init__(self, address: str = "127.0.0.1:0") -> None:
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as rpc

        names = self.span_names = []

        class Traces(rpc.TraceServiceServicer):
            def Export(self, request, context):
                names.extend(s.name for rs in request.resource_spans
                             for ss in rs.scope_spans for s in ss.spans)
                return pb.ExportTraceServiceResponse()

        needs_loopback()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        rpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        port = self.server.add_insecure_port(address)
        if not port:
            raise OSError(f"cannot listen on {address}")
        self.server.start()
        self.url = f"http://{address.rsplit(':', 1)[0]}:{port}"

    def close(self) -> None:
        self.server.stop(grace=None)


@pytest.mark.slow
def test_grpc_unimplemented_turns_the_signal_off():
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    endpoint = OtlpGrpcTracesOnly()
    try:
        said = run_health(endpoint.url, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    finally:
        endpoint.close()
    assert user_spans(endpoint.span_names) == spans_of_health_script()
    assert len(said) == 2, said
    for signal in ("logs", "metrics"):
        assert any(f"does not accept {signal} (gRPC UNIMPLEMENTED): {signal} off" in w
                   for w in said), said
    assert not any("unreachable" in w for w in said)


# --- gRPC asked for, its exporter not installed: never HTTP to the gRPC port ----------------

# The program as run where the gRPC exporter is not installed (an import of it fails).
NO_GRPC = ("import sys\n"
           "for name in ('opentelemetry.exporter.otlp.proto.grpc',\n"
           "             'opentelemetry.exporter.otlp.proto.grpc.trace_exporter',\n"
           "             'opentelemetry.exporter.otlp.proto.grpc.metric_exporter',\n"
           "             'opentelemetry.exporter.otlp.proto.grpc._log_exporter'):\n"
           "    sys.modules[name] = None\n")


def run_without_grpc(endpoint: str, **env: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", NO_GRPC + HEALTH_SCRIPT, "3", "0.6"],
        env=clean_env(**{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                         "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                         "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BLRP_SCHEDULE_DELAY": "100",
                         "OTEL_METRIC_EXPORT_INTERVAL": "200", **env}),
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings_, others = split_stderr(proc.stderr)
    assert not others, proc.stderr  # no traceback
    return warnings_


def a_collector_address() -> str:
    """A loopback address (127.x.y.z, x > 0) where the default OTLP ports 4317 and 4318 are
    both free: a collector at its default ports that no other program on this machine
    shares, or a skip."""
    import random

    needs_loopback()
    for _ in range(20):
        host = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
        try:
            for port in (4317, 4318):
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        return host
    pytest.skip("no loopback address with ports 4317 and 4318 free")


@pytest.mark.slow
def test_grpc_missing_at_the_default_grpc_port_sends_http_to_the_collectors_http_port():
    # A collector at its default ports (gRPC 4317, HTTP 4318), the endpoint at its gRPC
    # port, no gRPC exporter: every signal arrives at its HTTP port, none at the gRPC one.
    # That HTTP port does not take logs: said as of any endpoint, naming what still flows.
    host = a_collector_address()
    grpc_port = OtlpGrpcTracesOnly(f"{host}:4317")
    http_port = OtlpHttpEndpoint(address=(host, 4318), statuses={PATHS["logs"]: 404})
    try:
        said = run_without_grpc(f"http://{host}:4317")
    finally:
        grpc_port.close()
        http_port.close()
    assert user_spans(http_port.span_names) == spans_of_health_script()
    assert set(http_port.requests) == set(PATHS.values()), http_port.requests
    assert grpc_port.span_names == []
    assert len(said) == 2, said
    assert ("does not accept logs (HTTP 404): logs off, traces and metrics still sent"
            in said[1]), said
    assert (f"traces, metrics, logs go by OTLP/HTTP to http://{host}:4318 instead"
            in said[0]), said
    assert "pip install opentelemetry-exporter-otlp-proto-grpc" in said[0], said
    assert "otel_jax[grpc]" not in said[0] and "using http/protobuf" not in said[0], said


@pytest.mark.slow
def test_grpc_missing_at_another_port_exports_nothing_and_says_so_at_start():
    # A real gRPC receiver at a port that is not the default: its HTTP port is not known,
    # so nothing is sent (no HTTP to the gRPC port, no "dropped" at exit), and one line
    # at start says so.
    receiver = OtlpGrpcTracesOnly()
    try:
        said = run_without_grpc(receiver.url)
    finally:
        receiver.close()
    assert receiver.span_names == []
    assert len(said) == 1, said
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in said[0]
    assert (f"traces, metrics, logs are not exported at all: {receiver.url} is not at the "
            "default gRPC port 4317" in said[0]), said
    assert "pip install opentelemetry-exporter-otlp-proto-grpc" in said[0], said
    assert "using http/protobuf" not in said[0], said


@pytest.mark.slow
def test_grpc_missing_for_one_signal_leaves_the_others_on_http():
    # Per-signal variables, as the specification reads them: traces by gRPC to their own
    # endpoint at a non-default port (not exported), the other signals by HTTP.
    http = OtlpHttpEndpoint()
    try:
        said = run_without_grpc(http.url, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                                OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc",
                                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http.url)
    finally:
        http.close()
    assert len(said) == 1, said
    assert "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc" in said[0], said
    assert "traces are not exported at all" in said[0], said
    assert PATHS["traces"] not in http.requests
    assert http.requests[PATHS["metrics"]] and http.requests[PATHS["logs"]], http.requests
