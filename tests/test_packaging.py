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
    assert scripts["otel-jax"] == "otel_jax._cli:main"


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

    from importlib.metadata import version

    from packaging.version import Version

    # One minor release past the JAX installed here (0.11.0 beside 0.10.2, 0.13.0 beside
    # 0.12.0.1): a fixed number would not be newer than the JAX of the newest-JAX suite,
    # and pip would keep the installed jaxlib instead of resolving the new one.
    installed = Version(version("jax"))
    newer = f"{installed.major}.{installed.minor + 1}.0"
    wheel("jax", newer, [f"jaxlib>={newer}"])
    wheel("jaxlib", newer, [])
    wheel("otel_jax", "99.0", [str(r) for r in _requirements().values()])
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links",
         str(tmp_path), "--disable-pip-version-check", "otel_jax==99.0", f"jax=={newer}"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    would = out.stdout[out.stdout.index("Would install"):]
    assert f"jax-{newer}" in would and f"jaxlib-{newer}" in would and "otel_jax-99.0" in would


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_benchmark_runs_and_prints_its_ratios():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--quick",
                          "--only", "abcdefg"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for label in ("(a) cache-hit call", "(b) compile loop", "(c) cause diff", "(d) otel_jax",
                  "(e) step time", "(f) recompile of a", "(g) compile loop"):
        assert label in out.stdout
    assert out.stdout.count("ratio") == 4


def test_the_layout_names_every_module():
    page = (ROOT / "docs" / "how-it-works.md").read_text()
    layout = page[page.index("## Layout"):]
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
    assert not missing, f"docs/how-it-works.md's Layout does not name {missing}"


def _module_graph() -> dict[str, set[str]]:
    """Each otel_jax module's imports, lazy ones (inside functions) included: the otel_jax
    modules by name (each must exist), anything else by its top-level name prefixed with
    ``ext:``."""
    import ast

    package = ROOT / "otel_jax"
    names: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = ("otel_jax", *path.relative_to(package).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # ``from pkg import mod`` imports the module mod; ``from mod import name``, mod
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                if target == "otel_jax" or target.startswith("otel_jax."):
                    # an import of ours that names no module fails when it runs
                    assert target in names, f"{name} imports {target}, which does not exist"
                    if target != name:
                        deps.add(target)
                else:
                    deps.add("ext:" + target.split(".")[0])
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` closes, each as the path around it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(d for d in graph[node] if d in graph):
            if state.get(dep) == 1:
                found.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                walk(dep, path)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [])
    return found


def test_the_graph_walk_sees_lazy_imports_and_cycles():
    graph = _module_graph()
    # a lazy import inside a function is an edge; ``from . import mod`` names the module
    assert "otel_jax._emit._export" in graph["otel_jax._emit._providers"]
    assert "otel_jax._report._html" in graph["otel_jax._report._command"]
    assert "otel_jax._core._vocab" in graph["otel_jax._report._read"]
    assert "ext:opentelemetry" in graph["otel_jax._emit._providers"]
    assert _cycles({"a": {"b"}, "b": {"c", "ext:os"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_module_graph_is_acyclic_lazy_imports_included():
    assert _cycles(_module_graph()) == []


#: otel_jax's rooms, lowest first: a module imports only from its own room and the rooms
#: below it, lazy imports included, so that data flows one way (JAX event -> record ->
#: emitters and checks -> set-up). The report reads logs with the standard library and
#: ``_core`` only, so it sits low (the pipeline borrows its printable text). The fleet
#: sits above the pipeline: it plugs into the pipeline's own interfaces
#: (``_pipeline._plugins``), wired in ``_setup``.
LAYERS = ("_version", "_core", "_report", "_capture", "_explain", "_pipeline", "_emit",
          "_fleet", "_setup", "_run", "_cli", "testing", "pytest_plugin", "__init__",
          "__main__")


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    rank = {room: i for i, room in enumerate(LAYERS)}
    return sorted((module, dep) for module, deps in graph.items() for dep in deps
                  if dep.startswith("otel_jax")
                  and rank[_room(dep)] > rank[_room(module)])


#: What the fleet reads of the rooms between it and the core: JAX's internals through their
#: boundary (the coordination client, the cache key), and the types of what the pipeline
#: hands its checks (the record, the signature and the function it names). Nothing else:
#: a fingerprint, a diff, a worker of the pipeline come in as values or parameters
#: (``_setup._checks``), so the fleet's work never climbs back into the pipeline's.
FLEET_READS = ("otel_jax._core", "otel_jax._fleet", "otel_jax._capture._jax",
               "otel_jax._pipeline._record", "otel_jax._capture._signature",
               "otel_jax._capture._source")


def _fleet_climbs(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """The fleet's imports of otel_jax outside ``FLEET_READS``, by module."""
    climbs = {m: sorted(d for d in deps if d.startswith("otel_jax") and not any(
        d == r or d.startswith(r + ".") for r in FLEET_READS))
        for m, deps in graph.items() if m.startswith("otel_jax._fleet")}
    return {m: deps for m, deps in climbs.items() if deps}


def test_every_import_goes_down_the_layers():
    graph = _module_graph()
    assert {_room(m) for m in graph} == set(LAYERS)  # every room is placed
    assert _upward_imports(graph) == []
    # the fleet above the pipeline: the pipeline reaches it through its plug-in points
    assert not any(dep.startswith("otel_jax._fleet") for module, deps in graph.items()
                   if module.startswith("otel_jax._pipeline") for dep in deps)
    assert _fleet_climbs(graph) == {}
    # the walk finds a climb: the compile ledger hashing a signature itself
    assert _fleet_climbs({"otel_jax._fleet._ledger_lines": {
        "otel_jax._capture._fingerprint", "otel_jax._core._vocab"}}) == {
        "otel_jax._fleet._ledger_lines": ["otel_jax._capture._fingerprint"]}
    # the walk finds an upward import, a lazy one too
    assert _upward_imports({"otel_jax._pipeline._engine": {"otel_jax._fleet._ranks"},
                            "otel_jax._core._text": {"otel_jax._report._text"}}) == [
        ("otel_jax._core._text", "otel_jax._report._text"),
        ("otel_jax._pipeline._engine", "otel_jax._fleet._ranks")]


#: The longest a module may be: past it, a module holds several concerns and a reader
#: cannot find a thing by its file's name.
MODULE_LINES_MAX = 700
#: Where every use of a JAX internal lives (each with a fallback decided by what fails).
JAX_BOUNDARY = "otel_jax._capture._jax"
JAX_INTERNALS = ("jax._src", "jaxlib", "jax.interpreters", "jax.core", "jax.extend")


def test_no_module_is_over_700_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for p in (ROOT / "otel_jax").rglob("*.py")}
    assert len(sizes) > 50 and max(sizes.values()) > 300  # the walk found the package
    over = {path: n for path, n in sizes.items() if n > MODULE_LINES_MAX}
    assert not over, f"modules over {MODULE_LINES_MAX} lines: {over}"


def _jax_internals_used(tree) -> list[str]:
    """Imports of JAX internals, by module (``from jax import core`` is ``jax.core``),
    and ``jax._src`` reached as an attribute of ``jax``."""
    import ast

    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + ([f"jax.{a.name}" for a in node.names]
                                     if node.module == "jax" else [])
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "jax" and node.attr == "_src"):
            names = ["jax._src"]
        else:
            continue
        used += [n for n in names if n.startswith(JAX_INTERNALS)]
    return used


def test_every_use_of_a_jax_internal_is_inside_the_boundary():
    import ast

    assert _jax_internals_used(ast.parse(
        "from jax._src import pjit\nimport jaxlib\nfrom jax import core, numpy\n"
        "import jax\njax._src.config")) == ["jax._src", "jaxlib", "jax.core", "jax._src"]
    outside, inside = {}, 0
    for path in (ROOT / "otel_jax").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        used = _jax_internals_used(ast.parse(path.read_text()))
        if module.startswith(JAX_BOUNDARY + "."):
            inside += len(used)
        elif used:
            outside[module] = used
    assert inside > 10  # the boundary is where they are
    assert not outside, f"JAX internals used outside {JAX_BOUNDARY}: {outside}"


def test_the_report_flows_one_way_reading_aggregating_rendering_then_the_command_line():
    graph = _module_graph()
    report = {n: {d for d in deps if d.startswith("otel_jax.")}
              for n, deps in graph.items() if n.startswith("otel_jax._report.")}
    layers = [("_read",), ("_bounded", "_hazards", "_programs"), ("_steps",), ("_aggregate",),
              ("_page_data",), ("_compare_runs._read",), ("_compare_runs._compare",),
              ("_text",), ("_compare_runs._render_text",), ("_html_style",),
              ("_html_charts",), ("_html",), ("_compare_runs._render_html",), ("_output",),
              ("_command", "_program_diff"), ("_compare_runs._command",), ("_compare_runs",)]
    rank = {f"otel_jax._report.{m}": i for i, names in enumerate(layers) for m in names}
    assert set(report) == set(rank)
    for name, deps in report.items():
        ours = {d for d in deps if d.startswith("otel_jax._report.")}
        assert all(rank[d] < rank[name] for d in ours), (name, sorted(ours))
        # beside its own modules the report reads the vocabulary only
        assert deps - ours <= {"otel_jax._core._vocab", "otel_jax._core._units",
                               "otel_jax._core._terminal"}, (
            name, sorted(deps - ours))
    # the package exports the ``otel-jax report``, ``otel-jax diff`` and ``otel-jax
    # program-diff`` commands, which the
    # command line calls
    assert graph["otel_jax._report"] == {"otel_jax._report._command",
                                         "otel_jax._report._compare_runs",
                                         "otel_jax._report._program_diff"}
    # the reading, aggregating and comparing layers render nothing
    renderers = {f"otel_jax._report.{m}" for m in (
        "_text", "_html_style", "_html_charts", "_html", "_command",
        "_compare_runs._render_text", "_compare_runs._render_html",
        "_compare_runs._command")}
    for name in ("_read", "_bounded", "_steps", "_aggregate", "_page_data",
                 "_compare_runs._read", "_compare_runs._compare"):
        assert not report[f"otel_jax._report.{name}"] & renderers, name
    # the run diff is not the cause diff: nothing of it is named ``_diff``
    assert not [m for m in graph if m.rpartition(".")[2].startswith("_diff")
                and m != "otel_jax._explain._diff"]


#: The command line's side of the package, lowest layer first: the report reads logs (it
#: depends on the vocabulary alone, so the rest of the package may use it too), the run
#: command launches a program (and summarises it with the report), the command line
#: (``otel-jax``, and ``python -m otel_jax``) calls both. No module imports one of a higher
#: layer, and the command line enters each sub-command's package through its exports.
COMMAND_LAYERS = (("otel_jax._report",), ("otel_jax._run",), ("otel_jax._cli",),
                  ("otel_jax.__main__",))


def _command_layer_breaches(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Each import (module, imported) that runs up to a higher command-line layer (a module
    outside them all counts as the lowest); and each import of a sub-command's package by
    the command line that does not go through the package's own exports."""
    def layer(module: str) -> int | None:
        for i, names in enumerate(COMMAND_LAYERS):
            if any(module == n or module.startswith(n + ".") for n in names):
                return i
        return None

    breaches = []
    for name, deps in graph.items():
        here = layer(name) or 0
        for dep in sorted(d for d in deps if d.startswith("otel_jax")):
            there = layer(dep)
            if there is not None and there > here:
                breaches.append((name, dep))
            elif here == layer("otel_jax._cli") and there is not None and there < here \
                    and dep not in {n for names in COMMAND_LAYERS for n in names}:
                breaches.append((name, dep))  # past a package's exports
    return breaches


def test_the_command_line_sits_on_top_and_no_import_runs_back_up():
    graph = _module_graph()
    assert _command_layer_breaches(graph) == []
    assert graph["otel_jax._cli"] >= {"otel_jax._report", "otel_jax._run"}
    assert graph["otel_jax.__main__"] == {"otel_jax._cli", "ext:sys"}
    # the check fails on the layout where the report package held the command line and
    # handed ``otel-jax run`` up to the run package
    old = {**graph, "otel_jax._report._command": graph["otel_jax._report._command"]
           | {"otel_jax._run._launch"}}
    assert ("otel_jax._report._command", "otel_jax._run._launch") in \
        _command_layer_breaches(old)
    assert ("otel_jax._cli", "otel_jax._run._launch") in _command_layer_breaches(
        {**graph, "otel_jax._cli": {"otel_jax._run._launch"}})
    assert ("otel_jax._setup._install", "otel_jax._cli") in _command_layer_breaches(
        {**graph, "otel_jax._setup._install": {"otel_jax._cli"}})


def test_the_core_depends_on_itself_and_the_standard_library_only():
    graph = _module_graph()
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for name, deps in graph.items():
        if name.startswith("otel_jax._core"):
            outside = {d for d in deps if not d.startswith("otel_jax._core")
                       and d.removeprefix("ext:") not in allowed}
            assert not outside, f"{name} imports {sorted(outside)}"


EXPORT_SIDE = ("otel_jax._emit._providers", "otel_jax._emit._export", "otel_jax._emit._health",
               "otel_jax._emit._observe", "otel_jax._emit._bounded", "otel_jax._emit._clean",
               "otel_jax._emit._resource", "otel_jax._emit._protocol",
               "otel_jax._emit._answer_body")


def test_the_export_layer_depends_on_the_core_only():
    # Providers and fail-open exporters (with their health model, request observers,
    # bounded calls and bad-text cleaning) warn through the core: nothing of the capture
    # pipeline is imported to set up OpenTelemetry or to say that a collector is down.
    graph = _module_graph()
    assert set(EXPORT_SIDE) <= set(graph)
    for name in EXPORT_SIDE:
        ours = {d for d in graph[name] if d.startswith("otel_jax")}
        assert ours <= {"otel_jax._core._failopen", "otel_jax._core._text",
                        "otel_jax._core._threads", "otel_jax._core._vocab",
                        *EXPORT_SIDE}, (name, ours)


def _makefile_list(name: str) -> list[str]:
    """A ``NAME := a b \\`` list of the Makefile, its continuation lines joined."""
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(rf"^{name} := ((?:.*\\\n)*.*)$", makefile, re.M)
    assert found, name
    return found.group(1).replace("\\\n", " ").split()


def test_the_python_range_is_the_one_the_suites_run_on():
    """requires-python and the classifiers say what ``make test`` runs: the default Python
    (3.11, where JAX stops at 0.10.2) and the newest Python >= 3.12 found (where the newest
    JAX installs); each suite checks that its own Python is listed."""
    import tomllib

    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = sorted((int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                     if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)))
    assert listed == list(range(listed[0], listed[-1] + 1))  # no gap
    assert SpecifierSet(project["requires-python"]) == SpecifierSet(f">=3.{listed[0]}")
    assert sys.version_info[:2] >= (3, listed[0]) and sys.version_info[1] in listed
    makefile = (ROOT / "Makefile").read_text()
    newest_min = re.search(r"^LATEST_PYTHON_MIN := 3\.(\d+)$", makefile, re.M)
    assert newest_min and int(newest_min.group(1)) in listed


def test_the_files_the_suites_name_exist():
    for name in ("LIBRARY_TESTS", "VERSION_FREE_TESTS", "EXIT_TESTS"):
        for path in _makefile_list(name):
            assert (ROOT / path).exists(), (name, path)
    assert not set(_makefile_list("LIBRARY_TESTS")) & set(_makefile_list("VERSION_FREE_TESTS"))


def _stub_python(path: Path, version: str) -> Path:
    """An executable that answers find-python's probe as a Python ``version`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{version} {path}"\n')
    path.chmod(0o755)
    return path


def _find_python(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # PATH: the stubs, and only the tools the script needs (no real Python, no pyenv).
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    import shutil

    for tool in ("readlink", "sort", "timeout", "tail", "head"):
        link = tools / tool
        if not link.exists():
            link.symlink_to(shutil.which(tool))
    env = {"PATH": f"{tmp_path / 'bin'}:{tools}", "PYENV_ROOT": str(tmp_path / "pyenv"),
           "HOME": str(tmp_path)}
    return subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "find-python"),
                           *args], capture_output=True, text=True, env=env, timeout=120)


def test_find_python_picks_the_newest_that_runs(tmp_path):
    _stub_python(tmp_path / "bin" / "python3", "3.11.9")
    _stub_python(tmp_path / "bin" / "python3.12", "3.12.4")
    shim = tmp_path / "bin" / "python3.13"  # a pyenv shim for a version not selected
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    newest = _stub_python(tmp_path / "pyenv" / "versions" / "3.13.1" / "bin" / "python3",
                          "3.13.1")
    old = tmp_path / "pyenv" / "versions" / "3.9.18" / "bin" / "python3"
    old.parent.mkdir(parents=True)
    old.write_text(f"#!/bin/sh\ntouch {tmp_path / 'old-was-run'}\n")
    old.chmod(0o755)
    out = _find_python(tmp_path)
    assert out.returncode == 0 and out.stdout == f"{newest}\n", out.stderr
    assert not (tmp_path / "old-was-run").exists()  # named older than 3.12: not run
    # None new enough: nothing printed, exit status 1 (make test then skips that suite).
    out = _find_python(tmp_path, "3.14")
    assert out.returncode == 1 and out.stdout == ""
    # A tie: the one on PATH.
    on_path = _stub_python(tmp_path / "bin" / "python3.13", "3.13.1")
    assert _find_python(tmp_path).stdout == f"{on_path}\n"


def test_find_python_finds_the_newest_of_one_series(tmp_path):
    _stub_python(tmp_path / "bin" / "python3", "3.11.9")
    series = _stub_python(tmp_path / "bin" / "python3.12", "3.12.1")
    _stub_python(tmp_path / "pyenv" / "versions" / "3.13.1" / "bin" / "python3", "3.13.1")
    out = _find_python(tmp_path, "3.12", "3.12")
    assert out.returncode == 0 and out.stdout == f"{series}\n", out.stderr
    out = _find_python(tmp_path, "3.10", "3.10")  # none of that series
    assert out.returncode == 1 and out.stdout == ""


def test_find_python_on_this_machine_finds_a_python_that_runs():
    out = subprocess.run([str(ROOT / "scripts" / "find-python")], capture_output=True,
                         text=True, timeout=300)
    if out.returncode == 1:
        assert out.stdout == ""
        return
    found = subprocess.run([out.stdout.strip(), "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60, check=True)
    import ast

    assert ast.literal_eval(found.stdout.strip()) >= (3, 12)
