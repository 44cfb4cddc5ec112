"""The whole path with real parts: OTLP/HTTP to a real receiver, a real Prometheus scraping
a real JAX process, ``opentelemetry-instrument``, and a collector that is down.

Every server runs on loopback and is started (and stopped) by the test itself.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import PLAIN_SCRIPT, STORM_SCRIPT, clean_env, free_port, pythonpath
from oteltest.sink import HttpSink
from oteltest.sink.handler import RequestHandler

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train.py"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "otel_jax_alerts.yml"

pytestmark = pytest.mark.slow




def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# --- OTLP ------------------------------------------------------------------------------

def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attrs(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


class Collected(RequestHandler):
    """What a real OTLP receiver got, decoded from the protobuf requests."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.logs: list[dict] = []
        self.metric_names: set[str] = set()
        self.lock = threading.Lock()

    def handle_trace(self, request, headers):
        with self.lock:
            for rs in request.resource_spans:
                resource = _attrs(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({
                            "name": s.name, "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                            "attributes": _attrs(s.attributes), "resource": resource,
                            "scope": ss.scope.name,
                        })

    def handle_logs(self, request, headers):
        with self.lock:
            for rl in request.resource_logs:
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        self.logs.append({
                            "trace_id": r.trace_id.hex(), "span_id": r.span_id.hex(),
                            "attributes": _attrs(r.attributes), "body": _value(r.body),
                        })

    def handle_metrics(self, request, headers):
        with self.lock:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    self.metric_names.update(m.name for m in sm.metrics)


@pytest.fixture
def otlp_receiver():
    collected = Collected()
    port = free_port()
    sink = HttpSink(collected, logging.getLogger("otlp-receiver"), port=port)
    sink.start()
    wait_for(lambda: _port_open(port), 10, "the OTLP receiver")
    try:
        yield collected, f"http://127.0.0.1:{port}"
    finally:
        sink.stop()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def run(cmd: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_otlp_http_export_to_a_real_receiver(otlp_receiver):
    collected, endpoint = otlp_receiver
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="otel-jax-it",
                    OTEL_BSP_SCHEDULE_DELAY="200", OTEL_METRIC_EXPORT_INTERVAL="500")
    result = run([sys.executable, str(EXAMPLE), "--epochs", "2"], env)
    assert result.returncode == 0, result.stderr[-3000:]

    compiles = [s for s in collected.spans if s["name"] == "jax.compile train_step"]
    assert [s["attributes"]["jax.compile.cause.kind"] for s in compiles] == [
        "first_compile", "weak_type", "shape", "pytree_structure", "shape"]
    weak = compiles[1]["attributes"]
    assert weak["jax.compile.cause"] == "lr: f32[] (weak) -> f32[]"
    assert json.loads(weak["jax.compile.cause.diff"])[0]["path"] == "lr"
    assert weak["code.function.name"] == "train_step"
    assert weak["jax.device.platform"] == "cpu"
    assert compiles[0]["resource"]["service.name"] == "otel-jax-it"
    assert compiles[0]["scope"] == "otel_jax"

    steps = {s["span_id"]: s for s in collected.spans if s["name"] == "train_step"}
    for c in compiles:  # each compile sits inside the train_step span that triggered it
        assert c["parent"] in steps
        assert steps[c["parent"]]["trace_id"] == c["trace_id"]
    phases = {s["name"] for s in collected.spans if s["parent"] == compiles[0]["span_id"]}
    assert phases == {"jax.trace", "jax.lower", "jax.backend_compile"}

    logs = [r for r in collected.logs
            if r["attributes"].get("code.function.name") == "train_step"]
    assert len(logs) == len(compiles)
    by_span = {c["span_id"]: c for c in compiles}
    for record in logs:  # every log record links to its compile span
        assert record["span_id"] in by_span
        assert record["trace_id"] == by_span[record["span_id"]]["trace_id"]
    assert "jax.compilations" in collected.metric_names
    assert "jax.compile.duration" in collected.metric_names


def test_otlp_grpc_export_to_a_real_receiver():
    from oteltest.sink import GrpcSink

    collected = Collected()
    port = free_port()
    sink = GrpcSink(collected, logging.getLogger("otlp-grpc-receiver"), port=port)
    sink.start()
    try:
        wait_for(lambda: _port_open(port), 10, "the OTLP/gRPC receiver")
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                        OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_SERVICE_NAME="otel-jax-grpc",
                        OTEL_BSP_SCHEDULE_DELAY="200", OTEL_METRIC_EXPORT_INTERVAL="500")
        result = run([sys.executable, str(EXAMPLE), "--epochs", "2"], env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "gRPC exporter is not installed" not in result.stderr
    finally:
        sink.stop()
    compiles = [s for s in collected.spans if s["name"] == "jax.compile train_step"]
    assert [s["attributes"]["jax.compile.cause.kind"] for s in compiles] == [
        "first_compile", "weak_type", "shape", "pytree_structure", "shape"]
    assert compiles[0]["resource"]["service.name"] == "otel-jax-grpc"
    assert any(r["attributes"].get("code.function.name") == "train_step"
               for r in collected.logs)
    assert "jax.compilations" in collected.metric_names




def test_the_service_is_named_after_the_program_unless_the_environment_names_it(
        otlp_receiver, tmp_path):
    """Only the endpoint set: the traces land under the program's name (the script's stem,
    the module's name for ``-m``), for ``otel-jax run`` and for install() in the code; a
    name in the environment wins."""

    collected, endpoint = otlp_receiver
    (tmp_path / "my_trainer.py").write_text(PLAIN_SCRIPT)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "trainer.py").write_text(
        "import otel_jax\notel_jax.install(log_output=None)\n" + PLAIN_SCRIPT)
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="200",
                    OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                    PYTHONPATH=pythonpath(ROOT, tmp_path))
    named = {**env, "OTEL_RESOURCE_ATTRIBUTES": "service.name=chosen"}
    runs = [([sys.executable, "-m", "otel_jax", "run", "--log-output", "none",
              str(tmp_path / "my_trainer.py")], env),
            ([sys.executable, "-m", "pkg.trainer"], env),
            ([sys.executable, "-m", "otel_jax", "run", "--log-output", "none", "-m",
              "pkg.trainer"], named)]
    for cmd, run_env in runs:
        result = subprocess.run(cmd, env=run_env, cwd=tmp_path, capture_output=True,
                                text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]

    def services():
        return sorted(s["resource"].get("service.name") for s in collected.spans
                      if s["name"] == "jax.compile step")

    expected = sorted(["my_trainer", "pkg.trainer", "chosen"] * 2)  # 2 compiles each
    wait_for(lambda: services() == expected, 30, f"compile spans of services {expected}")


@pytest.mark.parametrize("disabled", [False, True])
def test_zero_code_opentelemetry_instrument(otlp_receiver, tmp_path, disabled):
    collected, endpoint = otlp_receiver
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SCRIPT)
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                    OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                    OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="none",
                    OTEL_LOGS_EXPORTER="none", OTEL_SERVICE_NAME="zero-code")
    if disabled:
        env["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = "jax"
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    result = run([str(instrument), sys.executable, str(script)], env)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = 0 if disabled else 2
    wait_for(lambda: any(s["name"] == "control" for s in collected.spans)
             and len([s for s in collected.spans if s["name"] == "jax.compile step"]) == expected,
             30, f"the script's own span and its {expected} compile spans")
    compiles = [s for s in collected.spans if s["name"] == "jax.compile step"]
    if disabled:
        assert compiles == []
    else:
        assert [s["attributes"]["jax.compile.cause.kind"] for s in compiles] == [
            "first_compile", "shape"]
        control = next(s for s in collected.spans if s["name"] == "control")
        assert all(s["parent"] == control["span_id"] for s in compiles)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_collector_down_costs_one_warning(protocol, tmp_path):
    port = free_port()  # nothing listens there
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                    OTEL_EXPORTER_OTLP_PROTOCOL=protocol, OTEL_EXPORTER_OTLP_TIMEOUT="3",
                    PYTHONUNBUFFERED="1")
    # What the collector being down may cost is the exit after training (the exporters'
    # final flush, where retries with back-off would show), not the training itself, whose
    # duration depends on how busy the machine is: time from the demo's summary to its exit.
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--epochs", "2"], env=env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
        watchdog = threading.Timer(240, proc.kill)
        watchdog.start()
        try:
            stdout, summary_at = [], None
            for line in proc.stdout:
                stdout.append(line)
                if summary_at is None and "compiles of train_step, and why" in line:
                    summary_at = time.monotonic()
            returncode = proc.wait()
            exited_at = time.monotonic()
        finally:
            watchdog.cancel()
    stderr_text = stderr_path.read_text()
    assert returncode == 0, stderr_text[-3000:]
    assert summary_at is not None, "".join(stdout)
    other = [ln for ln in stderr_text.splitlines()
             if ln.strip() and '"event": "jax.compile"' not in ln]
    warnings_ = [ln for ln in other if "OtelJaxWarning" in ln]
    assert len(warnings_) == 1 and "cannot export" in warnings_[0]
    # every signal sent there named, at the program's install() line, not at "sys:1"
    assert "cannot export traces, metrics and logs to " in warnings_[0], warnings_[0]
    install = next(i for i, text in enumerate(EXAMPLE.read_text().splitlines(), 1)
                   if "otel_jax.install(" in text)
    assert warnings_[0].startswith(f"{EXAMPLE}:{install}: OtelJaxWarning: "), warnings_[0]
    assert "Traceback" not in stderr_text
    assert not [ln for ln in other if "Transient error" in ln or "Failed to export" in ln]
    # A few export attempts of at most OTEL_EXPORTER_OTLP_TIMEOUT=3 s each, not retries
    # with back-off (those take minutes); generous for a busy machine.
    assert exited_at - summary_at < 45, f"exit took {exited_at - summary_at:.1f} s"


# --- Prometheus --------------------------------------------------------------------------



def _prometheus_query(base: str, query: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.fixture
def prometheus(tmp_path, prometheus_binary):
    binary = prometheus_binary  # Prometheus 3, built by scripts/ensure-tools
    targets = [free_port(), free_port()]
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(textwrap.dedent(f"""
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        rule_files:
          - {RULES}
        scrape_configs:
          - job_name: otel-jax-it
            static_configs:
              - targets: ["127.0.0.1:{targets[0]}", "127.0.0.1:{targets[1]}"]
    """))
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, 60, "Prometheus to be ready")
        yield base, targets
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def test_real_prometheus_scrapes_a_real_jax_process(prometheus, tmp_path):
    base, (train_port, storm_port) = prometheus
    storm = tmp_path / "storm.py"
    storm.write_text(STORM_SCRIPT)
    train = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--epochs", "2", "--linger", "60"],
        env=clean_env(OTEL_EXPORTER_PROMETHEUS_PORT=str(train_port),
                      OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stormer = subprocess.Popen(
        [sys.executable, str(storm), "60"],
        env=clean_env(OTEL_EXPORTER_PROMETHEUS_PORT=str(storm_port),
                      OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The final state of the two epochs (compiles #1..#5 of train_step), not the first
        # scrape where every cause kind has appeared: the last compile's sample may come later.
        expected = {"first_compile": 1, "weak_type": 1, "shape": 2, "pytree_structure": 1}

        def train_step_counts():
            series = _prometheus_query(
                base, 'jax_compilations_total{code_function_name="train_step"}')
            counts = {s["metric"]["jax_compile_cause_kind"]: float(s["value"][1])
                      for s in series}
            return series if counts == expected else None

        series = wait_for(train_step_counts, 120,
                          f"train_step compilations {expected} in Prometheus")
        by_kind = {s["metric"]["jax_compile_cause_kind"]: s for s in series}
        assert by_kind["first_compile"]["metric"]["jax_compile_is_recompile"] == "false"
        assert by_kind["weak_type"]["metric"]["jax_compile_is_recompile"] == "true"
        assert float(by_kind["shape"]["value"][1]) == 2
        assert by_kind["shape"]["metric"]["job"] == "otel-jax-it"

        rate = ('sum by (code_function_name) (rate(jax_compilations_total'
                '{jax_compile_is_recompile="true", code_function_name="storm_step"}[15s]))')
        result = wait_for(lambda: [r for r in _prometheus_query(base, rate)
                                   if float(r["value"][1]) > 1], 60,
                          "a recompile rate above 1/s for storm_step")
        assert result[0]["metric"]["code_function_name"] == "storm_step"

        # The deploy/ alert rules, evaluated by this real server on real metric names.
        pending = wait_for(lambda: _prometheus_query(
            base, 'ALERTS{alertname="JaxRecompilationStorm"}'), 60,
            "the recompilation-storm alert to become pending")
        # The user's function, not the eager broadcast_in_dim its jnp.ones(n) storms with.
        assert {p["metric"]["code_function_name"] for p in pending} == {"storm_step"}
        assert pending[0]["metric"]["alertstate"] in ("pending", "firing")
        recompile_kinds = {"weak_type", "shape", "pytree_structure"}

        def recorded_kinds():
            recorded = _prometheus_query(
                base, 'jax:recompilations:rate5m{code_function_name="train_step"}')
            kinds = {r["metric"]["jax_compile_cause_kind"] for r in recorded}
            return kinds if kinds == recompile_kinds else None

        wait_for(recorded_kinds, 60,
                 f"the recompilation recording rule for all of {sorted(recompile_kinds)}")
    finally:
        for proc in (train, stormer):
            proc.terminate()
            proc.wait(timeout=20)
