"""Every code block of README.md, docs/*.md and deploy/README.md, read from the files
themselves, runs or is checked, so that the documentation cannot drift from the code.

A fenced block's info string says what it is and how it is checked; the first word is the
language (as GitHub renders it), the words after it are this test's marks:

- ``python``: a whole program. It runs in a fresh directory (``PYTHONPATH`` the checkout,
  OpenTelemetry's exporters off) and must exit 0.
- ``sh`` or ``console`` (its commands are the lines after ``$ ``; a ``\\`` at the end of a
  line continues it): a page's blocks run as a reader meets them, in one fresh shell per
  page (``bash``, ``set -e``) in a fresh copy of the checkout, with ``python`` and
  ``otel-jax`` on ``PATH`` as the README's install section leaves them (this interpreter,
  otel_jax from the copy): whatever a command reads, the page made before it.
  ``make TARGET`` is checked (the Makefile has the target), not run: ``make test`` runs
  this. Every command, run or not, is checked in the folder the page's ``cd`` took the
  reader to: the scripts and files it names exist there, and a server it starts before
  other commands is started with ``-d``. A block with no mark holds otel_jax's command
  lines (``otel-jax``, ``python -m otel_jax``), Python programs (``python X.py``), ``cd``
  and ``make`` only; anything else needs a mark.
- Marks on a ``sh``/``console`` block, for commands that need what a test cannot have:
  ``needs-server`` (Docker, a collector, Jaeger: the commands are not run, but for their
  ``cd``; otel_jax's command lines are parsed by its own parsers) and ``needs-install``
  (``pip install``: the packages named must be otel_jax or its declared dependencies and
  extras, or the OpenTelemetry distro).
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
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import clean_env, pythonpath

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "deploy" / "README.md"]
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
    out, current = [], ""
    for line in command_lines(block):
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            stripped = current.split(" #")[0].strip() if not current.lstrip().startswith(
                "#") else ""
            if stripped:
                out.extend(part.strip() for part in stripped.split("&&") if part.strip())
            current = ""
    return out


def command_lines(block: Block) -> list[str]:
    """The block's lines a reader types: all of a ``sh`` block, a ``console`` block's lines
    after ``$ `` (and the lines they continue)."""
    lines = block.body.splitlines()
    if block.language != "console":
        return lines
    picked, joining = [], False
    for line in lines:
        if line.startswith("$ ") or joining:
            picked.append(line[2:] if line.startswith("$ ") else line)
            joining = line.endswith("\\")
    return picked


def words_of(command: str) -> tuple[dict[str, str], list[str]]:
    """A command's leading VAR=value assignments and its words (a redirection left out)."""
    words = shlex.split(command)
    for i in reversed(range(len(words))):
        if re.fullmatch(r"\d?>>?", words[i]) and i + 1 < len(words):
            del words[i:i + 2]
        elif re.fullmatch(r"\d?>>?\S+", words[i]):
            del words[i]
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


PYTHON = re.compile(r"python3?")


def otel_jax_args(words: list[str]) -> list[str] | None:
    """The arguments of otel_jax's command line in ``words``, or None if it is another."""
    if words and words[0] == "otel-jax":
        return words[1:]
    if len(words) >= 3 and PYTHON.fullmatch(words[0]) and words[1:3] == ["-m", "otel_jax"]:
        return words[3:]
    return None


def script_of(words: list[str]) -> str | None:
    """The Python script ``words`` runs (``python X.py``, ``otel-jax run [options] X.py``,
    ``opentelemetry-instrument python X.py``), if any."""
    args = otel_jax_args(words)
    if args and args[0] == "run":
        from otel_jax._run import _launch

        flags = {"--summary", "--html"} | {flag for flag, *_ in _launch._option_flags()}
        words = _launch._split(args[1:], flags)[1]
    elif words[:1] == ["opentelemetry-instrument"]:
        words = words[1:]
    if words and PYTHON.fullmatch(words[0]):
        words = words[1:]
    script = next((w for w in words if not w.startswith("-")), None)
    return script if script and script.endswith(".py") else None


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z][\w-]*):", text, re.M))


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
    elif args[0] not in ("diff", "--version"):
        raise AssertionError(f"no sub-command {args[0]!r}")


#: Commands that hold the terminal until stopped, unless started in the background.
HOLDS_TERMINAL = re.compile(r"docker (compose|run)\b")

SHELL_BLOCKS = [b for b in ALL if b.language in ("sh", "console")]
SHELL_PAGES = sorted({b.path for b in SHELL_BLOCKS})
#: The pages with a block that runs here (one not marked).
RUN_PAGES = sorted({b.path for b in SHELL_BLOCKS if not b.marks})


def page_commands(page: Path) -> list[tuple[Block, str]]:
    return [(b, c) for b in ALL if b.path == page and b.language in ("sh", "console")
            for c in commands(b)]


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT)))
                                  for p in SHELL_PAGES])
def test_every_shell_command_names_what_is_there(page: Path) -> None:
    """Each command, in the folder a reader is in by then (the checkout's root, then where
    the page's ``cd`` took them): the scripts it runs and the files it names exist, the
    Makefile has its target, a server started before other commands lets go of the
    terminal; the commands of a marked block that are otel_jax's parse with its parsers, and
    its ``pip install`` names what can be installed."""
    folder = ROOT
    targets = makefile_targets()
    found = page_commands(page)
    for i, (block, command) in enumerate(found):
        env, words = words_of(command)
        where = f"{block.id}: `{command}` (in {folder.relative_to(ROOT) or '.'})"
        if words[:1] == ["cd"]:
            folder = (folder / words[1]).resolve()
            assert folder.is_dir() and folder.is_relative_to(ROOT), where
            continue
        if words[:1] == ["make"]:
            assert folder == ROOT and set(words[1:]) <= targets, where
            continue
        script = script_of(words)
        if script is not None:
            assert (folder / script).is_file(), f"{where}: no {script} there"
        for w, flag in zip(words[1:], words):
            if flag in ("-f", "--file") and words[0] == "docker":
                assert (folder / w).is_file(), f"{where}: no {w} there"
        if HOLDS_TERMINAL.match(" ".join(words)) and i < len(found) - 1:
            assert {"-d", "--detach"} & set(words), (
                f"{where}: it holds the terminal, and the page goes on: start it with -d")
        assert not words[0].startswith(".venv"), (
            f"{where}: a reader has what the install section made (`python`, `otel-jax`), "
            "not this checkout's test environments")
        if block.marks:
            args = otel_jax_args(words)
            if args is not None:
                parses(args)
            if "needs-install" in block.marks and words[:2] == ["pip", "install"]:
                check_installable(words[2:], block)
        else:
            assert otel_jax_args(words) is not None or script is not None, (
                f"{where}: neither otel_jax's command line nor a Python program: mark the "
                "block (needs-server, needs-install)")


def page_script(page: Path) -> str:
    """The page's shell blocks as a reader types them, in order: an unmarked block as it is
    written; of a marked block (not run here) its ``cd``s, so that the next block runs in
    the folder the reader is in."""
    parts = ["set -e"]
    for block in (b for b in ALL if b.path == page and b.language in ("sh", "console")):
        parts.append(f"# {block.id}")
        if block.marks:
            parts += [c for c in commands(block) if words_of(c)[1][:1] == ["cd"]]
        else:
            parts.append("\n".join(command_lines(block)))
    return "\n".join(parts) + "\n"


def fresh_clone(into: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), as a clone has them."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, text=True)
    if listed.returncode == 0:
        names = [n for n in listed.stdout.split("\0") if n]
    else:  # not a git checkout (an unpacked sdist): its files, less what a build made
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                 and not re.match(r"(\.venv|\.git|build|dist|test-output|\.pytest_cache)",
                                  str(p.relative_to(ROOT))) and "__pycache__" not in p.parts]
    for name in names:
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def installed_commands(into: Path) -> Path:
    """``python`` and ``otel-jax`` as the README's install section leaves them: this
    interpreter (its otel_jax: the one ``PYTHONPATH`` names first)."""
    into.mkdir()
    for name, run in (("python", ""), ("python3", ""), ("otel-jax", " -m otel_jax")):
        shim = into / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)}{run} "$@"\n')
        shim.chmod(0o755)
    return into


@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT)))
                                  for p in RUN_PAGES])
def test_each_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    """The page's commands, run by one fresh shell in a fresh copy of the checkout, in the
    order a reader meets them: each exits 0 with only what the page (and the install section
    before it) made. ``make TARGET`` is checked, not run (``make test`` runs this)."""
    script = page_script(page)
    clone = fresh_clone(tmp_path / "otel_jax")
    bin_ = installed_commands(tmp_path / "bin")
    make = ("make() { for t in \"$@\"; do grep -q \"^$t:\" Makefile || "
            "{ echo \"make: no target $t\" >&2; return 2; }; done; }\n")
    env = program_env(PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = pythonpath(clone)
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", make + script], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, (
        f"{page.relative_to(ROOT)}, run as written, exits {proc.returncode}:\n{script}\n"
        f"{proc.stderr[-3000:]}")


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
