"""From an alert or a dashboard dot to the cause, through deploy/'s pipeline for real.

A program with a few recompiles inside its own step spans sends OTLP to Jaeger v2 running
deploy/otel-collector/config.yaml (tests/test_pipeline.py says how); Prometheus 3 scrapes the
collector's prometheus exporter with deploy/prometheus/prometheus.yml and the feature flags of
docker-compose.yml. Prometheus's exemplar API must give, for the recompile series, a trace id
that Jaeger's query API returns as a trace holding that ``jax.compile`` span with its cause;
the dashboard's exemplar queries and the alerts' Jaeger searches must lead there too. A
Prometheus as it ships (no feature flag) keeps no exemplar: the one setting it needs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from conftest import clean_env, free_port
from test_pipeline import (  # noqa: F401  (fixtures: pytest finds them by name here)
    DASHBOARD_FILE,
    DATASOURCES_FILE,
    PHASES,
    PROMETHEUS_CONFIG,
    ROOT,
    Pipeline,
    PrometheusServer,
    Server,
    all_panels,
    components,
    get_json,
    grafana_vars,
    pipeline,
    prometheus,
    wait_until,
)

RULES_FILE = ROOT / "deploy" / "prometheus" / "rules" / "otel_jax_alerts.yml"
SERVICE = "exemplars"

# Three steps, each compiling `update` (a first compile, then two shape recompiles), then
# warm-up declared done and one more recompile: JaxRecompileAfterWarmup fires for it.
PROGRAM = textwrap.dedent("""
    import otel_jax
    otel_jax.install(log_output=None)
    import jax, jax.numpy as jnp

    @jax.jit
    def update(x):
        return x * 2

    for n in (2, 3, 4):
        with otel_jax.step("train_step"):
            update(jnp.ones(n))
    otel_jax.mark_warmup_done()
    with otel_jax.step("train_step"):
        update(jnp.ones(5))
""")


def run_program(pipeline: Pipeline, tmp_path: Path) -> None:
    script = tmp_path / "recompiles.py"
    script.write_text(PROGRAM)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300,
        # One metric export, at exit: it holds an exemplar of every series (the SDK keeps
        # a point's exemplars for one collection, and the exporter shows the last export).
        env=clean_env(OTEL_SERVICE_NAME=SERVICE,
                      OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{pipeline.otlp_http}",
                      OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                      OTEL_BSP_SCHEDULE_DELAY="200"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cannot export" not in result.stderr, result.stderr[-3000:]


def query_exemplars(base: str, expr: str, start: float) -> list[dict]:
    """GET /api/v1/query_exemplars, as Grafana asks it for a panel's query."""
    params = {"query": expr, "start": f"{start:.3f}", "end": f"{time.time() + 60:.3f}"}
    body = get_json(f"{base}/api/v1/query_exemplars?" + urllib.parse.urlencode(params))
    assert body["status"] == "success", body
    return body["data"] or []


def exemplars_by_series(result: list[dict]) -> dict[tuple, list[dict]]:
    return {tuple(sorted(s["seriesLabels"].items())): s["exemplars"] for s in result}


def jaeger_trace(pipeline: Pipeline, trace_id: str) -> dict:
    """GET /api/traces/<id>: the trace, its spans by span id (Jaeger's JSON)."""
    body = get_json(f"{pipeline.query}/api/traces/{trace_id}")
    [trace] = body["data"]
    return trace


def spans_by_id(trace: dict) -> dict[str, dict]:
    return {s["spanID"]: s for s in trace["spans"]}


def stored_span(pipeline: Pipeline, exemplar: dict[str, str], children: int = 0
                ) -> dict[str, dict]:
    """The spans of the exemplar's trace, once Jaeger holds its span, that span's parent
    and ``children`` spans under it (their final state: the program has exited)."""

    def complete(spans: dict[str, dict]) -> bool:
        span = spans.get(exemplar["span_id"])
        return span is not None and (parent_id(span) is None or parent_id(span) in spans) \
            and sum(parent_id(s) == exemplar["span_id"] for s in spans.values()) >= children

    return wait_until(lambda: spans_by_id(jaeger_trace(pipeline, exemplar["trace_id"])),
                      complete, 90, f"span {exemplar} in Jaeger")


def tags(span: dict) -> dict[str, object]:
    return {t["key"]: t["value"] for t in span["tags"]}


def parent_id(span: dict) -> str | None:
    return next((r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"),
                None)


@pytest.mark.slow
def test_an_exemplar_leads_from_the_recompile_series_to_its_trace_and_cause(
        pipeline, prometheus, prometheus_binary, tmp_path):
    started = time.time() - 5
    shipped = start_prometheus_as_shipped(prometheus_binary, pipeline, tmp_path / "shipped")
    try:
        run_program(pipeline, tmp_path)
        recompiles = (f'jax_compilations_total{{job="{SERVICE}", '
                      'code_function_name="update", jax_compile_is_recompile="true"}')

        # The final state: both recompile series (shape before and after warm-up share
        # one series) and the first compile's, each with an exemplar naming a trace.
        def stored():
            return exemplars_by_series(query_exemplars(
                prometheus.base,
                f'jax_compilations_total{{job="{SERVICE}", code_function_name="update"}}',
                started))

        series = wait_until(stored, lambda got: len(got) == 2 and all(
            e["labels"].get("trace_id") and e["labels"].get("span_id")
            for ex in got.values() for e in ex), 120,
            "an exemplar on each jax_compilations_total series of the program")
        recompile_series = [ex for labels, ex in series.items()
                            if dict(labels)["jax_compile_is_recompile"] == "true"]
        assert [dict(k)["jax_compile_cause_kind"] for k in series
                if dict(k)["jax_compile_is_recompile"] == "true"] == ["shape"]
        exemplar = recompile_series[0][-1]["labels"]

        # Jaeger has that trace: the exemplar's span is the jax.compile span of a
        # recompile, with its cause and phases, a child of the program's step span.
        spans = stored_span(pipeline, exemplar, children=3)
        compile_span = spans[exemplar["span_id"]]
        assert compile_span["operationName"] == "jax.compile update"
        attrs = tags(compile_span)
        assert attrs["jax.compile.cause.kind"] == "shape"
        assert attrs["jax.compile.is_recompile"] is True
        assert re.fullmatch(r"x: f32\[\d\] -> f32\[\d\]", attrs["jax.compile.cause"]), attrs
        assert spans[parent_id(compile_span)]["operationName"] == "train_step"
        assert sorted(s["operationName"] for s in spans.values()
                      if parent_id(s) == exemplar["span_id"]) == sorted(PHASES)

        # The dashboard's exemplar queries (what Grafana asks for its dots) return
        # exemplars whose traces Jaeger has, as compile spans or step spans.
        dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
        values = {"job": SERVICE, "instance": ".*", "function": ".*", "__interval": "1s",
                  "__rate_interval": "5s"}
        shown = {}
        for panel in all_panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                if target.get("exemplar"):
                    expr = grafana_vars(target["expr"], values)
                    shown[panel["title"]] = wait_until(
                        lambda expr=expr: query_exemplars(prometheus.base, expr, started),
                        bool, 60, f"exemplars of {expr}")
        assert set(shown) == {"Recompilations per minute by function and cause",
                              "Compile seconds p50 / p95 by function",
                              "Step time p50 / p95, steps that compiled marked"}
        for title, result in shown.items():
            # (The compile-time panel counts JAX's eager op compiles too: their spans.)
            want = "train_step" if title.startswith("Step") else "jax.compile "
            for series_ in result:
                for e in series_["exemplars"]:
                    found = stored_span(pipeline, e["labels"])
                    assert found[e["labels"]["span_id"]]["operationName"].startswith(want), \
                        title

        # The after-warm-up alert's Jaeger search, as Jaeger's API takes the UI's search
        # parameters, finds the recompile with that cause kind.
        def fired():
            return [a for a in get_json(f"{prometheus.base}/api/v1/alerts")["data"]["alerts"]
                    if a["labels"]["alertname"] == "JaxRecompileAfterWarmup"
                    and a["labels"]["job"] == SERVICE and a["state"] == "firing"]

        [alert] = wait_until(fired, bool, 60, "JaxRecompileAfterWarmup for the program")
        search = urllib.parse.urlsplit(alert["annotations"]["jaeger_search"])
        assert search.path == "/search" and not search.netloc
        params = dict(urllib.parse.parse_qsl(search.query))
        assert params["service"] == SERVICE and params["operation"] == "jax.compile update"
        assert json.loads(params["tags"]) == {"jax.compile.after_warmup": "true",
                                              "jax.compile.cause.kind": "shape"}
        now_us = int(time.time() * 1e6)
        body = get_json(f"{pipeline.query}/api/traces?" + urllib.parse.urlencode({
            **params, "start": now_us - 3600 * 10**6, "end": now_us + 60 * 10**6}))
        found = [s for t in body["data"] for s in t["spans"]
                 if s["operationName"] == "jax.compile update"]
        assert [(tags(s)["jax.compile.cause.kind"], tags(s)["jax.compile.after_warmup"])
                for s in found] == [("shape", True)]

        # Prometheus as it ships scraped the same exporter and kept no exemplar: the
        # feature flag docker-compose.yml gives it is the one setting they need.
        wait_until(lambda: shipped.query(recompiles), bool, 60,
                   "the recompile series in Prometheus as it ships")
        assert query_exemplars(shipped.base, recompiles, started) == []
    finally:
        shipped.server.stop()


def start_prometheus_as_shipped(binary: str, pipeline: Pipeline, where: Path) -> PrometheusServer:
    """Prometheus 3 with no flag but its storage and port, deploy/'s scrape of the exporter."""
    where.mkdir()
    port = free_port()
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config.pop("rule_files")
    config["scrape_configs"] = [job for job in config["scrape_configs"]
                                if job["job_name"] == "otel-collector"]
    config["scrape_configs"][0]["static_configs"] = [
        {"targets": [f"127.0.0.1:{pipeline.exporter}"]}]
    path = where / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    server = Server([binary, f"--config.file={path}", f"--storage.tsdb.path={where / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}"], where / "prometheus.log")
    base = f"http://127.0.0.1:{port}"

    def ready():
        server.check_running()
        return get_json(f"{base}/api/v1/status/buildinfo", timeout=2)["status"] == "success"

    try:
        wait_until(ready, bool, 60, "Prometheus as it ships to be ready")
    except BaseException:
        server.stop()
        raise
    return PrometheusServer(server, base)


# ------------------------------------------------------------ the files, without servers


def test_the_dashboard_shows_exemplars_that_open_the_trace_in_jaeger():
    datasources = {d["uid"]: d for d in yaml.safe_load(
        DATASOURCES_FILE.read_text(encoding="utf-8"))["datasources"]}
    [jaeger] = [uid for uid, d in datasources.items() if d["type"] == "jaeger"]
    [prom] = [d for d in datasources.values() if d["type"] == "prometheus"]
    [destination] = prom["jsonData"]["exemplarTraceIdDestinations"]
    # By data source uid (Grafana's internal link), not a URL with a host in it.
    assert destination["name"] == "trace_id" and destination["datasourceUid"] == jaeger
    assert "url" not in destination
    dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    # The panels query the Prometheus data source variable, whose default is the
    # provisioned one: that data source's exemplar destination is what opens the trace.
    defaults = {f"${{{v['name']}}}": v["current"]["value"]
                for v in dashboard["templating"]["list"] if v["type"] == "datasource"}
    with_exemplars = {}
    for panel in all_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            if target.get("exemplar"):
                assert defaults[target["datasource"]["uid"]] == prom["uid"], panel["title"]
                with_exemplars[panel["title"]] = target["expr"]
    assert "jax_compile_duration_seconds_bucket" in \
        with_exemplars["Compile seconds p50 / p95 by function"]
    assert 'jax_compile_is_recompile="true"' in \
        with_exemplars["Recompilations per minute by function and cause"]
    assert "jax_step_duration_seconds_bucket" in \
        with_exemplars["Step time p50 / p95, steps that compiled marked"]


def test_recompile_alerts_carry_a_jaeger_search_of_the_function_and_cause():
    alerts = {r["alert"]: r for g in yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
              ["groups"] for r in g["rules"] if "alert" in r}
    for name in ("JaxRecompilationStorm", "JaxRecompileAfterWarmup"):
        search = alerts[name]["annotations"]["jaeger_search"]
        assert "/search?service={{ $labels.job | urlquery }}" in search, name
        assert 'printf "jax.compile %s" $labels.code_function_name | urlquery' in search, name
        assert "jax.compile.cause.kind" in search, name
    share = alerts["JaxCompileTimeHighShareOfWallTime"]["annotations"]["jaeger_search"]
    assert "/search?service=" in share and "jax.compile %s" in share

