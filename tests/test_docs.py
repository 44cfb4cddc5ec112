"""Every code block of README.md and docs/*.md, read from the files themselves, runs or is
checked, so that the documentation cannot drift from the code.

A fenced block's info string says what it is and how it is checked; the first word is the
language (as GitHub renders it), the words after it are this test's marks:

- ``python``: a whole program. It runs in a fresh directory (``PYTHONPATH`` the checkout,
  OpenTelemetry's exporters off) and must exit 0.
- ``sh`` or ``console`` (its commands are the lines after ``$ ``; a ``\\`` at the end of a
  line continues it): each command is checked.

  * ``make TARGET``: the Makefile has the target (never run here: ``make test`` runs this).
  * otel_jax's command line (``otel-jax``, ``.venv/bin/otel-jax``, ``python -m otel_jax``)
    runs, with ``.venv/bin/`` standing for this interpreter's folder and ``otel-jax`` for
    ``python -m otel_jax`` (the code under test, whatever console script is installed), in
    a directory holding ``train.py`` and ``compiles.log`` (the demo's log): it must exit 0.
  * A Python program run with a script (``python train.py``, ``.venv/bin/python
    examples/train.py``) runs the same way, with its variables.
  * Anything else is not run: the block must carry one of the marks below.

- Marks on a ``sh``/``console`` block, for commands that need what a test cannot have:
  ``needs-server`` (Docker, a collector, Jaeger: the commands are not run; otel_jax's
  command lines are parsed by its own parsers, the files and Makefile targets named must
  exist) and ``needs-install`` (``pip install``: the packages named must be otel_jax or its
  declared dependencies and extras, or the OpenTelemetry distro).
- ``yaml`` and ``json``: they parse (a JSON block may hold several objects, one after the
  other, and ``...`` for an elided part).
- ``text``: output shown, not run. The README's outputs of the demo and of ``otel-jax
  report`` are compared with the current code's (timings and ids aside) by
  :func:`test_the_readme_shows_what_the_demo_prints_now`; ``make docs`` writes them.

A block with no language, or a language or mark not listed here, fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import clean_env, pythonpath

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "sh", "console", "yaml", "json", "text"}
MARKS = {"needs-server", "needs-install"}
TIMEOUT_S = 600
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.M | re.S)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    marks: frozenset[str]
    body: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        words = m.group("info").split()
        indent = len(m.group("indent"))
        body = "\n".join(line[indent:] for line in m.group("body").splitlines())
        found.append(Block(path, text.count("\n", 0, m.start()) + 1,
                           words[0] if words else "", frozenset(words[1:]), body))
    return found


ALL = [b for path in DOCS for b in blocks(path)]


def of(*languages: str) -> list[pytest.param]:
    return [pytest.param(b, id=b.id) for b in ALL if b.language in languages]


def test_the_blocks_are_found_and_each_says_what_it_is():
    assert len(DOCS) > 8 and len(ALL) > 20  # the README and docs/ were read
    unknown = [(b.id, b.language, sorted(b.marks - MARKS)) for b in ALL
               if b.language not in LANGUAGES or b.marks - MARKS]
    assert not unknown, f"blocks this test does not know how to check: {unknown}"
    # the marks are few: each shell block that is not run says why
    assert sum(bool(b.marks) for b in ALL) <= 12


# --- Python ---------------------------------------------------------------------------

def program_env(**extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=pythonpath(ROOT), OTEL_TRACES_EXPORTER="none",
                     OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                     JAX_PLATFORMS="cpu", **extra)


@pytest.mark.slow
@pytest.mark.parametrize("block", of("python"))
def test_python_blocks_run(block: Block, tmp_path: Path) -> None:
    program = tmp_path / "block.py"
    program.write_text(block.body)
    proc = subprocess.run([sys.executable, str(program)], cwd=tmp_path, env=program_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{block.id}\n{proc.stderr[-3000:]}"


# --- shell ----------------------------------------------------------------------------

def commands(block: Block) -> list[str]:
    """The block's commands, continuation lines joined, comments and output left out."""
    lines = block.body.splitlines()
    if block.language == "console":
        picked, joining = [], False
        for line in lines:
            if line.startswith("$ ") or joining:
                picked.append(line[2:] if line.startswith("$ ") else line)
                joining = line.endswith("\\")
        lines = picked
    out, current = [], ""
    for line in lines:
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            stripped = current.split(" #")[0].strip() if not current.lstrip().startswith(
                "#") else ""
            if stripped:
                out.extend(part.strip() for part in stripped.split("&&") if part.strip())
            current = ""
    return out


def words_of(command: str) -> tuple[dict[str, str], list[str]]:
    """A command's leading VAR=value assignments and its words (a redirection of its
    output left out: the test keeps the output)."""
    words = shlex.split(command)
    for i in reversed(range(len(words))):
        if re.fullmatch(r"\d?>>?", words[i]) and i + 1 < len(words):
            del words[i:i + 2]
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def otel_jax_args(words: list[str]) -> list[str] | None:
    """The arguments of otel_jax's command line in ``words``, or None if it is another."""
    if words and os.path.basename(words[0]) == "otel-jax":
        return words[1:]
    if len(words) >= 3 and re.fullmatch(r"(.*/)?python3?", words[0]) and \
            words[1:3] == ["-m", "otel_jax"]:
        return words[3:]
    return None


def python_program(words: list[str]) -> list[str] | None:
    if words and re.fullmatch(r"(.*/)?python3?", words[0]) and len(words) > 1 and \
            words[1].endswith(".py"):
        return words[1:]
    return None


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*):", text, re.M))


def here(word: str) -> str:
    """``.venv/bin/X`` as this interpreter's folder's X, ``examples/…`` as the checkout's."""
    if word.startswith((".venv/bin/", ".venv-demo/bin/")):
        return str(Path(sys.executable).parent / word.split("/")[-1])
    return str(ROOT / word) if word.startswith("examples/") else word


def parses(args: list[str]) -> None:
    """otel_jax's own parsers accept ``args`` (for commands that cannot run here)."""
    from otel_jax._report import _command
    from otel_jax._run import _launch

    if args[0] == "report":
        _command._parser().parse_args(args[1:])
    elif args[0] == "run":
        flags = _launch._option_flags()
        ours, program = _launch._split(args[1:], {"--summary", "--html"}
                                       | {flag for flag, *_ in flags})
        _launch._parser(flags).parse_args(ours)
        assert program, args
    else:
        raise AssertionError(f"no sub-command {args[0]!r}")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the demo (train.py) and its log (compiles.log)."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "train.py").write_text((ROOT / "examples" / "train.py").read_text())
    with (folder / "compiles.log").open("w") as log:
        proc = subprocess.run([sys.executable, "train.py", "--epochs", "2"], cwd=folder,
                              env=program_env(), stdout=subprocess.DEVNULL, stderr=log,
                              timeout=TIMEOUT_S)
    assert proc.returncode == 0
    return folder


SHELL = of("sh", "console")


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL)
def test_shell_blocks(block: Block, request: pytest.FixtureRequest) -> None:
    targets = makefile_targets()
    for command in commands(block):
        env, words = words_of(command)
        if words[:1] == ["make"]:
            assert set(words[1:]) <= targets, f"{block.id}: {command}"
            continue
        args = otel_jax_args(words)
        program = python_program(words)
        if block.marks:
            if args is not None:
                parses(args)
            if program is not None:
                assert (ROOT / program[0]).exists() or program[0] == "train.py", command
            if "needs-install" in block.marks and words[:2] == ["pip", "install"]:
                check_installable(words[2:], block)
            continue
        assert args is not None or program is not None, (
            f"{block.id}: `{command}` is neither otel_jax's command line nor a Python "
            "program: mark the block (needs-server, needs-install)")
        scratch = request.getfixturevalue("scratch")
        argv = ([sys.executable, "-m", "otel_jax", *[here(w) for w in args]] if args is not None
                else [sys.executable, *program])
        if program is not None:
            argv[1] = here(program[0])
        proc = subprocess.run(argv, cwd=scratch, env=program_env(**env), capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"{block.id}: {command}\n{proc.stderr[-3000:]}"


def check_installable(names: list[str], block: Block) -> None:
    """``pip install`` of otel_jax (by name or as the checkout ``.``, with extras it
    declares), its dependencies or the OpenTelemetry distro."""
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project.get("optional-dependencies", {}))
    ours = {Requirement(r).name for r in project["dependencies"]}
    for name in (n for n in names if n != "-e"):
        requirement = Requirement("otel_jax" + name[1:] if name.startswith(".") else name)
        if requirement.name == "otel_jax":
            assert requirement.extras <= extras, (block.id, name)
        else:
            assert requirement.name in ours | {"opentelemetry-distro"}, (block.id, name)


# --- data -----------------------------------------------------------------------------

@pytest.mark.parametrize("block", of("yaml", "json"))
def test_data_blocks_parse(block: Block) -> None:
    # (One test for both: where no page has a block of one of them, nothing is skipped.)
    if block.language == "yaml":
        import yaml

        assert yaml.safe_load(block.body) is not None, block.id
        return
    # an elided part: "..." as a list's items or an object's last members
    text = re.sub(r",\s*\.\.\.\s*}", "}", block.body).replace("[...]", "[]")
    decoder, i, objects = json.JSONDecoder(), 0, []
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        value, i = decoder.raw_decode(text, i)
        objects.append(value)
    assert objects, block.id


# --- the README's outputs, as the current code prints them -----------------------------

def normalized(text: str) -> list[str]:
    """``text``'s lines, sorted (rows and causes tied on time come in either order), with
    what changes from run to run (seconds, timestamps, trace and span ids, shares of
    measured time, and so the widths of a table's columns) made equal."""
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", text)
    text = re.sub(r"\b\d\d:\d\d:\d\d\b", "<clock>", text)  # a console line's local time
    text = re.sub(r"\b[0-9a-f]{16}(?:[0-9a-f]{16})?\b", "<id>", text)
    text = re.sub(r"\d+\.\d+", "<n>", text)
    text = re.sub(r"\b\d+%", "<pct>", text)  # a share of measured time
    text = re.sub(r"#\d+:", "#<step>:", text)  # the steps that compiled, longest first
    return sorted(re.sub(r" +", " ", line).strip() for line in text.splitlines())


@pytest.mark.slow
def test_the_readme_shows_what_the_demo_prints_now(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    import docs_examples

    stdout, log = docs_examples.run_demo(tmp_path)
    made = docs_examples.blocks(stdout, log)
    shown = docs_examples.shown()
    assert set(shown) == set(made)
    for name, text in made.items():
        assert normalized(shown[name]) == normalized(text), (
            f"the {name} block is not what the demo prints now: run `make docs`")
