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
                 retry_after: str | None = None, close: tuple[str, ...] = ()) -> None:
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
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
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
    warnings_ = [ln for ln in proc.stderr.splitlines() if "OtelJaxWarning" in ln]
    others = [ln for ln in proc.stderr.splitlines() if ln.strip() and ln not in warnings_]
    assert not others, others  # no retry lines, no traceback
    return warnings_


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

    def __init__(self) -> None:
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
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.url = f"http://127.0.0.1:{port}"

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
