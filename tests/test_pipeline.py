"""The deploy/ pipeline for real, without Docker: Jaeger v2 and Prometheus 3 run as local
processes, built from their Go modules by scripts/ensure-tools, and VictoriaLogs beside them.

* Jaeger v2 is an OpenTelemetry Collector distribution, so one process plays both the
  collector and the Jaeger of deploy/docker-compose.yml: it loads
  deploy/otel-collector/config.yaml (endpoints moved to free loopback ports, the components
  the binary lacks dropped, see ``collector_config``) plus an OTLP receiver standing for
  Jaeger's own, in-memory storage and the query API the Jaeger UI reads.
* examples/train.py sends to it over OTLP/HTTP and OTLP/gRPC; the tests search Jaeger's
  HTTP API the way a user searches in the UI.
* VictoriaLogs stores the log records the collector sends it (its OTLP/HTTP exporter, as
  deploy/ configures it); the tests query them in LogsQL, as Grafana's logs panel does.
* Prometheus 3 scrapes the collector's prometheus exporter with the scrape settings of
  deploy/prometheus/prometheus.yml and evaluates deploy/prometheus/rules/otel_jax_alerts.yml;
  every Prometheus query of the Grafana dashboard is run against what it stored.

Every server binds 127.0.0.1 on a free port and is stopped by its fixture. Every wait is
bounded and waits for the final expected state, not the first sign of life.
"""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import STORM_SCRIPT, clean_env, free_port

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
EXAMPLE = ROOT / "examples" / "train.py"
COLLECTOR_CONFIG = DEPLOY / "otel-collector" / "config.yaml"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES_FILE = DEPLOY / "prometheus" / "rules" / "otel_jax_alerts.yml"
DASHBOARD_FILE = DEPLOY / "grafana" / "dashboards" / "otel_jax.json"
DATASOURCES_FILE = DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yml"

pytestmark = pytest.mark.slow

# The demo's compiles of train_step (README.md, "What it shows").
DEMO_TRAIN_STEP_CAUSES = ["first_compile", "weak_type", "shape", "pytree_structure", "shape"]
PHASES = {"jax.trace", "jax.lower", "jax.backend_compile"}
# The storm alert's `for:` in the test's copy of the rules (5m as shipped): the expression,
# thresholds and everything else are the shipped ones.
STORM_FOR = "15s"
# Panels whose series exist only in multi-process jobs (the demo is one process); their
# queries are parsed by promtool in tests/test_deploy.py, and the alert on the same series
# is unit-tested in tests/test_deploy_multiprocess.py.
MULTI_PROCESS_PANELS = {"Divergences between ranks"}


# --------------------------------------------------------------------------- helpers



def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(fetch, done, timeout: float, what: str, interval: float = 0.5):
    """Poll ``fetch()`` until ``done(state)``; the state is returned. Bounded: after
    ``timeout`` seconds it fails and shows the last state seen."""
    deadline = time.monotonic() + timeout
    state = None
    while True:
        try:
            state = fetch()
        except (OSError, ValueError) as exc:  # a server not up yet, a half-written answer
            state = exc
        if not isinstance(state, Exception) and done(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}; last state: "
                f"{str(state)[:3000]}")
        time.sleep(interval)


def get_json(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)



class Server:
    """A server process whose output goes to a log file; stopped by the fixture that made it."""

    def __init__(self, cmd: list[str], log: Path) -> None:
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     cwd=log.parent)

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.log.name}: exited with {self.proc.returncode}:\n"
                                 f"{self.log_tail()}")

    def log_tail(self, n: int = 6000) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                # Jaeger's graceful stop takes about 10 s (what a test checks is over by
                # then, and its storage is the test's temporary folder): 3 s, then killed.
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._log_file.close()


def once_ready(server: Server, ready, what: str, timeout: float = 60) -> Server:
    """``server`` once it runs and ``ready()`` is true (a bounded wait); where it is not,
    the server is stopped and the wait's failure raised."""
    try:
        wait_until(lambda: (server.check_running(), ready())[1], bool, timeout, what)
    except BaseException:
        server.stop()
        raise
    return server


# ------------------------------------------------------------- Jaeger as the collector


@dataclass
class Pipeline:
    jaeger: Server
    config: dict
    dropped: list[str]
    otlp_grpc: int
    otlp_http: int
    exporter: int  # the collector's prometheus exporter (what Prometheus scrapes)
    query: str  # Jaeger's HTTP query API (what the UI reads)
    logs: VictoriaLogs  # where the collector's logs pipeline sends the log records


def jaeger_components(binary: str) -> dict[str, set[str]]:
    """Component types compiled into the binary (`jaeger components`)."""
    proc = subprocess.run([binary, "components"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = yaml.safe_load(proc.stdout)
    return {kind: {c["name"] for c in listed.get(kind) or []}
            for kind in ("receivers", "processors", "exporters", "extensions", "connectors")}


# Exporter types renamed in collector 0.144 (the old names stay as deprecated aliases).
# Jaeger 2.13 bundles collector 0.140, which knows only the old names.
OLD_EXPORTER_NAMES = {"otlp_grpc": "otlp", "otlp_http": "otlphttp"}


def collector_config(components: dict[str, set[str]], ports: dict[str, int]) -> tuple[dict, list[str]]:
    """deploy/otel-collector/config.yaml as the Jaeger binary can run it, with what differs.

    Endpoints move to free loopback ports; components whose type the binary lacks are
    dropped (listed in the second value); an exporter type the bundled collector knows only
    by its pre-0.144 name is loaded under that name; Jaeger's own side of the compose file
    (an OTLP receiver, memory storage, the query API) is added."""
    config = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))
    dropped: list[str] = []

    def kind(name: str) -> str:
        return name.split("/", 1)[0]

    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    protocols["grpc"]["endpoint"] = f"127.0.0.1:{ports['otlp_grpc']}"
    protocols["http"]["endpoint"] = f"127.0.0.1:{ports['otlp_http']}"

    renamed: dict[str, str] = {}
    exporters = {}
    for name, settings in config["exporters"].items():
        new = name
        if kind(name) not in components["exporters"]:
            old = OLD_EXPORTER_NAMES.get(kind(name))
            assert old in components["exporters"], f"the binary has no exporter like {name}"
            new = old + name[len(kind(name)):]
            renamed[name] = new
        exporters[new] = settings
    config["exporters"] = exporters
    jaeger_exporter = renamed.get("otlp_grpc/jaeger", "otlp_grpc/jaeger")
    assert exporters[jaeger_exporter]["endpoint"] == "jaeger:4317"
    exporters[jaeger_exporter]["endpoint"] = f"127.0.0.1:{ports['jaeger_otlp']}"
    assert exporters["prometheus"]["endpoint"] == "0.0.0.0:8889"
    exporters["prometheus"]["endpoint"] = f"127.0.0.1:{ports['exporter']}"
    logs_exporter = renamed.get("otlp_http/victorialogs", "otlp_http/victorialogs")
    shipped_logs = "http://victorialogs:9428/insert/opentelemetry/v1/logs"
    assert exporters[logs_exporter]["logs_endpoint"] == shipped_logs
    exporters[logs_exporter]["logs_endpoint"] = shipped_logs.replace(
        "victorialogs:9428", f"127.0.0.1:{ports['victorialogs']}")

    for section in ("processors", "extensions"):
        for name in list(config.get(section) or {}):
            if kind(name) not in components[section]:
                del config[section][name]
                dropped.append(f"{section[:-1]} {name}")

    service = config["service"]
    service["extensions"] = [e for e in service.get("extensions", [])
                             if e in (config.get("extensions") or {})]
    for pipeline in service["pipelines"].values():
        pipeline["processors"] = [p for p in pipeline["processors"] if p in config["processors"]]
        pipeline["exporters"] = [renamed.get(e, e) for e in pipeline["exporters"]]

    # Jaeger's side of docker-compose.yml: its OTLP receiver, memory storage, query API.
    config["receivers"]["otlp/jaeger"] = {
        "protocols": {"grpc": {"endpoint": f"127.0.0.1:{ports['jaeger_otlp']}"}}}
    config.setdefault("extensions", {})
    config["extensions"]["jaeger_storage"] = {
        "backends": {"memstore": {"memory": {"max_traces": 100000}}}}
    config["extensions"]["jaeger_query"] = {
        "storage": {"traces": "memstore"},
        "enable_tracing": False,  # no spans of Jaeger's own requests in the results
        "http": {"endpoint": f"127.0.0.1:{ports['query_http']}"},
        "grpc": {"endpoint": f"127.0.0.1:{ports['query_grpc']}"},
    }
    config["exporters"]["jaeger_storage_exporter"] = {"trace_storage": "memstore"}
    service["extensions"] += ["jaeger_storage", "jaeger_query"]
    service["pipelines"]["traces/jaeger"] = {
        "receivers": ["otlp/jaeger"], "processors": ["batch"],
        "exporters": ["jaeger_storage_exporter"]}
    # The collector's own telemetry would listen on :8888 by default.
    service["telemetry"] = {"metrics": {"level": "none"}, "logs": {"level": "info"}}
    return config, dropped


@pytest.fixture(scope="session")
def components(jaeger_binary) -> dict[str, set[str]]:
    return jaeger_components(jaeger_binary)


@dataclass
class VictoriaLogs:
    """VictoriaLogs as docker-compose.yml runs it (its storage in the test's folder)."""

    server: Server
    base: str

    def query(self, logsql: str, limit: int = 10_000) -> list[dict]:
        """The log entries a LogsQL query selects (``/select/logsql/query``), as Grafana's
        VictoriaLogs data source asks for them: one JSON object a line."""
        body = urllib.parse.urlencode({"query": logsql, "limit": str(limit)}).encode()
        with urllib.request.urlopen(f"{self.base}/select/logsql/query", data=body,
                                    timeout=10) as response:
            return [json.loads(line) for line in response.read().decode().splitlines()
                    if line.strip()]


def start_victorialogs(binary: str, port: int, tmp_path: Path) -> VictoriaLogs:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    flags = [a for a in compose["services"]["victorialogs"]["command"]
             if not a.startswith("-storageDataPath=")]
    server = Server([binary, f"-storageDataPath={tmp_path / 'victorialogs-data'}",
                     f"-httpListenAddr=127.0.0.1:{port}", *flags],
                    tmp_path / "victorialogs.log")
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
            return r.status == 200

    return VictoriaLogs(once_ready(server, ready, "VictoriaLogs to be ready"), base)


@pytest.fixture
def pipeline(jaeger_binary, victorialogs_binary, components, tmp_path) -> Pipeline:
    ports = {name: free_port() for name in
             ("otlp_grpc", "otlp_http", "jaeger_otlp", "exporter", "query_http", "query_grpc",
              "victorialogs")}
    config, dropped = collector_config(components, ports)
    path = tmp_path / "jaeger.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    logs = start_victorialogs(victorialogs_binary, ports["victorialogs"], tmp_path)
    jaeger = None
    try:
        jaeger = Server([jaeger_binary, f"--config={path}"], tmp_path / "jaeger.log")
        query = f"http://127.0.0.1:{ports['query_http']}"

        def ready():
            jaeger.check_running()
            get_json(f"{query}/api/services", timeout=2)
            return all(port_open(ports[p]) for p in ("otlp_grpc", "otlp_http", "exporter"))

        wait_until(ready, bool, 90, "Jaeger (as the collector) to listen on all its ports")
        yield Pipeline(jaeger, config, dropped, ports["otlp_grpc"], ports["otlp_http"],
                       ports["exporter"], query, logs)
    finally:
        if jaeger is not None:
            jaeger.stop()
        logs.server.stop()


def test_the_deploy_collector_config_loads_in_jaeger(jaeger_binary, pipeline, components):
    """What the pipeline tests run is deploy/'s configuration, with only these differences."""
    assert sorted(pipeline.dropped) == ["extension health_check", "processor resource/job"]
    shipped = yaml.safe_load(COLLECTOR_CONFIG.read_text(encoding="utf-8"))
    for name, settings in shipped["service"]["pipelines"].items():
        ran = pipeline.config["service"]["pipelines"][name]
        assert ran["receivers"] == settings["receivers"]
        assert ran["processors"] == [p for p in settings["processors"] if p != "resource/job"]
    # The current exporter name is what deploy/ ships; the bundled collector v0.140 predates
    # it and loads the same exporter under its old name.
    assert "otlp_grpc/jaeger" in shipped["exporters"]
    assert "otlp_grpc" not in components["exporters"] and "otlp" in components["exporters"]
    assert pipeline.config["service"]["pipelines"]["traces"]["exporters"] == ["otlp/jaeger"]
    assert "otlp_http/victorialogs" in shipped["exporters"]
    assert pipeline.config["service"]["pipelines"]["logs"]["exporters"] == [
        "otlphttp/victorialogs"]
    log = pipeline.jaeger.log_tail(100_000)
    assert "Everything is ready" in log, log[-3000:]
    errors = [line for line in log.splitlines() if "\terror\t" in line or "\tfatal\t" in line]
    assert not errors, "\n".join(errors)


# -------------------------------------------------------------------------- the demo


@dataclass
class Demo:
    result: subprocess.CompletedProcess
    compiles: list[dict] = field(default_factory=list)  # the jax.compile JSON log lines

    def of(self, function: str) -> list[dict]:
        return [c for c in self.compiles if c["function"] == function]


def run_demo(pipeline: Pipeline, protocol: str, **env: str) -> Demo:
    port = pipeline.otlp_grpc if protocol == "grpc" else pipeline.otlp_http
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=ROOT, capture_output=True, text=True, timeout=420,
        env=clean_env(OTEL_SERVICE_NAME="train",
                      OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                      OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                      OTEL_BSP_SCHEDULE_DELAY="200", OTEL_METRIC_EXPORT_INTERVAL="500",
                      **env))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cannot export" not in result.stderr, result.stderr[-3000:]
    demo = Demo(result)
    for line in result.stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "jax.compile":
                demo.compiles.append(event)
    assert [c["cause_kind"] for c in demo.of("train_step")] == DEMO_TRAIN_STEP_CAUSES
    assert "compiles of train_step, and why" in result.stdout
    return demo


# ---------------------------------------------------------------------------- Jaeger


def tag_map(tags: list[dict]) -> dict[str, tuple[str, object]]:
    return {t["key"]: (t["type"], t["value"]) for t in tags}


def search_jaeger(pipeline: Pipeline, service: str = "train", **params) -> list[dict]:
    """GET /api/traces as the Jaeger UI's search form sends it."""
    now_us = int(time.time() * 1e6)
    query = {"service": service, "limit": 10000, "start": now_us - 3600 * 10**6,
             "end": now_us + 60 * 10**6, **params}
    body = get_json(f"{pipeline.query}/api/traces?" + urllib.parse.urlencode(query))
    assert not body.get("errors"), body["errors"]
    return body["data"] or []


@dataclass
class Stored:
    """Every span of a service in Jaeger, by span id."""

    spans: dict[int, dict] = field(default_factory=dict)
    services: dict[int, str] = field(default_factory=dict)
    process_tags: dict[int, dict] = field(default_factory=dict)

    @classmethod
    def from_traces(cls, traces: list[dict]) -> Stored:
        out = cls()
        for trace in traces:
            for span in trace["spans"]:
                sid = int(span["spanID"], 16)
                out.spans[sid] = span
                process = trace["processes"][span["processID"]]
                out.services[sid] = process["serviceName"]
                out.process_tags[sid] = tag_map(process.get("tags") or [])
        return out

    def parent(self, span: dict) -> dict | None:
        refs = [r for r in span.get("references") or [] if r["refType"] == "CHILD_OF"]
        return self.spans.get(int(refs[0]["spanID"], 16)) if refs else None

    def children(self, span: dict) -> list[dict]:
        sid = int(span["spanID"], 16)
        return [s for s in self.spans.values()
                if any(r["refType"] == "CHILD_OF" and int(r["spanID"], 16) == sid
                       for r in s.get("references") or [])]

    def compile_spans(self) -> dict[int, dict]:
        return {sid: s for sid, s in self.spans.items()
                if s["operationName"].startswith("jax.compile ")
                and tag_map(s["tags"]).get("jax.compile.eager_op") != ("bool", True)}


def complete(stored: Stored, demo: Demo) -> bool:
    """Every compile of the demo's log is stored, inside its step span, with its phases."""
    compiles = stored.compile_spans()
    if set(compiles) != {int(c["span_id"], 16) for c in demo.compiles}:
        return False
    for span in compiles.values():
        if not span["operationName"].endswith("train_step"):
            continue
        parent = stored.parent(span)
        if parent is None or {c["operationName"] for c in stored.children(span)} != PHASES:
            return False
    return True


@pytest.mark.hazards  # the demo says its two hazards: their lines reach VictoriaLogs too
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_demo_compiles_in_jaeger_as_a_user_searches_them(pipeline, protocol):
    demo = run_demo(pipeline, protocol)
    train_compiles = demo.of("train_step")
    recompiles = [c for c in train_compiles if c["is_recompile"]]
    assert len(recompiles) == 4

    # Wait for the final state: every compile of the log stored, inside its step, with phases.
    stored = wait_until(lambda: Stored.from_traces(search_jaeger(pipeline)),
                        lambda s: complete(s, demo), 120,
                        f"all {len(demo.compiles)} compile spans of the demo in Jaeger")

    services = get_json(f"{pipeline.query}/api/services")["data"]
    assert "train" in services
    operations = get_json(f"{pipeline.query}/api/services/train/operations")["data"]
    assert "jax.compile train_step" in operations

    # The user's search: service train, operation jax.compile train_step, tag is_recompile=true.
    found = Stored.from_traces(search_jaeger(
        pipeline, operation="jax.compile train_step",
        tags=json.dumps({"jax.compile.is_recompile": "true"})))
    matching = {sid: s for sid, s in found.spans.items()
                if s["operationName"] == "jax.compile train_step"
                and tag_map(s["tags"])["jax.compile.is_recompile"] == ("bool", True)}
    by_span = {int(c["span_id"], 16): c for c in train_compiles}
    assert set(matching) == {int(c["span_id"], 16) for c in recompiles}
    # Every trace found holds one of them (nothing else matched the search).
    assert {int(s["traceID"], 16) for s in found.spans.values()} == {
        int(c["trace_id"], 16) for c in recompiles}

    # The tag filters: is_recompile=false finds the trace of the first compile only.
    first = Stored.from_traces(search_jaeger(
        pipeline, operation="jax.compile train_step",
        tags=json.dumps({"jax.compile.is_recompile": "false"})))
    assert {int(s["traceID"], 16) for s in first.spans.values()} == {
        int(train_compiles[0]["trace_id"], 16)}

    all_train = {sid: s for sid, s in stored.compile_spans().items()
                 if s["operationName"] == "jax.compile train_step"}
    assert len(all_train) == len(train_compiles) == len(DEMO_TRAIN_STEP_CAUSES)
    for sid, span in all_train.items():
        logged = by_span[sid]
        tags = tag_map(span["tags"])
        assert stored.services[sid] == "train"
        assert int(span["traceID"], 16) == int(logged["trace_id"], 16)
        # The compile span sits inside the step span that triggered it.
        parent = stored.parent(span)
        assert parent["operationName"] == "train_step"
        assert tag_map(parent["tags"])["jax.step.number"][0] == "int64"
        assert tag_map(parent["tags"])["jax.step.compiled"] == ("bool", True)
        assert parent["startTime"] <= span["startTime"]
        assert span["startTime"] + span["duration"] <= parent["startTime"] + parent["duration"]
        # Its phases are its children, inside it.
        children = stored.children(span)
        assert {c["operationName"] for c in children} == PHASES
        for child in children:
            assert span["startTime"] <= child["startTime"]
        # What a user reads, with Jaeger's tag types.
        assert tags["code.function.name"] == ("string", "train_step")
        assert tags["jax.compile.count"] == ("int64", logged["count"])
        assert tags["jax.compile.is_recompile"] == ("bool", logged["is_recompile"])
        assert tags["jax.compile.after_warmup"] == ("bool", logged["after_warmup"])
        assert tags["jax.compile.eager_op"] == ("bool", False)
        assert tags["jax.compile.cause.kind"] == ("string", logged["cause_kind"])
        assert tags["jax.compile.cause"] == ("string", logged["cause"])
        kind, diff = tags["jax.compile.cause.diff"]
        assert kind == "string" and json.loads(diff) == logged["diff"]
        if logged["is_recompile"]:
            assert tags["jax.compile.hint"] == ("string", logged["hint"])
        kind, seconds = tags["jax.compile.duration_s"]
        assert kind == "float64" and math.isclose(seconds, logged["compile_s"], abs_tol=1e-5)
        assert tags["jax.device.platform"] == ("string", logged["device_platform"])
        assert tags["jax.device.kind"] == ("string", logged["device_kind"])
        assert tags["jax.device.count"] == ("int64", logged["device_count"])
        assert tags["jax.process.index"] == ("int64", logged["process_index"])
        # service.name is the trace's service, not a tag (hence the collector's otel_jax.job).
        assert "service.name" not in stored.process_tags[sid]
        assert "service.name" not in tags
    weak = next(s for s in all_train.values()
                if tag_map(s["tags"])["jax.compile.cause.kind"] == ("string", "weak_type"))
    assert tag_map(weak["tags"])["jax.compile.cause"] == ("string", "lr: f32[] (weak) -> f32[]")

    check_demo_lines_in_victorialogs(pipeline, demo)


# ----------------------------------------------------------------------- VictoriaLogs

LOGS_PANEL = "Compile and hazard lines of the selected functions"


def grafana_logsql(expr: str, job: str, functions: list[str] | None) -> str:
    """A LogsQL query of the dashboard as the VictoriaLogs data source sends it: ``$job``
    replaced by its value, and ``in($function)`` by ``in(*)`` for "All" (``None``) or by
    the picked values quoted, ``in("a", "b")`` (the plugin's rules for a multi-value
    variable inside ``in()``)."""
    picked = "*" if functions is None else ", ".join(json.dumps(f) for f in functions)
    return grafana_vars(expr.replace("in($function)", f"in({picked})"), {"job": job})


def check_demo_lines_in_victorialogs(pipeline: Pipeline, demo: Demo) -> None:
    """The demo's compile and hazard lines of train_step, sent over OTLP by the demo and by
    the collector's logs pipeline, answer the dashboard's logs panel (function train_step)
    with their fields, and a query by trace_id answers the lines of that trace."""
    hazards = [json.loads(line) for line in demo.result.stderr.splitlines()
               if line.startswith("{") and '"event": "jax.compile.hazard"' in line]
    expected = {("jax.compile", int(c["span_id"], 16)) for c in demo.of("train_step")}
    expected |= {("jax.compile.hazard", int(h["span_id"], 16)) for h in hazards
                 if h["function"] == "train_step"}
    assert any(event == "jax.compile.hazard" for event, _ in expected)  # the learning rate's

    dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    panel = next(p for p in all_panels(dashboard["panels"]) if p["title"] == LOGS_PANEL)
    logsql = grafana_logsql(panel["targets"][0]["expr"], "train", ["train_step"])
    lines = wait_until(lambda: pipeline.logs.query(logsql),
                       lambda got: {(ln["event_name"], int(ln["span_id"], 16))
                                    for ln in got} == expected, 90,
                       f"the {len(expected)} lines of train_step in VictoriaLogs")
    by_span = {int(c["span_id"], 16): c for c in demo.of("train_step")}
    for line in lines:
        # The event's name is the record's own field, which VictoriaLogs keeps as the
        # `event_name` field of the line's stream (with the job's service.name).
        assert line["_stream"] == (f'{{event_name="{line["event_name"]}",'
                                   f'service.name="train"}}'), line["_stream"]
        assert "event.name" not in line
        assert line["code.function.name"] == "train_step"
        assert line["_msg"].startswith(f"{line['event_name']} train_step: ")
        logged = by_span[int(line["span_id"], 16)]
        assert int(line["trace_id"], 16) == int(logged["trace_id"], 16)
        if line["event_name"] == "jax.compile":
            assert line["severity_text"] == "INFO"
            assert line["jax.compile.cause.kind"] == logged["cause_kind"]
            assert line["jax.compile.cause"] == logged["cause"]
            assert int(line["jax.compile.count"]) == logged["count"]
        else:
            assert line["severity_text"] == "WARN"
            assert line["jax.compile.hazard.kind"] == "weak_type"

    # By trace_id (a line's derived field, and the Jaeger data source's trace-to-logs
    # query): the lines of one recompile's trace, and only them.
    recompile = next(c for c in demo.of("train_step") if c["cause_kind"] == "shape")
    trace = int(recompile["trace_id"], 16)
    datasources = yaml.safe_load(DATASOURCES_FILE.read_text(encoding="utf-8"))["datasources"]
    to_logs = next(d for d in datasources if d["uid"] == "jaeger")["jsonData"]["tracesToLogsV2"]
    in_trace = pipeline.logs.query(
        to_logs["query"].replace("$${__trace.traceId}", f"{trace:032x}"))
    assert {int(ln["trace_id"], 16) for ln in in_trace} == {trace}
    assert int(recompile["span_id"], 16) in {
        int(ln["span_id"], 16) for ln in in_trace if ln["event_name"] == "jax.compile"}
    assert {int(ln["span_id"], 16) for ln in in_trace
            if ln["event_name"] == "jax.compile" and ln.get("code.function.name") == "train_step"
            } == {int(c["span_id"], 16) for c in demo.of("train_step")
                  if int(c["trace_id"], 16) == trace}


EAGER_LOGS_SCRIPT = """
import jax, jax.numpy as jnp, otel_jax
otel_jax.install(log_output=None)

@jax.jit
def own_step(x):
    return x * 2

x = jnp.arange(6.0) + 1.5  # JAX's eager ops: iota, add, each compiled apart
own_step(x)
"""


def test_the_logs_panel_leaves_eager_ops_out_on_all(victorialogs_binary, tmp_path):
    """Eager-op records sent (``OTEL_JAX_LOG_LEVEL=debug``) straight to a real
    VictoriaLogs: the dashboard's logs panel on "All" answers the program's own compile
    only, where the same query without its eager-op filter has the eager ops too."""
    logs = start_victorialogs(victorialogs_binary, free_port(), tmp_path)
    try:
        env = clean_env(
            OTEL_SERVICE_NAME="eagerjob", OTEL_JAX_LOG_LEVEL="debug",
            OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
            OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=f"{logs.base}/insert/opentelemetry/v1/logs",
            # the collector's stream fields (deploy/otel-collector/config.yaml)
            OTEL_EXPORTER_OTLP_LOGS_HEADERS="VL-Stream-Fields=service.name%2Cevent_name")
        result = subprocess.run([sys.executable, "-c", EAGER_LOGS_SCRIPT], env=env,
                                capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "OtelJaxWarning" not in result.stderr, result.stderr[-3000:]
        dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
        panel = next(p for p in all_panels(dashboard["panels"]) if p["title"] == LOGS_PANEL)
        expr = panel["targets"][0]["expr"]
        unfiltered = expr.replace(' -"jax.compile.eager_op":true', "")
        assert unfiltered != expr
        everything = wait_until(
            lambda: logs.query(grafana_logsql(unfiltered, "eagerjob", None)),
            lambda got: (any(ln.get("jax.compile.eager_op") == "true" for ln in got)
                         and any(ln.get("code.function.name") == "own_step" for ln in got)),
            60, "the eager ops' and own_step's compile lines in VictoriaLogs")
        shown = logs.query(grafana_logsql(expr, "eagerjob", None))
        assert [ln["code.function.name"] for ln in shown] == ["own_step"], shown
        assert len(everything) > len(shown)
    finally:
        logs.server.stop()


# ------------------------------------------------------------------------ Prometheus


@dataclass
class PrometheusServer:
    server: Server
    base: str

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        body = get_json(f"{self.base}/api/v1/query?" + urllib.parse.urlencode(params))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def query_range(self, expr: str, start: float, end: float, step: float = 1) -> list[dict]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        body = get_json(f"{self.base}/api/v1/query_range?" + urllib.parse.urlencode(params))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def series(self, selector: str, start: float) -> list[dict]:
        params = {"match[]": selector, "start": f"{start:.3f}"}
        body = get_json(f"{self.base}/api/v1/series?" + urllib.parse.urlencode(params))
        assert body["status"] == "success", body
        return body["data"]


def rules_for_test(tmp_path: Path) -> Path:
    """The shipped rule file with only the storm alert's `for:` shortened."""
    rules = RULES_FILE.read_text(encoding="utf-8")
    start = rules.index("- alert: JaxRecompilationStorm")
    end = rules.index("- alert:", start + 1)
    block = rules[start:end]
    assert block.count("for: 5m") == 1
    path = tmp_path / "otel_jax_alerts.yml"
    path.write_text(rules[:start] + block.replace("for: 5m", f"for: {STORM_FOR}") + rules[end:],
                    encoding="utf-8")
    return path



def compose_feature_flags() -> list[str]:
    """The --enable-feature flags docker-compose.yml gives Prometheus."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    flags = [a for a in compose["services"]["prometheus"]["command"]
             if a.startswith("--enable-feature=")]
    assert flags
    return flags


@pytest.fixture
def prometheus(prometheus_binary, pipeline, tmp_path) -> PrometheusServer:
    port = free_port()
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    # Short intervals so that a test sees in seconds what takes minutes in production.
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(rules_for_test(tmp_path))]
    targets = {"otel-collector:8889": f"127.0.0.1:{pipeline.exporter}",
               "localhost:9090": f"127.0.0.1:{port}"}
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["targets"] = [targets[t] for t in static["targets"]]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    server = Server([prometheus_binary, f"--config.file={path}",
                     f"--storage.tsdb.path={tmp_path / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}",
                     *compose_feature_flags()], tmp_path / "prometheus.log")
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            server.check_running()
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
                return r.status == 200

        wait_until(ready, bool, 60, "Prometheus to be ready")
        yield PrometheusServer(server, base)
    finally:
        server.stop()




def rule_names() -> set[str]:
    groups = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))["groups"]
    return {r.get("alert") or r["record"] for g in groups for r in g["rules"]}


def grafana_vars(expr: str, values: dict[str, str]) -> str:
    out = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), expr)
    assert "$" not in out, f"unknown Grafana variable in {expr!r}"
    return out


def all_panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def test_metrics_alerts_and_dashboard_through_the_pipeline(pipeline, prometheus, tmp_path):
    started = time.time()
    # The rules load and are evaluated (all of them, healthy).
    def rules_state():
        groups = get_json(f"{prometheus.base}/api/v1/rules")["data"]["groups"]
        return {r["name"]: r for g in groups for r in g["rules"]}

    loaded = wait_until(rules_state,
                        lambda rules: set(rules) == rule_names() and all(
                            r["health"] == "ok" and not r["lastEvaluation"].startswith("0001")
                            for r in rules.values()),
                        60, "every rule loaded and evaluated")
    assert loaded["JaxRecompilationStorm"]["duration"] == 15

    # The demo, with the persistent compilation cache on so that its panels have data too.
    demo = run_demo(pipeline, "http/protobuf",
                    JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-cache"),
                    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    user_functions = {c["function"] for c in demo.compiles}
    assert {"train_step", "main.<locals>.<lambda>"} <= user_functions
    counts: dict[tuple[str, str, str], int] = {}
    for c in demo.compiles:
        key = (c["function"], c["cause_kind"], str(c["is_recompile"]).lower())
        counts[key] = counts.get(key, 0) + 1

    # Final state of the demo's counters in Prometheus, as the collector exported them.
    def demo_counts():
        out = {}
        for s in prometheus.query('jax_compilations_total{job="train", jax_compile_eager_op!="true"}'):
            m = s["metric"]
            out[(m["code_function_name"], m["jax_compile_cause_kind"],
                 m["jax_compile_is_recompile"])] = int(float(s["value"][1]))
        return out

    wait_until(demo_counts, lambda got: got == counts, 90,
               f"the demo's compile counts {counts} in Prometheus")

    # A storm: another job recompiles a function with a new shape on every call.
    storm_script = tmp_path / "storm.py"
    storm_script.write_text(STORM_SCRIPT)
    stormer = subprocess.Popen(
        [sys.executable, str(storm_script), "240"], cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "storm.log").open("w"),
        env=clean_env(OTEL_SERVICE_NAME="storm",
                      OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{pipeline.otlp_http}",
                      OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                      OTEL_BSP_SCHEDULE_DELAY="200", OTEL_METRIC_EXPORT_INTERVAL="1000"))
    try:
        seen: list[str] = []

        def storm_alerts():
            alerts = prometheus.query('ALERTS{alertname="JaxRecompilationStorm"}')
            for a in alerts:
                if not seen or seen[-1] != a["metric"]["alertstate"]:
                    seen.append(a["metric"]["alertstate"])
            return alerts

        firing = wait_until(
            storm_alerts,
            lambda alerts: any(a["metric"]["alertstate"] == "firing" for a in alerts),
            180, "JaxRecompilationStorm to fire", interval=0.5)
        assert seen[:2] == ["pending", "firing"], seen
        assert [(a["metric"]["job"], a["metric"]["code_function_name"], a["metric"]["severity"])
                for a in firing] == [("storm", "storm_step", "critical")]
        alert = next(a for a in get_json(f"{prometheus.base}/api/v1/alerts")["data"]["alerts"]
                     if a["labels"]["alertname"] == "JaxRecompilationStorm")
        assert re.fullmatch(r"JAX recompilation storm: storm_step in storm recompiles "
                            r"\d+\.\d times a minute \(cause: shape\)",
                            alert["annotations"]["summary"]), alert["annotations"]
        storm_end = time.time()
    finally:
        stormer.terminate()
        stormer.wait(timeout=20)

    # JaxRecompileAfterWarmup: the demo's recompiles after warm-up (epochs 2 and 3; its
    # warm-up is epoch 1, evaluation included), not its first compiles (promtool's tests of
    # the rule in test_deploy.py give it one).
    expected_after = {(c["function"], c["cause_kind"]) for c in demo.compiles
                      if c["after_warmup"] and c["cause_kind"] != "first_compile"}
    assert expected_after == {("train_step", "pytree_structure"), ("train_step", "shape"),
                              ("main.<locals>.<lambda>", "function_identity")}
    wait_until(lambda: {(a["metric"]["code_function_name"], a["metric"]["jax_compile_cause_kind"])
                        for a in prometheus.query(
                            'ALERTS{alertname="JaxRecompileAfterWarmup", job="train", '
                            'alertstate="firing"}')},
               lambda got: got == expected_after, 60,
               f"JaxRecompileAfterWarmup firing for exactly {expected_after}")

    # The recording rule of recompilations: the user's functions only, no eager op.
    expected_recompiles = {(f, k) for (f, k, r) in counts if r == "true"}
    wait_until(lambda: {(s["metric"]["code_function_name"], s["metric"]["jax_compile_cause_kind"])
                        for s in prometheus.query('jax:recompilations:rate5m{job="train"}')},
               lambda got: got == expected_recompiles, 60,
               f"jax:recompilations:rate5m with exactly {expected_recompiles}")

    # The Grafana dashboard: every Prometheus query returns data for the demo.
    dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    end = time.time()
    # The rate window spans the whole test. The demo's compiles take a second or two, so a
    # counter that starts during them (the persistent cache's hits, or all of its counters
    # when the collector's 2 s batch holds every export of the run) reaches Prometheus in a
    # single scrape: rate() then rests on the zero Prometheus stores at the series' start
    # time (created-timestamp-zero-ingestion) and that first scrape, which are a pipeline
    # latency apart (export interval, batch timeout, scrape interval; more on a busy
    # machine). A window of a few seconds holds both only when the machine is quick.
    range_s = f"{int(end - started) + 60}s"
    values = {"job": "train", "instance": ".*", "function": ".*", "__interval": "1s",
              "__rate_interval": range_s, "__range": range_s}
    variables = {}
    for var in dashboard["templating"]["list"]:
        if var["type"] == "datasource":
            continue  # the Prometheus and Jaeger pickers: these are the servers here
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
        selector = grafana_vars(m.group(1), values)
        variables[var["name"]] = {s.get(m.group(2)) for s in prometheus.series(selector, started)}
    assert {"train", "storm"} <= variables["job"]
    assert variables["instance"]
    # The function picker offers the demo's own functions, not JAX's eager ops.
    assert variables["function"] == user_functions

    empty = []
    checked = 0
    for panel in all_panels(dashboard["panels"]):
        if panel["title"] in MULTI_PROCESS_PANELS:
            continue
        for target in panel.get("targets", []):
            ds = target.get("datasource") or panel.get("datasource") or {}
            if ds.get("type") == "prometheus":
                expr = grafana_vars(target["expr"], values)
                result = prometheus.query_range(expr, started, end)
                numbers = [float(v) for s in result for _, v in s["values"]]
                if not any(math.isfinite(v) and v > 0 for v in numbers):
                    empty.append(f"{panel['title']!r} {target['refId']}: {expr}")
                checked += 1
            elif ds.get("type") == "victoriametrics-logs-datasource":
                logsql = grafana_logsql(target["expr"], "train", None)
                try:
                    wait_until(lambda q=logsql: pipeline.logs.query(q), bool, 60,
                               f"lines for {logsql}")
                except AssertionError:
                    empty.append(f"{panel['title']!r} {target['refId']} (VictoriaLogs)")
                checked += 1
            elif ds.get("type") == "jaeger":
                tags = dict(kv.split("=", 1) for kv in target["tags"].split())
                traces = search_jaeger(pipeline, service=grafana_vars(target["service"], values),
                                       tags=json.dumps(tags))
                if not traces:
                    empty.append(f"{panel['title']!r} {target['refId']} (Jaeger)")
                checked += 1
    assert checked >= 15
    assert not empty, "panels without data for the demo:\n" + "\n".join(empty)

    # The storm job's panels show it too (the job variable switches the whole dashboard).
    storm_values = {**values, "job": "storm"}
    recompiles = next(p for p in all_panels(dashboard["panels"])
                      if p["title"] == "Recompilations per minute by function and cause")
    result = prometheus.query_range(grafana_vars(recompiles["targets"][0]["expr"], storm_values),
                                    started, storm_end)
    assert {s["metric"]["code_function_name"] for s in result} == {"storm_step"}

    # The traces-to-metrics links, with $__tags built from a real span as Grafana builds it
    # (span tags and process tags; Jaeger's test binary has no resource processor, so the
    # otel_jax.job copy is absent here and the link filters by function only).
    found = Stored.from_traces(search_jaeger(pipeline, operation="jax.compile train_step"))
    sid, span = next((sid, s) for sid, s in found.spans.items()
                     if s["operationName"] == "jax.compile train_step")
    jaeger_ds = next(d for d in yaml.safe_load(DATASOURCES_FILE.read_text(encoding="utf-8"))
                     ["datasources"] if d["uid"] == "jaeger")
    t2m = jaeger_ds["jsonData"]["tracesToMetrics"]
    span_tags = {key: value for key, (_, value) in found.process_tags[sid].items()}
    span_tags.update({t["key"]: t["value"] for t in span["tags"]})
    labels = [f'{t.get("value") or t["key"]}="{span_tags[t["key"]]}"'
              for t in t2m["tags"] if t["key"] in span_tags]
    assert labels == ['code_function_name="train_step"']
    for q in t2m["queries"]:
        expr = q["query"].replace("$$", "$").replace("$__tags", ", ".join(labels))
        result = prometheus.query_range(expr, started, end)
        assert result, f"{q['name']}: no data for {expr}"


# ------------------------------------------------- Jaeger as it ships: no configuration

# Where Jaeger v2 all-in-one listens with its defaults (its embedded all-in-one.yaml):
# the --set key of each endpoint, and its default port.
JAEGER_DEFAULT_ENDPOINTS = {
    "receivers::otlp::protocols::grpc::endpoint": 4317,
    "receivers::otlp::protocols::http::endpoint": 4318,
    "extensions::jaeger_query::grpc::endpoint": 16685,
    "extensions::jaeger_query::http::endpoint": 16686,
    "receivers::jaeger::protocols::grpc::endpoint": 14250,
    "receivers::jaeger::protocols::thrift_http::endpoint": 14268,
    "receivers::jaeger::protocols::thrift_binary::endpoint": 6832,  # UDP
    "receivers::jaeger::protocols::thrift_compact::endpoint": 6831,  # UDP
    "receivers::zipkin::endpoint": 9411,
    "extensions::remote_sampling::http::endpoint": 5778,
    "extensions::remote_sampling::grpc::endpoint": 5779,
    "extensions::healthcheckv2::http::endpoint": 13133,
    "extensions::healthcheckv2::grpc::endpoint": 13132,
    "extensions::expvar::endpoint": 27777,
    "extensions::zpages::endpoint": 27778,
}
JAEGER_UDP = {6831, 6832}
JAEGER_SELF_METRICS_PORT = 8888  # its own Prometheus endpoint, a telemetry reader


def _port_free(port: int, udp: bool = False) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


@dataclass
class JaegerAsShipped:
    server: Server
    otlp_grpc: int
    otlp_http: int
    query: str
    mode: str  # "defaults" or "defaults, ports moved"


def start_jaeger_as_shipped(binary: str, tmp_path: Path) -> JaegerAsShipped:
    """Jaeger v2 all-in-one with no configuration file: its own receivers, storage and
    query. With every default port free, it runs exactly as shipped (no argument at all);
    where one is taken (another test, another program on this machine), the same embedded
    configuration runs with only its listening ports moved to free ones (``--set``), and
    its own metrics reader off (it has a fixed port and no --set path to move it)."""
    default_ports = [*JAEGER_DEFAULT_ENDPOINTS.values(), JAEGER_SELF_METRICS_PORT]
    if all(_port_free(p, p in JAEGER_UDP) for p in default_ports):
        server = Server([binary], tmp_path / "jaeger-defaults.log")
        ports = dict(JAEGER_DEFAULT_ENDPOINTS)
        try:
            wait_until(lambda: (server.check_running(), port_open(4318) and port_open(4317)
                                and port_open(16686))[1], bool, 90,
                       "Jaeger with its defaults to listen")
            return JaegerAsShipped(server, 4317, 4318, "http://127.0.0.1:16686", "defaults")
        except AssertionError:  # a port was taken after all, meanwhile: move them
            server.stop()
    ports = {key: free_port() for key in JAEGER_DEFAULT_ENDPOINTS}
    args = [f"--set={key}=127.0.0.1:{port}" for key, port in ports.items()]
    args.append("--set=service::telemetry::metrics::level=none")
    server = Server([binary, *args], tmp_path / "jaeger-moved.log")
    grpc, http = (ports["receivers::otlp::protocols::grpc::endpoint"],
                  ports["receivers::otlp::protocols::http::endpoint"])
    query = ports["extensions::jaeger_query::http::endpoint"]
    wait_until(lambda: (server.check_running(),
                        port_open(grpc) and port_open(http) and port_open(query))[1],
               bool, 90, "Jaeger with its defaults (ports moved) to listen")
    return JaegerAsShipped(server, grpc, http, f"http://127.0.0.1:{query}",
                           "defaults, ports moved")


# The program as run where the gRPC exporter is not installed (an import of it fails).
NO_GRPC_SCRIPT = """
import sys
for name in ("opentelemetry.exporter.otlp.proto.grpc",
             "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
             "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
             "opentelemetry.exporter.otlp.proto.grpc._log_exporter"):
    sys.modules[name] = None
import jax, jax.numpy as jnp, otel_jax
otel_jax.install(log_output=None)

@jax.jit
def step(x):
    return x * 2

step(jnp.ones(3))
step(jnp.ones(4))
"""


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def test_grpc_missing_reaches_jaeger_at_its_http_port_beside_its_grpc_port(
        jaeger_binary, tmp_path):
    """Jaeger v2 with its OTLP receivers at their default ports (4317 gRPC, 4318 HTTP, on
    a loopback address of its own), the endpoint at its gRPC port, no gRPC exporter: the
    compile spans are stored (sent OTLP/HTTP to 4318), and what was said is the fallback
    line and Jaeger's own refusal of metrics and logs, nothing dropped."""
    import random

    host = None
    for _ in range(20):
        candidate = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
        try:
            for port in (4317, 4318):
                with socket.socket() as s:
                    s.bind((candidate, port))
        except OSError:
            continue
        host = candidate
        break
    if host is None:
        pytest.skip("no loopback address with ports 4317 and 4318 free")
    ports = {key: free_port() for key in JAEGER_DEFAULT_ENDPOINTS}
    args = [f"--set={key}=127.0.0.1:{port}" for key, port in ports.items()
            if not key.startswith("receivers::otlp::")]
    args += [f"--set=receivers::otlp::protocols::grpc::endpoint={host}:4317",
             f"--set=receivers::otlp::protocols::http::endpoint={host}:4318",
             "--set=service::telemetry::metrics::level=none"]
    server = Server([jaeger_binary, *args], tmp_path / "jaeger-fallback.log")
    query = f"http://127.0.0.1:{ports['extensions::jaeger_query::http::endpoint']}"
    try:
        wait_until(lambda: (server.check_running(), _listening(host, 4317)
                            and _listening(host, 4318)
                            and port_open(ports["extensions::jaeger_query::http::endpoint"]))[1],
                   bool, 90, "Jaeger at its default OTLP ports to listen")
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://{host}:4317",
                        OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_SERVICE_NAME="fallback",
                        OTEL_BSP_SCHEDULE_DELAY="100")
        result = subprocess.run([sys.executable, "-c", NO_GRPC_SCRIPT], env=env,
                                capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        said = [ln for ln in result.stderr.splitlines() if "OtelJaxWarning" in ln]
        assert len(said) == 3, said
        assert f"go by OTLP/HTTP to http://{host}:4318 instead" in said[0], said
        assert "pip install opentelemetry-exporter-otlp-proto-grpc" in said[0], said
        for signal in ("logs", "metrics"):
            assert any(f"does not accept {signal} (HTTP 404)" in w for w in said), said
        assert not any("dropped" in w or "unreachable" in w for w in said), said

        def compile_spans():
            now_us = int(time.time() * 1e6)
            body = get_json(f"{query}/api/traces?" + urllib.parse.urlencode({
                "service": "fallback", "limit": 20, "lookback": "1h",
                "start": now_us - 3600 * 10**6, "end": now_us}))
            return [s for t in body["data"] or [] for s in t["spans"]
                    if s["operationName"] == "jax.compile step"]

        wait_until(compile_spans, lambda spans: len(spans) == 2, 60,
                   "the 2 compile spans of step in Jaeger")
    finally:
        server.stop()


@pytest.fixture
def jaeger_as_shipped(jaeger_binary, tmp_path):
    jaeger = start_jaeger_as_shipped(jaeger_binary, tmp_path)
    print(f"Jaeger as shipped: {jaeger.mode}")
    try:
        yield jaeger
    finally:
        jaeger.server.stop()


def default_search(jaeger: JaegerAsShipped) -> list[dict]:
    """The Jaeger UI's default search: service train, the last hour, limit 20."""
    now_us = int(time.time() * 1e6)
    query = {"service": "train", "limit": 20, "lookback": "1h",
             "start": now_us - 3600 * 10**6, "end": now_us}
    body = get_json(f"{jaeger.query}/api/traces?" + urllib.parse.urlencode(query))
    assert not body.get("errors"), body["errors"]
    return body["data"] or []


def epochs_in(traces: list[dict]) -> dict[int, dict]:
    """The traces whose root span is the demo's ``epoch``, by epoch number."""
    out = {}
    for trace in traces:
        for span in trace["spans"]:
            if span["operationName"] == "epoch" and not [
                    r for r in span.get("references") or [] if r["refType"] == "CHILD_OF"]:
                out[tag_map(span["tags"])["epoch"][1]] = trace
    return out


@pytest.mark.hazards  # the demo says its two hazards
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_demo_to_jaeger_as_shipped_shows_the_whole_trace_tree(jaeger_as_shipped, protocol):
    # Jaeger with its defaults takes OTLP traces only: metrics and logs are refused
    # (HTTP 404, gRPC UNIMPLEMENTED). Only the endpoint and the service name are set.
    jaeger = jaeger_as_shipped
    port = jaeger.otlp_grpc if protocol == "grpc" else jaeger.otlp_http
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                    OTEL_SERVICE_NAME="train")
    if protocol == "grpc":
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
    result = subprocess.run([sys.executable, str(EXAMPLE)], cwd=ROOT, capture_output=True,
                            text=True, timeout=420, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    demo = Demo(result, [json.loads(ln) for ln in result.stderr.splitlines()
                         if ln.startswith('{"') and '"event": "jax.compile"' in ln])
    assert [c["cause_kind"] for c in demo.of("train_step")] == DEMO_TRAIN_STEP_CAUSES

    # The demo's two hazards (the learning rate, the lambda per epoch), each said once: by
    # its JSON line on stderr, to which the warning is left...
    hazards = [h for h in map(json.loads, (ln for ln in result.stderr.splitlines()
                                          if ln.startswith('{"')))
               if h["event"] == "jax.compile.hazard" and h["level"] == "warning"]
    assert sorted(h["hazard_kind"] for h in hazards) == ["function_identity", "weak_type"]
    warned = [ln for ln in result.stderr.splitlines() if "OtelJaxWarning" in ln]
    assert not [w for w in warned if "will compile again" in w], warned
    # ...and one warning per refused signal, naming it, its status and what still flows.
    said = warned
    status = "gRPC UNIMPLEMENTED" if protocol == "grpc" else "HTTP 404"
    assert len(said) == 2, said
    for signal in ("logs", "metrics"):
        assert any(f"the OTLP endpoint does not accept {signal} ({status}): {signal} off, "
                   "traces" in w for w in said), said
    assert not any("unreachable" in w or "cannot export" in w for w in said), said

    # The final state: every compile of the log stored, train_step's inside its step span
    # inside its epoch, with its phases and its cause.
    stored = wait_until(lambda: Stored.from_traces(search_jaeger(jaeger)),
                        lambda s: complete(s, demo), 120,
                        f"all {len(demo.compiles)} compile spans of the demo in Jaeger")
    train = {sid: s for sid, s in stored.compile_spans().items()
             if s["operationName"] == "jax.compile train_step"}
    by_span = {int(c["span_id"], 16): c for c in demo.of("train_step")}
    assert set(train) == set(by_span)
    for sid, span in train.items():
        step = stored.parent(span)
        assert step["operationName"] == "train_step"
        assert stored.parent(step)["operationName"] == "epoch"
        assert {c["operationName"] for c in stored.children(span)} == PHASES
        tags = tag_map(span["tags"])
        assert tags["jax.compile.cause.kind"] == ("string", by_span[sid]["cause_kind"])
        assert tags["jax.compile.cause"] == ("string", by_span[sid]["cause"])
        assert json.loads(tags["jax.compile.cause.diff"][1]) == by_span[sid]["diff"]
    # JAX's eager op compiles outside any span made no trace of their own.
    assert not [s for s in stored.spans.values()
                if tag_map(s["tags"]).get("jax.compile.eager_op") == ("bool", True)
                and stored.parent(s) is None]

    # The UI's default search (service only, limit 20) lists the epoch traces, and only them.
    found = default_search(jaeger)
    epochs = epochs_in(found)
    assert sorted(epochs) == [1, 2, 3], [t["spans"][0]["operationName"] for t in found]
    assert len(found) == 3
    first_compile = next(c for c in demo.of("train_step") if c["count"] == 1)
    assert int(epochs[1]["traceID"], 16) == int(first_compile["trace_id"], 16)
