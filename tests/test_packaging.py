"""What a user installs: entry points, a light import, the supported JAX range, the tools."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import otel_jax

ROOT = Path(__file__).resolve().parent.parent


def test_entry_points_are_registered():
    instrumentors = {ep.name: ep for ep in entry_points(group="opentelemetry_instrumentor")}
    assert instrumentors["jax"].load() is otel_jax.JaxInstrumentor
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins["otel_jax"] == "otel_jax.pytest_plugin"
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts["otel-jax"] == "otel_jax._report:main"


def test_import_is_light():
    code = ("import sys, otel_jax; "
            "print(sorted(m for m in ('jax', 'opentelemetry.sdk', 'opentelemetry.exporter', "
            "'opentelemetry.instrumentation') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_public_api():
    for name in otel_jax.__all__:
        assert getattr(otel_jax, name) is not None, name
    assert otel_jax.install.__doc__ and otel_jax.compile_history.__doc__


def test_ci_tests_the_oldest_jax_the_range_admits():
    pyproject = (ROOT / "pyproject.toml").read_text()
    lower = re.search(r'"jax>=([\d.]+),', pyproject).group(1)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^JAX_OLDEST := ([\d.]+)$", makefile, re.M).group(1) == lower


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_benchmark_runs_and_prints_its_ratios():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--quick"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for label in ("(a) cache-hit call", "(b) compile loop", "(c) cause diff", "(d) otel_jax",
                  "(e) step time", "(f) recompile of a", "(g) compile loop"):
        assert label in out.stdout
    assert out.stdout.count("ratio") == 4


def test_readme_layout_names_every_module():
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.index("```", layout.index("```") + 3)]
    missing = [p.name for p in sorted((ROOT / "otel_jax").glob("*.py"))
               if p.name != "__init__.py" and p.name not in layout]
    assert not missing, f"README's Layout does not name {missing}"
