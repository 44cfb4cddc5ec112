"""Package metadata a build reads without deprecation warnings, and what a built wheel and
an editable install carry: the licence text, the classifiers, types mypy can read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    # The table form ``license = { text = ... }`` makes setuptools print a deprecation
    # banner on every ``pip install -e .``; the SPDX string needs setuptools >= 77.
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "Apache-2\.0"$', pyproject, re.M)
    minimum = re.search(r'"setuptools>=(\d+)', pyproject)
    assert minimum and int(minimum.group(1)) >= 77


# --- what a wheel and an editable install give a user ------------------------------------------

#: What a build reads: the rest of the checkout (tests, benchmarks) is not in the package.
_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "otel_jax")
#: A user's file: mypy says the handle is an Installation only where it reads our types.
_USER_FILE = "import otel_jax\nhandle: int = otel_jax.install()\n"
_SEEN = 'expression has type "Installation", variable has type "int"'


def _source_copy(to: Path) -> Path:
    to.mkdir()
    for name in _SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, to / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, to / name)
    return to


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, timeout=600,
                   capture_output=True, text=True)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "-w", str(tmp / "dist"), str(_source_copy(tmp / "src")))
    [built] = (tmp / "dist").glob("otel_jax-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_the_licence_and_says_what_it_is(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        [licence] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert zf.read(licence) == (ROOT / "LICENSE").read_bytes()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = zf.read(metadata).decode()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "otel_jax/py.typed" in names
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    for classifier in ("Typing :: Typed", "Framework :: Pytest", "Development Status :: "):
        assert f"Classifier: {classifier}" in meta
    assert "Project-URL" not in meta  # none until there is a public one
    # the extras a user may want; the suite's own tools are a dependency group, not published
    extras = set(re.findall(r"^Provides-Extra: (.+)$", meta, re.M))
    assert extras == {"grpc", "report"}, extras


@pytest.mark.slow
@pytest.mark.parametrize("how", ["wheel", "editable"])
def test_mypy_reads_the_types_of_an_installed_otel_jax(how: str, wheel: Path, tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    if how == "wheel":
        _pip("--python", str(python), "install", "--no-deps", str(wheel))
    else:
        _pip("--python", str(python), "install", "--no-deps", "-e",
             str(_source_copy(tmp_path / "src")))
    (tmp_path / "user.py").write_text(_USER_FILE)
    # Only what is installed there: not the checkout a test run has on PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                           "--python-executable", str(python), "user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert _SEEN in proc.stdout, proc.stdout + proc.stderr
    assert "import-not-found" not in proc.stdout and "py.typed" not in proc.stdout


# --- the source distribution -------------------------------------------------------------------

def _tracked() -> list[str]:
    # (and the new files git does not ignore, as they will be once committed)
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip("not a git checkout (an unpacked source distribution)")
    return [n for n in proc.stdout.split("\0") if n and (ROOT / n).is_file()]


@pytest.mark.slow
def test_the_sdist_holds_what_builds_tests_and_documents_otel_jax(tmp_path: Path):
    # A source distribution is a checkout without git: the docs the README links to, the
    # examples it runs, the deploy stack, and the suite with its conftest.py and the scripts
    # and benchmarks it drives (MANIFEST.in).
    tracked = _tracked()
    src = tmp_path / "src"
    for name in tracked:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    backend = tmp_path / "backend"  # the build-system's requirements, as pip would use them
    _pip("install", "--target", str(backend), "setuptools>=77", "wheel")
    built = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[2]))",
         str(backend), str(tmp_path / "dist")], cwd=src, capture_output=True, text=True,
        timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert built.returncode == 0, built.stderr[-3000:]
    archive = tmp_path / "dist" / built.stdout.split()[-1]
    with tarfile.open(archive) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers()
                   if m.isfile() and "/" in m.name}
    names = set(members)
    # `make test` runs the scripts as commands: they stay executable
    for name in ("scripts/ensure-tools", "scripts/suites", "scripts/find-python", ".ci/run"):
        assert members[name].mode & 0o111, name
    missing = sorted(set(tracked) - names)
    assert not missing, f"not in the sdist: {missing}"
    for name in ("tests/conftest.py", "docs/tour.md", "examples/train.py",
                 "deploy/docker-compose.yml", "Makefile"):
        assert name in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
