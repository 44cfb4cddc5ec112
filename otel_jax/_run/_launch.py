"""``otel-jax run [options] [--] python script.py args…``: the command (see :mod:`otel_jax._run`).

Also ``otel-jax run script.py args…`` (run with this Python), ``otel-jax run -m module
args…`` and ``otel-jax run some-console-script args…``. The options before the program
are ``install()``'s (those with an ``OTEL_JAX_*`` variable, as flags that set it) and the
command's own (``--summary``, ``--html``); everything from the program on is the
program's, untouched.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from .._core._terminal import printable
from .._core._vocab import LEDGER_ENV, SCRUB_ENV, RunEnv

SUMMARY_MODES = ("auto", "always", "never")
#: ``python``, ``python3``, ``python3.12``, ``pythonw``: run as given, not as a script.
_PYTHON = re.compile(r"python(w)?(\d+(\.\d+)*)?(\.exe)?$")
_BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")

#: Options read where they are used (no parse at install()), given as flags all the same.
_USED_WHERE_READ = {
    "scrub": ("off|hidden", SCRUB_ENV),
    "ledger_path": ("PATH|off", LEDGER_ENV),
}


def _accepts() -> dict[str, str]:
    """What each option's flag accepts, as ``--help`` says it (the choices are the ones its
    check holds; tests/test_run.py checks that every flag has its line)."""
    from .._emit._console import LOG_FORMATS
    from .._emit._logs import LOG_OUTPUTS
    from .._emit._spans import EAGER_OP_SPANS
    from .._fleet._ranks import DEFAULT_TIMEOUT_S, ON_DIVERGENCE
    from .._pipeline._history import DEFAULT_MAX_FUNCTIONS
    from .._pipeline._policy import ON_RECOMPILE, STORM_THRESHOLD

    def one_of(choices: Sequence[str], default: str) -> str:
        return f"{'|'.join(choices)} (default {default})"

    return {
        "log_output": f"where the JSON lines go: {'|'.join(LOG_OUTPUTS)}|none "
                      "(default stderr)",
        "log_format": "how they read: " + one_of(LOG_FORMATS, "auto: console lines on a "
                                                              "terminal, JSON elsewhere"),
        "log_level": one_of(("debug", "info", "warning"), "info; debug adds eager op "
                                                          "compiles"),
        "prometheus_port": "serve a Prometheus scrape endpoint on PORT (0: a free one)",
        "storm_threshold": f"recompiles of one function before the storm warning, an "
                           f"int >= 1 (default {STORM_THRESHOLD})",
        "warmup_steps": "otel_jax.step() calls before warm-up ends, an int >= 0 "
                        "(default none)",
        "on_recompile": "a recompile after warm-up: " + one_of(ON_RECOMPILE, "log"),
        "scrub": "off (no scrubbing) or hidden (no static values); default the default "
                 "rules",
        "on_divergence": "ranks that compiled different programs: "
                         + one_of(ON_DIVERGENCE, "log"),
        "divergence_timeout_s": f"seconds other ranks may take to compile the same, > 0 "
                                f"and <= 3600 (default {DEFAULT_TIMEOUT_S:g})",
        "rank_local": "functions compiled by some ranks only, comma-separated fnmatch "
                      "patterns (evaluate,*.log_images)",
        "ledger_path": "the persistent cache's compile ledger: a file, or off (default "
                       "beside the cache)",
        "eager_op_spans": "spans of eager op compiles: " + one_of(EAGER_OP_SPANS, "nested"),
        "emit_in_background": "1|0: make telemetry off the compiling thread (default 1)",
        "hazards": "1|0: name the recompiles a compile shows are coming (default 1)",
        "max_functions": f"functions whose compile detail is kept, an int >= 1, the least "
                         f"recently compiled dropped first (default {DEFAULT_MAX_FUNCTIONS})",
        "programs": "a folder to keep each distinct lowered program in, once (default "
                    "none: nothing of a program leaves the process)",
    }


def _option_flags() -> list[tuple[str, str, str, Any]]:
    """(flag, variable, metavar, parse-and-check or None) for each option with a variable."""
    from .._setup._options import PROMETHEUS_PORT_ENV, InstallOptions

    out: list[tuple[str, str, str, Any]] = []
    for f in dataclasses.fields(InstallOptions):
        env, parse, check = f.metadata["env"], f.metadata["parse"], f.metadata["check"]
        flag = "--" + f.name.replace("_", "-")
        if f.name in _USED_WHERE_READ:
            metavar, env = _USED_WHERE_READ[f.name]
            out.append(("--ledger" if f.name == "ledger_path" else flag, env, metavar, None))
        elif f.name == "prometheus_port":
            out.append((flag, PROMETHEUS_PORT_ENV, "PORT",
                        lambda raw: _port(raw)))
        elif env is not None and parse is not None:
            out.append((flag, env, f.name.upper(),
                        lambda raw, parse=parse, check=check: check(parse(raw))))
    return out


def _port(raw: str) -> int:
    port = int(raw)
    if not 0 <= port <= 65535:
        raise ValueError(f"not a port number: {port}")
    return port


def _parser(flags: list[tuple[str, str, str, Any]]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="otel-jax run",
        usage="otel-jax run [options] [--] (python [python options] script.py | script.py "
              "| -m module | command) [args ...]",
        description=(
            "Run a Python program with otel_jax installed before its first line, with no "
            "change to its code: in its own process (same sys.argv, __main__, signals and "
            "exit status) and in every Python process it starts with the same environment. "
            "At exit the per-function summary of `otel-jax report` goes to stderr when "
            "something recompiled."),
        epilog=("Each install() option above sets the variable in its brackets, which "
                "install() reads (docs/configuration.md in otel_jax's repository); "
                "variables already set apply as well. OpenTelemetry's own OTEL_* "
                "configuration applies as without the command."))
    parser.add_argument("--summary", choices=SUMMARY_MODES, default="auto",
                        help="the summary at exit: auto (default: only when something "
                             "recompiled), always, never")
    parser.add_argument("--html", metavar="PATH",
                        help="also write the HTML report of the run to PATH at exit")
    group = parser.add_argument_group("install() options")
    accepts = _accepts()
    names = {f"--{name.replace('_', '-')}": name for name in accepts} | {
        "--ledger": "ledger_path"}
    for flag, env, metavar, _ in flags:
        what = accepts.get(names.get(flag, ""), "")
        group.add_argument(flag, metavar=metavar, dest=env,
                           help=f"{what} [{env}]" if what else f"[{env}]")
    return parser


def _split(argv: Sequence[str], with_value: set[str]) -> tuple[list[str], list[str]]:
    """The command's options, and the program with its arguments (from ``--``, ``-m`` or
    the first word that is not an option)."""
    ours: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return ours, list(argv[i + 1:])
        if word == "-m" or not word.startswith("-"):
            return ours, list(argv[i:])
        ours.append(word)
        if word in with_value and i + 1 < len(argv):
            ours.append(argv[i + 1])
            i += 1
        i += 1
    return ours, []


def program_argv(words: Sequence[str]) -> tuple[str, list[str]]:
    """The executable and the argv that run the program ``words``."""
    first, rest = words[0], list(words[1:])
    if first == "-m":
        return sys.executable, [sys.executable, "-m", *rest]
    if _PYTHON.match(os.path.basename(first)):
        found = first if os.sep in first else shutil.which(first)
        if found:
            return found, [first, *rest]
    if first.endswith((".py", ".pyw")) or os.path.isfile(first) or not shutil.which(first):
        # a script (an unknown name too: Python says it cannot open it, as it would)
        return sys.executable, [sys.executable, first, *rest]
    found = shutil.which(first)
    assert found is not None
    return found, [first, *rest]


def _no_bootstrap(argv: Sequence[str]) -> str | None:
    """The option of a ``python`` command line that keeps the command's bootstrap out
    (``-E``, ``-I``: no PYTHONPATH; ``-S``: no ``site``, so no ``sitecustomize``), if any."""
    if not argv or not _PYTHON.match(os.path.basename(argv[0])):
        return None
    for word in argv[1:]:
        if word == "--" or not word.startswith("-") or word.startswith("--"):
            return None
        if word in ("-c", "-m") or word.startswith(("-c", "-m", "-W", "-X")):
            return None  # the program starts here (or an option with its value)
        for letter in word[1:]:
            if letter in "EIS":
                return f"-{letter}"
    return None


#: Options of ``python`` that take the next word as their value.
_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def program_name(argv: Sequence[str]) -> str | None:
    """The name of the program ``argv`` runs, as its own process names it
    (``_resource.program_name``): the script's stem, a directory's or a zip app's name,
    the module of ``-m`` (``pkg`` for ``pkg.__main__``), a console script's name; ``None``
    for ``-c``, ``-`` and an interactive session."""
    from .._emit._resource import path_name

    if not argv:
        return None
    if not _PYTHON.match(os.path.basename(argv[0])):
        return path_name(argv[0])  # a console script
    words = iter(argv[1:])
    for word in words:
        if word == "--":
            word = next(words, "-")
        elif word.startswith("-") and word != "-":
            if word.startswith(("-c", "-m")):
                if word.startswith("-c"):
                    return None
                module = word[2:] or next(words, "")
                return module.removesuffix(".__main__") or None
            if word in _WITH_VALUE:
                next(words, None)
            continue
        return None if word == "-" else path_name(word)
    return None


#: What the program's Python must find for the bootstrap to install otel_jax there: the
#: package and the modules it imports at once (found, not imported: a short, light check).
_NEEDED = ("otel_jax", "jax", "jaxlib", "numpy", "opentelemetry.sdk", "structlog")
#: Prints what it cannot find of its arguments (after the first, the folder that goes first
#: on the program's sys.path, or "" for none) and exits 3 if anything, in place of the
#: folder ``-c`` puts there (where this check was started, not where the program looks).
_FINDS = ("import importlib.util, sys\n"
          "if sys.path and sys.path[0] == '': del sys.path[0]\n"
          "if sys.argv[1]: sys.path.insert(0, sys.argv[1])\n"
          "def found(name):\n"
          "    try: return importlib.util.find_spec(name) is not None\n"
          "    except Exception: return False\n"
          "missing = [n for n in sys.argv[2:] if not found(n)]\n"
          "print(' '.join(missing)); sys.exit(3 if missing else 0)")


def _first_path(argv: Sequence[str]) -> str:
    """The folder Python puts first on the program's ``sys.path``: the script's own, or the
    current one for ``-m``, ``-c`` and ``-`` ("" where ``-P`` or PYTHONSAFEPATH puts none)."""
    safe = bool(os.environ.get("PYTHONSAFEPATH"))
    words = iter(argv[1:])
    for word in words:
        if word.startswith("--") and word != "--":
            if word in _WITH_VALUE:
                next(words, None)
            continue
        if word.startswith("-") and word not in ("-", "--"):
            for i, letter in enumerate(word[1:]):
                if letter in "cm":
                    return "" if safe else os.getcwd()
                safe = safe or letter == "P"
                if letter in "WX":  # its value is the rest of the word, or the next one
                    if i == len(word) - 2:
                        next(words, None)
                    break
            continue
        if word == "--":
            word = next(words, "-")
        if safe:
            return ""
        return os.getcwd() if word == "-" else os.path.dirname(os.path.realpath(word))
    return "" if safe else os.getcwd()


def _lacks_otel_jax(executable: str, argv: Sequence[str], env: dict[str, str]) -> list[str]:
    """What the ``python`` the command line names (another than this one) cannot find of
    otel_jax and what it imports: then the bootstrap could install nothing there. Asked in
    a short process, boundedly, with the ``sys.path`` the program will have (wherever the
    command is started); where it cannot be told, the program runs as asked (``[]``)."""
    if not argv or not _PYTHON.match(os.path.basename(argv[0])) \
            or os.path.abspath(executable) == os.path.abspath(sys.executable):
        return []
    import subprocess

    try:
        proc = subprocess.run([executable, "-c", _FINDS, _first_path(argv), *_NEEDED],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=30, text=True)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return []
    return proc.stdout.split() if proc.returncode == 3 else []

#: The run folders' names: ``otel_jax-run-<pid of the program>-<random>``.
RUN_PREFIX = "otel_jax-run-"


def remove_stale_runs(where: str | None = None) -> list[str]:
    """Remove the run folders of this user's earlier runs whose program is gone (killed
    by a signal, where nothing of it could remove its folder); the folders removed.
    A folder whose process still runs, or whose name carries no process, stays."""
    where = where if where is not None else tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(RUN_PREFIX):
            continue
        pid = entry.name[len(RUN_PREFIX):].partition("-")[0]
        try:
            if (not pid.isdigit() or not entry.is_dir(follow_symlinks=False)
                    or entry.stat(follow_symlinks=False).st_uid != os.getuid()
                    or _alive(int(pid))):
                continue
        except (OSError, AttributeError):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def main(argv: Sequence[str]) -> int:
    """``otel-jax run``: replaces this process with the program; returns only on an error
    (2: usage, 127: the program cannot be started)."""
    flags = _option_flags()
    with_value = {"--summary", "--html"} | {flag for flag, *_ in flags}
    ours, program = _split(argv, with_value)
    parser = _parser(flags)
    try:
        args = parser.parse_args(ours)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if not program or program == ["-m"]:
        parser.print_usage(sys.stderr)
        print("otel-jax run: the program to run is missing", file=sys.stderr)
        return 2
    env = dict(os.environ)
    for flag, var, _, check in flags:
        raw = getattr(args, var)
        if raw is None:
            continue
        if check is not None:
            try:
                check(raw)
            except (ValueError, TypeError) as exc:
                parser.print_usage(sys.stderr)
                print(f"otel-jax run: {flag} {raw!r}: {exc}", file=sys.stderr)
                return 2
        env[var] = raw
    env[RunEnv.SUMMARY] = args.summary
    if args.html:
        env[RunEnv.HTML] = os.path.abspath(args.html)  # the program may change directory
    else:
        env.pop(RunEnv.HTML, None)
    executable, program_args = program_argv(program)
    refused = _no_bootstrap(program_args)
    folder: str | None = None
    if refused:
        # Decided before anything is made: the program runs as without the command, in
        # its own environment, and no run folder is left behind.
        print(f"otel-jax run: python {refused} ignores PYTHONPATH or sitecustomize: otel_jax "
              "cannot be installed in the program; it runs without it", file=sys.stderr)
        env = dict(os.environ)
    elif missing := _lacks_otel_jax(executable, program_args, dict(os.environ)):
        instead = shlex.join(["otel-jax", "run", *program[1:]])
        lacks = "" if "otel_jax" in missing else f" (it has no {', '.join(missing)})"
        print(f"otel-jax run: {program[0]} cannot import otel_jax{lacks}, so nothing is "
              f"recorded; run `{instead}` (this Python, {sys.executable}), or install "
              f"otel_jax for {program[0]}", file=sys.stderr)
        env = dict(os.environ)
    else:
        env["PYTHONPATH"] = os.pathsep.join(
            [_BOOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        remove_stale_runs()
        # named after this process, which execve makes the program's own
        folder = tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-")
        env[RunEnv.DIR] = folder
        name = program_name(program_args)
        if name:  # every process of the run is named after it (``_resource``)
            env[RunEnv.PROGRAM] = name
        else:
            env.pop(RunEnv.PROGRAM, None)
    try:
        for stream in (sys.stdout, sys.stderr):  # None where the descriptor is closed
            if stream is not None:
                stream.flush()
        os.execve(executable, program_args, env)
    except OSError as exc:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"otel-jax run: cannot run {printable(program[0])}: {exc.strerror or exc}",
              file=sys.stderr)
        return 127
    return 0  # not reached: execve replaced this process
