"""From an alert or a dashboard dot to the cause, through deploy/'s pipeline for real.

A program with a few recompiles inside its own step spans sends OTLP to Jaeger v2 running
deploy/otel-collector/config.yaml (tests/test_pipeline.py says how); Prometheus 3 scrapes the
collector's prometheus exporter with deploy/prometheus/prometheus.yml and the feature flags of
docker-compose.yml. Prometheus's exemplar API must give, for the recompile series, a trace id
that Jaeger's query API returns as a trace holding that ``jax.compile`` span with its cause;
the dashboard's exemplar queries and the alerts' Jaeger searches must lead there too. A
Prometheus as it ships (no feature flag) keeps no exemplar: the one setting it needs.
Without a collector: Prometheus 3's own OTLP receiver keeps the exemplars, otel_jax's own
scrape endpoint (``prometheus_port``) writes none.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
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
    JaegerAsShipped,
    Pipeline,
    PrometheusServer,
    Server,
    all_panels,
    components,
    get_json,
    grafana_vars,
    jaeger_as_shipped,
    once_ready,
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


def jaeger_trace(jaeger: Pipeline | JaegerAsShipped, trace_id: str) -> dict:
    """GET /api/traces/<id>: the trace, its spans by span id (Jaeger's JSON)."""
    body = get_json(f"{jaeger.query}/api/traces/{trace_id}")
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

    def ready() -> bool:
        return get_json(f"{base}/api/v1/status/buildinfo", timeout=2)["status"] == "success"

    return PrometheusServer(once_ready(server, ready, "Prometheus as it ships to be ready"), base)


# ------------------------------------------------ the two paths without deploy/'s collector

# The same recompiles; the program also serves otel_jax's own Prometheus endpoint
# (OTEL_EXPORTER_PROMETHEUS_PORT) and stays up until the test has seen it scraped.
SERVING_PROGRAM = PROGRAM + textwrap.dedent("""
    import os, sys, time
    deadline = time.monotonic() + 300
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.2)
""")


def start_prometheus_otlp(binary: str, scrape_port: int, where: Path) -> PrometheusServer:
    """Prometheus 3 taking OTLP itself (``--web.enable-otlp-receiver``), with exemplar
    storage and a scrape of otel_jax's own endpoint: its flags and that job, nothing else."""
    where.mkdir()
    port = free_port()
    path = where / "prometheus.yml"
    path.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "scraped",
                            "static_configs": [{"targets": [f"127.0.0.1:{scrape_port}"]}]}],
    }), encoding="utf-8")
    server = Server([binary, f"--config.file={path}", f"--storage.tsdb.path={where / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--web.enable-otlp-receiver",
                     "--enable-feature=exemplar-storage"], where / "prometheus.log")
    base = f"http://127.0.0.1:{port}"

    def ready():
        server.check_running()
        return get_json(f"{base}/api/v1/status/buildinfo", timeout=2)["status"] == "success"

    try:
        wait_until(ready, bool, 60, "Prometheus with its OTLP receiver to be ready")
    except BaseException:
        server.stop()
        raise
    return PrometheusServer(server, base)


@pytest.mark.slow
def test_prometheus_own_otlp_receiver_keeps_exemplars_its_scrape_of_otel_jax_gets_none(
        jaeger_as_shipped, prometheus_binary, tmp_path):
    """No collector: traces to Jaeger as it ships, metrics as OTLP straight to Prometheus 3's
    own receiver, and the same process's ``install(prometheus_port=...)`` endpoint scraped
    by that Prometheus. The OTLP path carries exemplars that open the compile's trace; the
    scrape endpoint (opentelemetry-exporter-prometheus) writes none, as docs/exemplars.md
    says."""
    started = time.time() - 5
    scrape_port = free_port()
    receiver = start_prometheus_otlp(prometheus_binary, scrape_port, tmp_path / "prometheus")
    try:
        script, done = tmp_path / "serving.py", tmp_path / "scraped"
        script.write_text(SERVING_PROGRAM)
        program = subprocess.Popen(
            [sys.executable, str(script), str(done)], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env=clean_env(
                OTEL_SERVICE_NAME=SERVICE, OTEL_LOGS_EXPORTER="none",
                OTEL_EXPORTER_PROMETHEUS_PORT=str(scrape_port),
                OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=(
                    f"http://127.0.0.1:{jaeger_as_shipped.otlp_http}/v1/traces"),
                OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=(
                    f"{receiver.base}/api/v1/otlp/v1/metrics"),
                OTEL_BSP_SCHEDULE_DELAY="200"))
        try:
            scraped = 'jax_compilations_total{job="scraped", code_function_name="update"}'
            # The final state of the scrape: all four compiles of `update` counted.
            wait_until(lambda: receiver.query(f"sum({scraped})"),
                       lambda r: r and float(r[0]["value"][1]) == 4, 120,
                       "the four compiles of update scraped from otel_jax's endpoint")
            # What the endpoint writes, asked as Prometheus asks (OpenMetrics first): the
            # series, no exemplar (an exemplar is `# {trace_id=...}` after a sample).
            request = urllib.request.Request(
                f"http://127.0.0.1:{scrape_port}/metrics",
                headers={"Accept": "application/openmetrics-text; version=1.0.0"})
            with urllib.request.urlopen(request, timeout=10) as response:
                exposition = response.read().decode()
            assert exposition.endswith("# EOF\n")  # OpenMetrics, where exemplars go
            assert "jax_compilations_total{" in exposition
            assert " # {" not in exposition
            assert query_exemplars(receiver.base, scraped, started) == []
        finally:
            done.touch()
            out, err = program.communicate(timeout=300)
        assert program.returncode == 0, err[-3000:]
        assert "cannot export" not in err and "does not accept" not in err, err[-3000:]

        # The OTLP path: the recompile series (written once, at exit) with an exemplar
        # naming a trace Jaeger holds, that recompile's jax.compile span and its cause.
        recompiles = (f'jax_compilations_total{{job="{SERVICE}", code_function_name="update", '
                      'jax_compile_is_recompile="true"}')
        [series] = wait_until(
            lambda: query_exemplars(receiver.base, recompiles, started),
            lambda got: got and all(e["labels"].get("trace_id") and e["labels"].get("span_id")
                                    for s in got for e in s["exemplars"]),
            120, "an exemplar on the recompile series sent by OTLP")
        assert series["seriesLabels"]["jax_compile_cause_kind"] == "shape"
        exemplar = series["exemplars"][-1]["labels"]
        spans = wait_until(
            lambda: spans_by_id(jaeger_trace(jaeger_as_shipped, exemplar["trace_id"])),
            lambda got: exemplar["span_id"] in got, 90, f"span {exemplar} in Jaeger")
        compile_span = spans[exemplar["span_id"]]
        assert compile_span["operationName"] == "jax.compile update"
        assert tags(compile_span)["jax.compile.cause.kind"] == "shape"
        assert re.fullmatch(r"x: f32\[\d\] -> f32\[\d\]", tags(compile_span)["jax.compile.cause"])
        # The compile-time histogram too (Grafana's dots on the p95).
        wait_until(lambda: query_exemplars(
            receiver.base, f'jax_compile_duration_seconds_bucket{{job="{SERVICE}"}}', started),
            bool, 60, "exemplars on the compile-time buckets sent by OTLP")
    finally:
        receiver.server.stop()


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

