"""Checks of the local observability stack in deploy/.

What runs here:
  * promtool 3 (built from Prometheus' Go module by scripts/ensure-tools) checks
    prometheus.yml and the rule file, runs the rule unit tests in
    deploy/prometheus/rules/otel_jax_alerts.test.yml, parses every PromQL expression of the
    Grafana dashboard, and proves that the unit tests catch a broken rule (a changed
    threshold or ``for`` duration makes ``promtool test rules`` fail);
  * structural checks of docker-compose.yml, the collector configs, the Kubernetes manifest
    and the Grafana provisioning, which need only PyYAML;
  * ``docker compose config -q`` when a Docker Compose v2 client is installed.

Where no Go toolchain exists the promtool tests are skipped with one reason line; where Go
exists and scripts/ensure-tools has not been run they fail. tests/test_pipeline.py runs the
same files in real Jaeger and Prometheus servers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
COLLECTOR_CONFIG = DEPLOY / "otel-collector" / "config.yaml"
COLLECTOR_K8S_CONFIG = DEPLOY / "otel-collector" / "config.k8s.yaml"
K8S_MANIFEST = DEPLOY / "k8s" / "otel-collector.yaml"
K8S_VICTORIALOGS = DEPLOY / "k8s" / "victorialogs.yaml"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES_DIR = DEPLOY / "prometheus" / "rules"
RULES_FILE = RULES_DIR / "otel_jax_alerts.yml"
RULES_TEST_FILE = RULES_DIR / "otel_jax_alerts.test.yml"
GRAFANA = DEPLOY / "grafana"
DATASOURCES_FILE = GRAFANA / "provisioning" / "datasources" / "datasources.yml"
DASHBOARD_PROVIDERS_FILE = GRAFANA / "provisioning" / "dashboards" / "dashboards.yml"
DASHBOARD_FILE = GRAFANA / "dashboards" / "otel_jax.json"
README = DEPLOY / "README.md"

# The Prometheus names of the otel_jax instruments, as exported by the collector's
# prometheus exporter. Dashboards and rules may use nothing else (recording rules aside).
METRICS = {
    "jax_compilations_total",
    "jax_compile_duration_seconds_bucket",
    "jax_compile_duration_seconds_sum",
    "jax_compile_duration_seconds_count",
    "jax_compilations_after_warmup_total",
    "jax_persistent_cache_requests_total",
    "jax_persistent_cache_hits_total",
    "jax_persistent_cache_misses_total",
    "jax_step_duration_seconds_bucket",
    "jax_step_duration_seconds_count",
    "jax_compile_divergences_total",  # multi-process jobs
}
LABELS = {
    "job",
    "instance",
    "le",
    "code_function_name",
    "jax_compile_cause_kind",
    "jax_compile_is_recompile",
    "jax_compile_eager_op",  # only on JAX's own op-by-op compiles
    "jax_step_name",
    "jax_step_compiled",
    "jax_compile_divergence_kind",  # multi-process jobs
}
CAUSE_KINDS = {
    "first_compile",
    "shape",
    "dtype",
    "weak_type",
    "pytree_structure",
    "static_argument",
    "function_identity",
    "tracing_context",
    "sharding",
    "device_placement",
    "jit_options",
    "unknown",
}
ALERTS = {
    "JaxRecompilationStorm": "5m",
    "JaxCompileTimeHighShareOfWallTime": "10m",
    "JaxRecompileAfterWarmup": "0m",
}
SERVICES = {"otel-collector", "jaeger", "prometheus", "grafana", "victorialogs"}
#: The Grafana plugin of the VictoriaLogs data source (its type in provisioning files).
VICTORIALOGS_PLUGIN = "victoriametrics-logs-datasource"
#: Where the collector sends the log records: VictoriaLogs' OTLP/HTTP logs path.
VICTORIALOGS_LOGS_ENDPOINT = "http://victorialogs:9428/insert/opentelemetry/v1/logs"


# --------------------------------------------------------------------------- helpers


def load_yaml(path: Path):
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def rule_groups() -> list[dict]:
    return load_yaml(RULES_FILE)["groups"]


def alert_rules() -> dict[str, dict]:
    return {r["alert"]: r for g in rule_groups() for r in g["rules"] if "alert" in r}


def recording_rules() -> dict[str, dict]:
    return {r["record"]: r for g in rule_groups() for r in g["rules"] if "record" in r}


def compose() -> dict:
    return load_yaml(COMPOSE_FILE)


def dashboard() -> dict:
    with DASHBOARD_FILE.open(encoding="utf-8") as f:
        return json.load(f)


def all_panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


_PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "inf", "nan", "atan2",
}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (a lexical approximation that is exact
    for the expressions used in deploy/: no metric name appears inside a string)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", s):
        word = m.group(0)
        if word.lower() in _PROMQL_KEYWORDS:
            continue
        if re.match(r"\s*\(", s[m.end():]):  # function or aggregation
            continue
        names.add(word)
    return names


def grafana_to_promql(expr: str) -> str:
    """Replace Grafana's variables so the expression can be parsed by Prometheus."""
    values = {
        "__rate_interval": "1m",
        "__interval": "1m",
        "__range": "1h",
        "job": "train",
        "instance": ".*",
        "function": ".*",
    }
    out = re.sub(
        r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), expr
    )
    assert "$" not in out, f"unknown Grafana variable in {expr!r}"
    return out


def label_values_selector(query: str) -> str:
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
    assert m, f"unexpected variable query {query!r}"
    return m.group(1)


def dashboard_prometheus_exprs() -> list[tuple[str, str]]:
    """(where, PromQL) for every Prometheus query of the dashboard, variables included."""
    exprs = []
    dash = dashboard()
    for panel in all_panels(dash["panels"]):
        for target in panel.get("targets", []):
            ds = target.get("datasource") or panel.get("datasource") or {}
            if ds.get("type") == "prometheus":
                exprs.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dash["templating"]["list"]:
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            exprs.append((f"variable {var['name']}", label_values_selector(query)))
    return exprs


def annotation_queries(rule: dict) -> list[str]:
    """PromQL run by the `query` template function inside an alert's annotations."""
    queries = []
    for text in rule.get("annotations", {}).values():
        for q in re.findall(r"printf\s+`([^`]*)`", text):
            queries.append(q.replace("%q", '"x"'))
    return queries


@pytest.fixture(scope="module")
def promtool(promtool_binary) -> str:
    """promtool 3 (Prometheus 3.x), the major version of the compose image."""
    return promtool_binary


def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def output(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


# ------------------------------------------------------------------------- promtool


def test_promtool_check_config(promtool):
    # rule_files are relative to prometheus.yml, so the same file works in the container
    # (/etc/prometheus/prometheus.yml + /etc/prometheus/rules) and here.
    proc = run([promtool, "check", "config", str(PROMETHEUS_CONFIG)])
    assert proc.returncode == 0, output(proc)
    assert "SUCCESS" in output(proc)
    assert "2 rule files found" in output(proc), output(proc)  # + otel_jax_multiprocess.yml


def test_promtool_check_rules(promtool):
    proc = run([promtool, "check", "rules", str(RULES_FILE)])
    assert proc.returncode == 0, output(proc)
    n = len(alert_rules()) + len(recording_rules())
    assert f"SUCCESS: {n} rules found" in output(proc), output(proc)


def test_promtool_test_rules(promtool):
    proc = run([promtool, "test", "rules", str(RULES_TEST_FILE)])
    assert proc.returncode == 0, output(proc)
    assert "SUCCESS" in output(proc)
    assert "FAILED" not in output(proc)


# Each change breaks the behaviour of one alert; the unit tests must notice every one.
RULE_MUTATIONS = {
    "storm threshold raised": ("* 60 > 6", "* 60 > 20"),
    "storm threshold lowered": ("* 60 > 6", "* 60 > 4"),
    "storm counts first compiles": (
        'rate(jax_compilations_total{jax_compile_is_recompile="true", '
        'jax_compile_eager_op!="true"}[5m])\n          ) * 60',
        'rate(jax_compilations_total{jax_compile_eager_op!="true"}[5m])\n          ) * 60',
    ),
    "storm counts eager ops": (
        ', jax_compile_eager_op!="true"}[5m])\n          ) * 60',
        '}[5m])\n          ) * 60',
    ),
    "storm for shortened": ("for: 5m", "for: 1m"),
    "compile share threshold raised": (
        "rate(jax_compile_duration_seconds_sum[10m])) > 0.25",
        "rate(jax_compile_duration_seconds_sum[10m])) > 0.5",
    ),
    "compile share threshold lowered": (
        "rate(jax_compile_duration_seconds_sum[10m])) > 0.25",
        "rate(jax_compile_duration_seconds_sum[10m])) > 0.15",
    ),
    "compile share for shortened": ("for: 10m", "for: 5m"),
    "after-warmup misses new series": (
        "last_over_time(jax_compilations_after_warmup_total[1d] offset 10m)",
        "last_over_time(jax_compilations_after_warmup_total[1d])",
    ),
    "after-warmup misses increments": (
        '[10m])\n            ) > 0',
        '[10m]) * 0\n            ) > 0',
    ),
    "after-warmup takes a scrape gap for a new series": (
        "last_over_time(jax_compilations_after_warmup_total[1d] offset 10m)",
        "jax_compilations_after_warmup_total offset 10m",
    ),
    "after-warmup counts first compilations": (
        'jax_compilations_after_warmup_total{jax_compile_cause_kind!="first_compile"}\n',
        "jax_compilations_after_warmup_total\n",
    ),
    "recompilation rate counts eager ops": (
        'rate(jax_compilations_total{jax_compile_is_recompile="true", jax_compile_eager_op!="true"}[5m])\n          )\n',
        'rate(jax_compilations_total{jax_compile_is_recompile="true"}[5m])\n          )\n',
    ),
}


@pytest.mark.parametrize("mutation", sorted(RULE_MUTATIONS))
def test_promtool_unit_tests_catch_a_broken_rule(promtool, tmp_path, mutation):
    before, after = RULE_MUTATIONS[mutation]
    rules = RULES_FILE.read_text(encoding="utf-8")
    assert before in rules, f"mutation {mutation!r} no longer applies: {before!r} not found"
    (tmp_path / RULES_FILE.name).write_text(rules.replace(before, after, 1), encoding="utf-8")
    shutil.copy(RULES_TEST_FILE, tmp_path / RULES_TEST_FILE.name)
    proc = run([promtool, "test", "rules", RULES_TEST_FILE.name], cwd=tmp_path)
    assert proc.returncode != 0, f"rule unit tests pass with {mutation!r}:\n{output(proc)}"
    assert "FAILED" in output(proc)


def test_dashboard_and_annotation_queries_parse_with_promtool(promtool, tmp_path):
    """Every PromQL of the dashboard, of the Jaeger trace-to-metrics links and of the alert
    annotation templates is parsed by Prometheus' own parser (as recording rules)."""
    exprs = [grafana_to_promql(e) for _, e in dashboard_prometheus_exprs()]
    for rule in alert_rules().values():
        exprs.extend(annotation_queries(rule))
    for ds in load_yaml(DATASOURCES_FILE)["datasources"]:
        for q in ds.get("jsonData", {}).get("tracesToMetrics", {}).get("queries", []):
            exprs.append(trace_to_metrics_promql(q["query"]))
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"check:expr_{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    proc = run([promtool, "check", "rules", str(path)])
    assert proc.returncode == 0, output(proc)
    assert f"SUCCESS: {len(exprs)} rules found" in output(proc)


def test_promtool_is_version_3(promtool):
    """Module versions v0.3xx.y of github.com/prometheus/prometheus are Prometheus 3.xx.y
    (`go install` leaves `promtool --version` blank, the module version is in the binary)."""
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain to read the binary's module version")
    proc = run(["go", "version", "-m", promtool])
    assert proc.returncode == 0, output(proc)
    assert re.search(r"^\s*mod\s+github\.com/prometheus/prometheus\s+v0\.3\d\d\.\d+\s",
                     proc.stdout, re.M), output(proc)


def test_servers_are_built_where_go_exists():
    """With a Go toolchain, `make test` builds the servers first: their tests must run."""
    from conftest import tool_path

    if shutil.which("go") is None:
        pytest.skip("no Go toolchain here")
    missing = [str(tool_path(n)) for n in ("jaeger", "prometheus", "promtool", "victoria-logs")
               if not os.access(tool_path(n), os.X_OK)]
    assert not missing, f"run scripts/ensure-tools: {missing}"


# ------------------------------------------------------------------ rules (structure)


def test_alerts_exist_with_severity_threshold_and_texts():
    alerts = alert_rules()
    assert set(ALERTS) <= set(alerts)
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        for key in ("summary", "description", "threshold"):
            assert rule["annotations"].get(key), f"{name} lacks annotation {key}"
        # Each summary names the function (from a label or a query of the top one).
        assert "code_function_name" in rule["annotations"]["summary"], name
    for name, duration in ALERTS.items():
        assert alerts[name].get("for", "0m") == duration, name


def test_alert_expressions_follow_the_contract():
    alerts = alert_rules()
    storm = alerts["JaxRecompilationStorm"]["expr"]
    assert 'jax_compile_is_recompile="true"' in storm
    assert re.search(r"by \(job, instance, code_function_name\)", storm)
    share = alerts["JaxCompileTimeHighShareOfWallTime"]["expr"]
    assert re.search(r"sum by \(job, instance\) \(rate\(jax_compile_duration_seconds_sum\[10m\]\)\) > 0\.25", share)
    warm = alerts["JaxRecompileAfterWarmup"]["expr"]
    assert ('increase(jax_compilations_after_warmup_total{jax_compile_cause_kind!="first_compile"}[10m])'
            in warm)


def test_rules_use_only_known_metrics_and_labels():
    records = set(recording_rules())
    for rule in rule_groups():
        for r in rule["rules"]:
            name = r.get("alert") or r.get("record")
            exprs = [r["expr"], *annotation_queries(r)]
            for expr in exprs:
                names = promql_metric_names(expr)
                assert names, f"{name}: no metric in {expr!r}"
                assert names <= METRICS | records, f"{name}: unknown metric {names - METRICS}"
                for label in re.findall(r"(\w+)\s*(?:=~|!=|!~|=)\s*\"", expr):
                    assert label in LABELS, f"{name}: unknown label {label}"
    for record in records:
        assert re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", record), record


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    tests = load_yaml(RULES_TEST_FILE)
    assert tests["rule_files"] == [RULES_FILE.name]
    fires: dict[str, int] = {}
    quiet: dict[str, int] = {}
    for group in tests["tests"]:
        for case in group.get("alert_rule_test", []):
            name = case["alertname"]
            if case["exp_alerts"]:
                fires[name] = fires.get(name, 0) + 1
                for alert in case["exp_alerts"]:
                    assert alert["exp_labels"]["severity"], name
                    assert {"summary", "description"} <= set(alert["exp_annotations"]), name
            else:
                quiet[name] = quiet.get(name, 0) + 1
    for name in alert_rules():
        assert fires.get(name), f"no unit test where {name} fires"
        assert quiet.get(name), f"no unit test where {name} stays quiet"
    tested_records = {
        e["expr"] for g in tests["tests"] for e in g.get("promql_expr_test", [])
    }
    assert tested_records, "recording rules are not tested"
    assert tested_records <= set(recording_rules())


def test_unit_test_series_use_the_contract_labels():
    tests = load_yaml(RULES_TEST_FILE)
    for group in tests["tests"]:
        for series in group["input_series"]:
            name = series["series"].split("{", 1)[0]
            assert name in METRICS, name
            labels = dict(re.findall(r'(\w+)="([^"]*)"', series["series"]))
            assert set(labels) <= LABELS, labels
            if "jax_compile_cause_kind" in labels:
                assert labels["jax_compile_cause_kind"] in CAUSE_KINDS
            if "jax_compile_is_recompile" in labels:
                assert labels["jax_compile_is_recompile"] in {"true", "false"}
            if "jax_compile_eager_op" in labels:
                assert labels["jax_compile_eager_op"] == "true"


# --------------------------------------------------------------------- prometheus.yml


def test_prometheus_scrapes_the_collector_exporter():
    config = load_yaml(PROMETHEUS_CONFIG)
    assert config["global"]["evaluation_interval"] == "15s"
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    collector = jobs["otel-collector"]
    # job/instance must come from the exporter (service.name), not from the scrape target.
    assert collector["honor_labels"] is True
    targets = [t for sc in collector["static_configs"] for t in sc["targets"]]
    assert targets == ["otel-collector:8889"]
    exporter = load_yaml(COLLECTOR_CONFIG)["exporters"]["prometheus"]
    assert exporter["endpoint"].endswith(":8889")


def test_rule_files_resolve_on_disk_and_in_the_container():
    config = load_yaml(PROMETHEUS_CONFIG)
    prometheus = compose()["services"]["prometheus"]
    mounts = {}
    for volume in prometheus["volumes"]:
        parts = volume.split(":")
        if parts[0].startswith("."):
            mounts[PurePosixPath(parts[1])] = (COMPOSE_FILE.parent / parts[0]).resolve()
    config_flag = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    container_config = PurePosixPath(config_flag.split("=", 1)[1])
    assert mounts[container_config] == PROMETHEUS_CONFIG.resolve()
    assert config["rule_files"], "no rule files"
    for rule_file in config["rule_files"]:
        assert not rule_file.startswith("/"), "rule_files must be relative to prometheus.yml"
        on_disk = (PROMETHEUS_CONFIG.parent / rule_file).resolve()
        assert on_disk.parent == RULES_DIR.resolve() and on_disk.exists()
        in_container = container_config.parent / rule_file
        mount = next(m for m in mounts if m in in_container.parents)
        assert mounts[mount] / in_container.relative_to(mount) == on_disk


# --------------------------------------------------------------------- docker compose


def published_ports(service: dict) -> set[int]:
    ports = set()
    for spec in service.get("ports", []):
        spec = str(spec).split("/")[0]
        host_and_container = spec.rsplit(":", 2)
        ports.add(int(host_and_container[-2]) if len(host_and_container) > 1 else int(spec))
    return ports


def test_the_log_store_the_tests_build_and_the_image_are_one_release_named_on_the_page():
    # The tests run VictoriaLogs built from scripts/tools.versions; the compose file pins the
    # newest image tag shown to exist. Both in one minor release, and the page says both.
    image = compose()["services"]["victorialogs"]["image"].split(":v")[1]
    versions = dict(line.split("=", 1) for line in
                    (REPO / "scripts" / "tools.versions").read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    built = versions["VICTORIALOGS_VERSION"].lstrip("v")
    assert image.split(".")[:2] == built.split(".")[:2], (image, built)
    text = README.read_text(encoding="utf-8")
    assert f"victoria-logs:v{image}" in text and f"VictoriaLogs v{built}" in text
    if image != built:
        assert f"stays at v{image}" in text


def test_compose_services_images_and_ports():
    services = compose()["services"]
    assert SERVICES <= set(services)
    images = {name: services[name]["image"] for name in SERVICES}
    assert images["otel-collector"].startswith("otel/opentelemetry-collector-contrib:0.")
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", images["jaeger"])
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", images["prometheus"])
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", images["grafana"])
    assert re.fullmatch(r"victoriametrics/victoria-logs:v1\.\d+\.\d+", images["victorialogs"])
    for name, image in images.items():
        assert not image.endswith(":latest"), f"{name} image is not pinned"
    assert {4317, 4318} <= published_ports(services["otel-collector"])
    assert 16686 in published_ports(services["jaeger"])
    assert 9090 in published_ports(services["prometheus"])
    assert 3000 in published_ports(services["grafana"])
    assert 9428 in published_ports(services["victorialogs"])
    # Only the collector receives OTLP from the host: no clash on 4317/4318.
    for name in SERVICES - {"otel-collector"}:
        assert not {4317, 4318} & published_ports(services[name]), name


def test_compose_bind_mounts_exist():
    services = compose()["services"]
    count = 0
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                count += 1
                assert (COMPOSE_FILE.parent / source).exists(), f"{name}: {source} missing"
    assert count >= 6


def test_compose_wires_the_configs_where_the_services_read_them():
    services = compose()["services"]
    collector = services["otel-collector"]
    flag = next(a for a in collector["command"] if a.startswith("--config="))
    target = flag.split("=", 1)[1]
    assert f"./otel-collector/config.yaml:{target}:ro" in collector["volumes"]

    grafana = services["grafana"]
    env = dict(e.split("=", 1) for e in grafana["environment"])
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Admin"
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    assert mounts["/etc/grafana/provisioning/datasources"] == "./grafana/provisioning/datasources"
    assert mounts["/etc/grafana/provisioning/dashboards"] == "./grafana/provisioning/dashboards"
    provider = load_yaml(DASHBOARD_PROVIDERS_FILE)["providers"][0]
    assert mounts[provider["options"]["path"]] == "./grafana/dashboards"
    # The VictoriaLogs data source's plugin, pinned, installed before Grafana provisions.
    plugin, version = env["GF_PLUGINS_PREINSTALL_SYNC"].split("@")
    assert plugin == VICTORIALOGS_PLUGIN and re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert "GF_INSTALL_PLUGINS" not in env  # deprecated since Grafana 12
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert PurePosixPath(home).parent == PurePosixPath(provider["options"]["path"])
    assert (GRAFANA / "dashboards" / PurePosixPath(home).name).is_file()


def docker_compose_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return run(["docker", "compose", "version"]).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(
    not docker_compose_available(),
    reason="`docker compose version` does not work here (no Docker Compose v2 client)",
)
def test_docker_compose_config_is_valid():
    proc = run(["docker", "compose", "-f", str(COMPOSE_FILE), "config", "-q"])
    assert proc.returncode == 0, output(proc)


# ------------------------------------------------------------------ collector configs


def check_pipelines(config: dict, where: str) -> None:
    for ext in config["service"].get("extensions", []):
        assert ext in (config.get("extensions") or {}), f"{where}: extension {ext} undefined"
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics", "logs"}, where
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in (config.get(kind) or {}), (
                    f"{where}: {name} pipeline uses undefined {kind[:-1]} {component}"
                )
        assert pipeline["receivers"] == ["otlp"], where
        assert pipeline["processors"][0] == "memory_limiter", where
        assert "batch" in pipeline["processors"], where


def test_collector_config_pipelines():
    config = load_yaml(COLLECTOR_CONFIG)
    check_pipelines(config, COLLECTOR_CONFIG.name)
    pipelines = config["service"]["pipelines"]
    assert pipelines["traces"]["exporters"] == ["otlp_grpc/jaeger"]
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    assert pipelines["logs"]["exporters"] == ["otlp_http/victorialogs"]
    logs = config["exporters"]["otlp_http/victorialogs"]
    # logs_endpoint, used as written (`endpoint` would get /v1/logs appended)
    assert logs["logs_endpoint"] == VICTORIALOGS_LOGS_ENDPOINT and "endpoint" not in logs
    # The stream of a line: its job and its event; other resource attributes are fields.
    assert logs["headers"]["VL-Stream-Fields"] == "service.name,event_name"
    service = compose()["services"]["victorialogs"]
    assert VICTORIALOGS_LOGS_ENDPOINT.startswith("http://victorialogs:9428/")
    assert 9428 in published_ports(service)
    jaeger = config["exporters"]["otlp_grpc/jaeger"]
    assert jaeger["endpoint"] == "jaeger:4317"
    assert jaeger["tls"]["insecure"] is True
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    assert config["exporters"]["prometheus"]["endpoint"] == "0.0.0.0:8889"


ENV_REF = re.compile(r"\$\{env:([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}")


def expand_env_defaults(text: str) -> str:
    def repl(m: re.Match) -> str:
        assert m.group(2) is not None, f"${{env:{m.group(1)}}} has no default"
        return m.group(2)

    return ENV_REF.sub(repl, text)


def test_k8s_collector_config_matches_and_is_env_driven():
    text = COLLECTOR_K8S_CONFIG.read_text(encoding="utf-8")
    refs = ENV_REF.findall(text)
    names = {name for name, _ in refs}
    assert {"JAEGER_OTLP_ENDPOINT", "PROMETHEUS_EXPORTER_PORT"} <= names
    k8s = load_yaml(COLLECTOR_K8S_CONFIG)
    check_pipelines(k8s, COLLECTOR_K8S_CONFIG.name)
    local = load_yaml(COLLECTOR_CONFIG)
    assert k8s["service"] == local["service"]
    for kind in ("extensions", "receivers", "processors", "exporters"):
        assert set(k8s[kind]) == set(local[kind]), kind
    # With every variable at its default the config is a complete, typed collector config.
    expanded = yaml.safe_load(expand_env_defaults(text))
    assert "${" not in json.dumps(expanded)
    assert expanded["exporters"]["otlp_grpc/jaeger"]["tls"]["insecure"] is True
    assert expanded["exporters"]["prometheus"]["endpoint"] == "0.0.0.0:8889"
    assert expanded["receivers"]["otlp"]["protocols"]["http"]["endpoint"] == "0.0.0.0:4318"
    logs = expanded["exporters"]["otlp_http/victorialogs"]
    assert logs["logs_endpoint"] == VICTORIALOGS_LOGS_ENDPOINT
    assert logs["headers"] == load_yaml(COLLECTOR_CONFIG)["exporters"]["otlp_http/victorialogs"][
        "headers"]


def test_k8s_manifest_embeds_the_k8s_config():
    docs = [d for d in yaml.safe_load_all(K8S_MANIFEST.read_text(encoding="utf-8")) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"ConfigMap", "Deployment", "Service"}
    configmap = by_kind["ConfigMap"]
    assert configmap["data"]["config.yaml"] == COLLECTOR_K8S_CONFIG.read_text(encoding="utf-8")
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == compose()["services"]["otel-collector"]["image"]
    volume = next(v for v in pod["volumes"] if v.get("configMap"))
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert f"--config={mount['mountPath']}/config.yaml" in container["args"]
    ports = {p["port"] for p in by_kind["Service"]["spec"]["ports"]}
    assert {4317, 4318, 8889} <= ports
    selector = by_kind["Service"]["spec"]["selector"]
    assert selector.items() <= by_kind["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["VICTORIALOGS_LOGS_ENDPOINT"] == VICTORIALOGS_LOGS_ENDPOINT


def test_k8s_victorialogs_manifest_serves_what_the_collector_sends_to():
    docs = [d for d in yaml.safe_load_all(K8S_VICTORIALOGS.read_text(encoding="utf-8")) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"PersistentVolumeClaim", "Deployment", "Service"}
    deployment = by_kind["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"  # one writer of the volume
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == compose()["services"]["victorialogs"]["image"]
    data = next(a.split("=", 1)[1] for a in container["args"]
                if a.startswith("-storageDataPath="))
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == data)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    claim = by_kind["PersistentVolumeClaim"]["metadata"]["name"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim
    # The collector's default endpoint names this Service and its port.
    service = by_kind["Service"]
    assert service["metadata"]["name"] == "victorialogs"
    assert [p["port"] for p in service["spec"]["ports"]] == [9428]
    assert service["spec"]["selector"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"


# ---------------------------------------------------------------------------- grafana


def provisioned_datasources() -> dict[str, dict]:
    return {ds["uid"]: ds for ds in load_yaml(DATASOURCES_FILE)["datasources"]}


def test_grafana_datasources():
    ds = provisioned_datasources()
    assert ds["prometheus"]["type"] == "prometheus"
    assert ds["prometheus"]["url"] == "http://prometheus:9090"
    assert ds["jaeger"]["type"] == "jaeger"
    assert ds["jaeger"]["url"] == "http://jaeger:16686"
    exemplars = ds["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert [(e["name"], e["datasourceUid"]) for e in exemplars] == [("trace_id", "jaeger")]
    t2m = ds["jaeger"]["jsonData"]["tracesToMetrics"]
    assert t2m["datasourceUid"] == "prometheus"
    assert t2m["queries"]
    for q in t2m["queries"]:
        # `$$` is Grafana's escape for a literal `$` in provisioning files: a bare
        # `$__tags` would be expanded (to nothing) as an environment variable.
        assert "{$$__tags}" in q["query"]
        assert promql_metric_names(trace_to_metrics_promql(q["query"])) <= METRICS


def test_grafana_victorialogs_datasource_links_each_line_to_its_trace():
    ds = provisioned_datasources()
    logs = ds["victorialogs"]
    assert logs["type"] == VICTORIALOGS_PLUGIN
    compose_services = compose()["services"]
    assert logs["url"] == "http://victorialogs:9428" and "victorialogs" in compose_services
    # A line's trace_id field (the compile span's trace) opens that trace in the Jaeger
    # data source, by uid; `$$` keeps Grafana from expanding ${__value.raw} at provisioning.
    [derived] = logs["jsonData"]["derivedFields"]
    assert derived["matcherType"] == "label" and derived["matcherRegex"] == "trace_id"
    assert derived["url"] == "$${__value.raw}"
    assert ds[derived["datasourceUid"]]["type"] == "jaeger"
    # And back: a span's "logs for this span" runs a LogsQL query on VictoriaLogs.
    to_logs = ds["jaeger"]["jsonData"]["tracesToLogsV2"]
    assert ds[to_logs["datasourceUid"]]["type"] == VICTORIALOGS_PLUGIN
    assert to_logs["customQuery"] is True
    assert to_logs["query"] == 'trace_id:="$${__trace.traceId}"'
    # ...narrowed to the span's own time: a step span's compiles, not its epoch's trace
    # (the whole trace, minutes wide, is what a shift of minutes would give); the end by
    # 1 ms past the span, as a compile's lines are stamped at its span's end
    assert grafana_ms(to_logs.get("spanStartTimeShift", "0")) == 0
    assert grafana_ms(to_logs["spanEndTimeShift"]) == 1


def grafana_ms(shift: str) -> int:
    """A time shift as Grafana reads it (``rangeutil.intervalToMs``): ``-5m``, ``1ms``."""
    m = re.fullmatch(r"(-?\d+)(ms|s|m|h|d)?", str(shift).strip())
    assert m, shift
    return int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000,
                              "d": 86_400_000, None: 1000}[m.group(2)]


def trace_to_metrics_promql(query: str) -> str:
    """A tracesToMetrics query as Prometheus receives it for a span of job `train`."""
    return query.replace("$$", "$").replace("$__tags", 'job="train"')


def datasource_variables(dash: dict) -> dict[str, dict]:
    """The dashboard's data source variables, by name."""
    return {v["name"]: v for v in dash["templating"]["list"] if v["type"] == "datasource"}


def datasource_refs(node, where: str = "dashboard"):
    """(where, reference) for every data source the dashboard names: each `datasource`
    object and each `datasourceUid` string, at any depth (panels, targets, variables,
    links)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource" and isinstance(value, dict):
                yield where, value
            elif key == "datasourceUid":
                yield where, {"uid": value}
            yield from datasource_refs(value, node.get("title") or node.get("name") or where)
    elif isinstance(node, list):
        for item in node:
            yield from datasource_refs(item, where)


def resolve_datasource(dash: dict, ref: dict) -> dict:
    """The provisioned data source a reference selects with the variables' defaults: the
    reference must be `${<variable>}` of a data source variable of the same type."""
    m = re.fullmatch(r"\$\{(\w+)\}", ref["uid"])
    assert m, f"fixed data source uid {ref['uid']!r}: use a data source variable"
    variable = datasource_variables(dash)[m.group(1)]
    if "type" in ref:
        assert ref["type"] == variable["query"], (ref, variable["name"])
    return provisioned_datasources()[variable["current"]["value"]]


def test_dashboard_selects_its_datasources_through_variables():
    """As dashboards shared on grafana.com do: whoever imports it picks a Prometheus and a
    Jaeger data source, and the defaults are the ones deploy/ provisions."""
    dash = dashboard()
    variables = datasource_variables(dash)
    assert {n: v["query"] for n, v in variables.items()} == {
        "prometheus": "prometheus", "jaeger": "jaeger", "victorialogs": VICTORIALOGS_PLUGIN}
    provisioned = provisioned_datasources()
    for name, variable in variables.items():
        assert not variable.get("multi") and not variable.get("includeAll"), name
        default = provisioned[variable["current"]["value"]]
        assert default["type"] == variable["query"], name
        assert variable["current"]["text"] == default["name"], name
    refs = list(datasource_refs(dash))
    used = set()
    for where, ref in refs:
        if ref.get("type") == "grafana":  # the built-in annotations, in every Grafana
            continue
        used.add(resolve_datasource(dash, ref)["uid"])
    assert used == set(provisioned), "every provisioned data source is used"
    # No host in the dashboard: links go through Grafana, to the selected data sources.
    text = DASHBOARD_FILE.read_text(encoding="utf-8")
    assert not re.search(r"https?://|localhost|:16686|:9090", text)


def test_dashboard_is_valid_and_uses_provisioned_datasources():
    dash = dashboard()
    assert dash["uid"] and dash["title"]
    panels = list(all_panels(dash["panels"]))
    assert len(panels) >= 8
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are not unique"
    for panel in panels:
        if panel["type"] in {"row", "text"}:
            continue
        source = resolve_datasource(dash, panel["datasource"])
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert resolve_datasource(dash, target.get("datasource", panel["datasource"])) \
                == source, panel["title"]
    for var in dash["templating"]["list"]:
        if var["type"] != "datasource":
            assert resolve_datasource(dash, var["datasource"])["type"] == "prometheus", \
                var["name"]


def test_dashboard_panels_do_not_overlap():
    boxes = []
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, panel["title"]
        for other_title, o in boxes:
            overlap = (
                g["x"] < o["x"] + o["w"] and o["x"] < g["x"] + g["w"]
                and g["y"] < o["y"] + o["h"] and o["y"] < g["y"] + g["h"]
            )
            assert not overlap, f"{panel['title']!r} overlaps {other_title!r}"
        boxes.append((panel["title"], g))


def test_dashboard_queries_use_only_contract_metrics():
    exprs = dashboard_prometheus_exprs()
    assert len(exprs) >= 10
    seen = set()
    for where, expr in exprs:
        names = promql_metric_names(grafana_to_promql(expr))
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= METRICS, f"{where}: unknown metric(s) {sorted(names - METRICS)}"
        for label in re.findall(r"(\w+)\s*(?:=~|!=|!~|=)\s*\"", expr):
            assert label in LABELS, f"{where}: unknown label {label}"
        seen |= names
    # Every instrument shows up somewhere on the dashboard.
    assert METRICS - {"jax_compile_duration_seconds_count"} <= seen, sorted(METRICS - seen)


def test_dashboard_has_the_expected_views():
    dash = dashboard()
    exprs = [e for _, e in dashboard_prometheus_exprs()]
    joined = "\n".join(exprs)
    for q in ("0.5", "0.95"):
        assert re.search(
            rf"histogram_quantile\({q}, sum by \(le[^)]*\) \(rate\(jax_compile_duration_seconds_bucket",
            joined,
        ), f"no p{q} compile-duration panel"
    assert re.search(r"topk\(\d+, sum by \([^)]*code_function_name[^)]*\) \(increase\(jax_compilations_total\{[^}]*jax_compile_is_recompile=\"true\"", joined)
    assert "rate(jax_compile_duration_seconds_sum" in joined
    assert re.search(r"jax_persistent_cache_hits_total.*\) / sum\(.*jax_persistent_cache_requests_total", joined)
    panels = {p["title"]: p for p in all_panels(dash["panels"])}
    per_minute = [
        p for p in panels.values()
        if any("by (job, code_function_name, jax_compile_cause_kind)" in t.get("expr", "")
               and "* 60" in t.get("expr", "") for t in p.get("targets", []))
    ]
    assert len(per_minute) == 2, "compilations and recompilations per minute panels"
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"job", "function"} <= variables
    for where, expr in dashboard_prometheus_exprs():
        if where.startswith("panel"):
            assert 'job="$job"' in expr, f"{where} ignores the job variable"


def explore_link_state(url: str) -> dict:
    """The Explore state of a relative `/explore?left=<JSON>` link, Grafana's variables left
    in place (Grafana substitutes them, URI-encoded, when it builds the link)."""
    assert url.startswith("/explore?left="), url
    return json.loads(unquote(url.removeprefix("/explore?left=")))


def test_recompilation_panels_link_to_jaeger_traces():
    dash = dashboard()
    linked = 0
    for panel in all_panels(dash["panels"]):
        exprs = " ".join(t.get("expr", "") for t in panel.get("targets", []))
        if 'jax_compile_is_recompile="true"' not in exprs or panel["type"] == "stat":
            continue
        if panel["type"] == "table":
            continue
        links = panel["fieldConfig"]["defaults"].get("links", [])
        # A URL link, not an `internal` one: Grafana interpolates the variables of a link's
        # URL but not an internal link's datasourceUid, so only this form follows ${jaeger}.
        assert links and not any(l.get("internal") for l in links), panel["title"]
        for link in links:
            state = explore_link_state(link["url"])
            assert state["datasource"] == "${jaeger}"
            assert state["range"] == {"from": "${__from}", "to": "${__to}"}
            [query] = state["queries"]
            assert resolve_datasource(dash, query["datasource"])["type"] == "jaeger"
            assert query["queryType"] == "search"
            assert query["operation"] == "jax.compile ${__field.labels.code_function_name}"
            assert query["service"] == "${__field.labels.job}"
            assert query["tags"] == "jax.compile.is_recompile=true"
        # The labels used by the link are kept by the panel's aggregation.
        for target in panel["targets"]:
            assert re.search(r"by \((?=[^)]*\bjob\b)(?=[^)]*\bcode_function_name\b)[^)]*\)", target["expr"])
        linked += 1
    assert linked >= 2
    jaeger_panels = [
        p for p in all_panels(dash["panels"]) if p["datasource"]["type"] == "jaeger"
    ]
    assert jaeger_panels, "no panel lists traces from Jaeger"
    for p in jaeger_panels:
        assert resolve_datasource(dash, p["datasource"])["type"] == "jaeger"
        for target in p["targets"]:
            assert target["queryType"] == "search" and target["service"] == "$job"


def test_logs_panel_shows_the_compile_and_hazard_lines_of_the_selected_functions():
    """The panel's LogsQL selects the lines of the job and functions picked at the top (the
    VictoriaLogs data source turns `in($function)` into the picked values, `in(*)` for All),
    by the records' event name and function attribute. tests/test_pipeline.py runs it."""
    from otel_jax._core._vocab import EVENT_COMPILE, EVENT_HAZARD, Attr

    dash = dashboard()
    [panel] = [p for p in all_panels(dash["panels"])
               if p["datasource"].get("type") == VICTORIALOGS_PLUGIN]
    assert panel["type"] == "logs"
    assert resolve_datasource(dash, panel["datasource"])["uid"] == "victorialogs"
    [target] = panel["targets"]
    assert target["datasource"] == panel["datasource"]
    assert target["queryType"] == "instant"  # raw lines: /select/logsql/query
    # JAX's eager op compiles left out: "All" (``in(*)``) would otherwise show mostly
    # them, whenever they are sent (``OTEL_JAX_LOG_LEVEL=debug``).
    assert target["expr"] == (f'{{service.name="$job"}} '
                              f'event_name:in("{EVENT_COMPILE}", "{EVENT_HAZARD}") '
                              f'"{Attr.FUNCTION}":in($function) -"{Attr.EAGER_OP}":true')
    # The stream filter names the collector's stream fields only.
    stream = load_yaml(COLLECTOR_CONFIG)["exporters"]["otlp_http/victorialogs"]["headers"]
    assert "service.name" in stream["VL-Stream-Fields"].split(",")
    assert panel["options"]["enableLogDetails"] is True  # where the trace_id link is


def test_promql_metric_name_extraction():
    assert promql_metric_names(
        'topk(10, sum by (job, code_function_name) (increase(jax_compilations_total{job="$job", '
        'jax_compile_is_recompile="true"}[$__range])) > 0)'
    ) == {"jax_compilations_total"}
    assert promql_metric_names(
        "a_total unless b_total offset 10m or rate(c_seconds_sum[5m]) * 60 > 1e3"
    ) == {"a_total", "b_total", "c_seconds_sum"}
    assert promql_metric_names('histogram_quantile(0.95, sum by (le) (rate(x_bucket{a="b"}[5m])))') == {"x_bucket"}


# ----------------------------------------------------------------------------- readme


def test_readme_documents_the_one_command_and_ports():
    text = README.read_text(encoding="utf-8")
    assert "docker compose -f deploy/docker-compose.yml up -d" in text
    for port in ("16686", "9090", "3000", "4317", "4318"):
        assert port in text, port


# ------------------------------------------------------------------------ file audit


def test_user_function_views_leave_eager_compiles_out():
    """JAX's own op-by-op compiles carry jax_compile_eager_op="true" and user functions carry
    no such label at all, so every per-function count of the dashboard, its $function
    variable and the recording rules select jax_compile_eager_op!="true" (="false" would
    match nothing)."""
    selectors = []
    for where, expr in dashboard_prometheus_exprs():
        if where in ("variable job", "variable instance"):
            continue  # every job and instance, whatever compiles it has
        selectors += [(where, m) for m in re.findall(r"jax_compilations_total(?:\{[^}]*\})?", expr)]
    for name, rule in recording_rules().items():
        selectors += [(name, m) for m in re.findall(r"jax_compilations_total(?:\{[^}]*\})?", rule["expr"])]
    storm = alert_rules()["JaxRecompilationStorm"]["expr"]
    selectors += [("JaxRecompilationStorm", m)
                  for m in re.findall(r"jax_compilations_total(?:\{[^}]*\})?", storm)]
    assert len(selectors) >= 10, selectors
    for where, selector in selectors:
        assert 'jax_compile_eager_op!="true"' in selector, f"{where} counts eager ops: {selector}"
    everything = DASHBOARD_FILE.read_text(encoding="utf-8") + RULES_FILE.read_text(encoding="utf-8")
    assert 'jax_compile_eager_op=\\"false\\"' not in everything
    assert 'jax_compile_eager_op="false"' not in everything


# Deprecated aliases of the collector's exporter types since collector 0.144 (they still
# load, with a warning at start-up): the current names.
DEPRECATED_EXPORTER_TYPES = {"otlp": "otlp_grpc", "otlphttp": "otlp_http"}


def test_collector_configs_use_current_exporter_type_names():
    image = compose()["services"]["otel-collector"]["image"]
    version = tuple(int(p) for p in image.rsplit(":", 1)[1].split("."))
    assert version >= (0, 144, 0), f"{image} predates otlp_grpc; the configs use it"
    for path in (COLLECTOR_CONFIG, COLLECTOR_K8S_CONFIG):
        config = load_yaml(path)
        for name in config["exporters"]:
            kind = name.split("/")[0]
            assert kind not in DEPRECATED_EXPORTER_TYPES, (
                f"{path.name}: exporter {name} uses the deprecated type {kind!r}; "
                f"use {DEPRECATED_EXPORTER_TYPES[kind]!r}")
        assert config["service"]["pipelines"]["traces"]["exporters"] == ["otlp_grpc/jaeger"]


def test_trace_to_metrics_link_filters_by_a_tag_jaeger_shows():
    """Jaeger shows service.name as the trace's service, never as a tag, and Grafana builds
    $__tags from tags only: the job must come from a tag the collector adds."""
    t2m = provisioned_datasources()["jaeger"]["jsonData"]["tracesToMetrics"]
    mapping = {t["key"]: t.get("value") or t["key"] for t in t2m["tags"]}
    assert "service.name" not in mapping
    assert mapping.get("otel_jax.job") == "job"
    assert mapping.get("code.function.name") == "code_function_name"
    for path in (COLLECTOR_CONFIG, COLLECTOR_K8S_CONFIG):
        config = load_yaml(path)
        added = {}
        for name in config["service"]["pipelines"]["traces"]["processors"]:
            if name.split("/")[0] == "resource":
                for action in config["processors"][name]["attributes"]:
                    added[action["key"]] = action
        assert added["otel_jax.job"]["from_attribute"] == "service.name", path.name
        assert added["otel_jax.job"]["action"] in {"upsert", "insert"}, path.name


def test_jaeger_alone_runs_the_image_of_the_pipeline_and_says_where_the_ui_is():
    # The docs' "Jaeger alone" command pulls the Jaeger image the pipeline pins, and both
    # pages say the Jaeger the tests build has no web UI, and where it is.
    image = compose()["services"]["jaeger"]["image"]
    top = (REPO / "docs" / "observability.md").read_text(encoding="utf-8")
    section = top[top.index("## Jaeger alone, as it ships"):]
    command = next(ln for ln in section.splitlines() if ln.startswith("docker run"))
    assert command.split()[-1] == image
    for text in (section, README.read_text(encoding="utf-8")):
        assert "no web UI" in text and "https://github.com/jaegertracing/jaeger/releases" in text


def test_readme_says_port_4317_needs_the_grpc_exporter():
    # What installs it today: the exporter's own package, or the extra from the checkout
    # (otel_jax is on no package index: 'otel_jax[grpc]' cannot install).
    rows = [line for line in README.read_text(encoding="utf-8").splitlines()
            if line.startswith("| 4317")]
    assert len(rows) == 1
    assert "pip install opentelemetry-exporter-otlp-proto-grpc" in rows[0]
    assert "pip install '.[grpc]'" in rows[0] and "otel_jax[grpc]" not in rows[0]


def test_every_pinned_image_is_listed_with_its_evidence():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Image tags"):]
    for name, service in compose()["services"].items():
        row = next((line for line in section.splitlines() if f"`{service['image']}`" in line), None)
        assert row, f"{service['image']} ({name}) is not in deploy/README.md's image table"
        assert "http" in row or "tests" in row, f"no evidence given for {service['image']}"
