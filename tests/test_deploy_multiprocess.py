"""The alert rule of multi-process jobs (deploy/prometheus/rules/otel_jax_multiprocess.yml):
promtool checks it and runs its unit tests, which catch a broken rule; Prometheus loads it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "rules"
RULE_FILE = RULES / "otel_jax_multiprocess.yml"
TEST_FILE = RULES / "otel_jax_multiprocess.test.yml"
PROMETHEUS_CONFIG = RULES.parent / "prometheus.yml"


@pytest.fixture
def promtool(promtool_binary: str) -> str:
    """promtool 3, built by scripts/ensure-tools (tests/conftest.py finds it)."""
    return promtool_binary


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_prometheus_loads_the_rule_file():
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    assert "rules/otel_jax_multiprocess.yml" in config["rule_files"]


def test_promtool_checks_and_unit_tests_pass(promtool):
    proc = _run([promtool, "check", "rules", str(RULE_FILE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run([promtool, "test", "rules", str(TEST_FILE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("before, after", [
    (") > 0\n          )\n          or", ") > 1\n          )\n          or"),
    ("[10m]", "[2m]"),
    # a scrape gap must not make an old divergence look new
    ("last_over_time(jax_compile_divergences_total[1d] offset 10m)",
     "jax_compile_divergences_total offset 10m"),
    ("severity: critical", "severity: warning"),
])
def test_the_unit_tests_catch_a_broken_rule(promtool, tmp_path, before, after):
    rules = RULE_FILE.read_text()
    assert before in rules
    (tmp_path / RULE_FILE.name).write_text(rules.replace(before, after, 1))
    shutil.copy(TEST_FILE, tmp_path / TEST_FILE.name)
    proc = _run([promtool, "test", "rules", TEST_FILE.name], cwd=tmp_path)
    assert proc.returncode != 0, proc.stdout


def test_the_rule_uses_the_contract_names():
    rule = yaml.safe_load(RULE_FILE.read_text())["groups"][0]["rules"][0]
    assert rule["alert"] == "JaxRanksCompileDifferentPrograms"
    assert "jax_compile_divergences_total" in rule["expr"]
    assert "jax_compile_divergence_kind" in rule["expr"]
