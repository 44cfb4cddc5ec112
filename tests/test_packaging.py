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


def _requirements() -> dict[str, object]:
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {r.name: r for r in map(Requirement, project["dependencies"])}


def test_jax_has_a_lower_bound_only_stated_once():
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from otel_jax._version import JAX_MINIMUM

    requirements = _requirements()
    for name in ("jax", "jaxlib"):
        # A lower bound only, as flax, equinox, chex and orbax have: a newer JAX installs
        # beside otel_jax, never downgraded.
        assert requirements[name].specifier == SpecifierSet(f">={JAX_MINIMUM}"), name
        assert requirements[name].marker is None
        for newer in ("0.11.0", "0.12.1", "1.0"):
            assert requirements[name].specifier.contains(Version(newer)), (name, newer)
        assert not requirements[name].specifier.contains(Version("0.7.2"))
    [dependency] = otel_jax.JaxInstrumentor().instrumentation_dependencies()
    from packaging.requirements import Requirement

    assert Requirement(dependency).specifier == requirements["jax"].specifier


def test_ci_tests_the_oldest_jax_the_range_admits():
    from otel_jax._version import JAX_MINIMUM

    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^JAX_OLDEST := ([\d.]+)$", makefile, re.M).group(1) == JAX_MINIMUM


def test_pip_resolves_otel_jax_beside_a_newer_jax(tmp_path):
    """pip's own resolver, offline: otel_jax's requirements (as pyproject.toml states them)
    with a JAX and jaxlib newer than any tested; the other requirements are those already
    installed here."""
    import zipfile

    def wheel(name: str, version: str, requires: list[str]) -> None:
        dist = f"{name}-{version}.dist-info"
        metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                            *(f"Requires-Dist: {r}\n" for r in requires)])
        files = {f"{name}/__init__.py": "", f"{dist}/METADATA": metadata,
                 f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                  "Tag: py3-none-any\n"}
        files[f"{dist}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{dist}/RECORD"])
        with zipfile.ZipFile(tmp_path / f"{name}-{version}-py3-none-any.whl", "w") as z:
            for path, text in files.items():
                z.writestr(path, text)

    wheel("jax", "0.12.0", ["jaxlib>=0.12.0"])
    wheel("jaxlib", "0.12.0", [])
    wheel("otel_jax", "99.0", [str(r) for r in _requirements().values()])
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links",
         str(tmp_path), "--disable-pip-version-check", "otel_jax==99.0", "jax==0.12.0"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    would = out.stdout[out.stdout.index("Would install"):]
    assert "jax-0.12.0" in would and "jaxlib-0.12.0" in would and "otel_jax-99.0" in would


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
    lines = layout.splitlines()

    def entry(package: str) -> str:
        """A subpackage's entry: its line of the tree and the lines continuing it."""
        head = next((i for i, line in enumerate(lines)
                     if line.strip().startswith(f"{package}/")), None)
        if head is None:
            return ""
        indent = len(lines[head]) - len(lines[head].lstrip())
        tail = head + 1
        while tail < len(lines) and (len(lines[tail]) - len(lines[tail].lstrip())) > indent:
            tail += 1
        return "\n".join(lines[head:tail])

    package = ROOT / "otel_jax"
    modules = sorted(p.relative_to(package) for p in package.rglob("*.py"))
    assert any(len(m.parts) > 1 for m in modules)  # subpackages are walked
    missing = [str(m) for m in modules if m.name != "__init__.py" and m.name not in (
        layout if len(m.parts) == 1 else entry("/".join(m.parts[:-1])))]
    assert not missing, f"README's Layout does not name {missing}"


def test_the_core_imports_only_the_standard_library_and_itself():
    import ast

    for path in sorted((ROOT / "otel_jax" / "_core").glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        outside = {node.module for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and node.level > 1}
        assert imported <= set(sys.stdlib_module_names) | {"__future__"}, path.name
        assert not outside, f"{path.name} imports {outside} outside the core"
