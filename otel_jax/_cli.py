"""The ``otel-jax`` command line: its sub-commands and where each lives.

``otel-jax report`` (:func:`otel_jax._report.main`) summarises otel_jax's JSON compile logs;
``otel-jax diff`` (:func:`otel_jax._report.diff_main`) compares two runs' logs or reports;
``otel-jax program-diff`` (:mod:`otel_jax._report._program_diff`) compares two kept
programs; ``otel-jax run`` (:func:`otel_jax._run.main`) runs a Python program with otel_jax
installed, with no change to its code. This module sits above them and is imported by no
module of the package: the console script (``pyproject.toml``) and ``python -m otel_jax``
call :func:`main`.
Each sub-command's package is imported only when that sub-command runs, so ``otel-jax report``
stays as light as the report itself (standard library and the vocabulary).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

#: A sub-command: its arguments (after its name) in, the exit status out.
Command = Callable[[Sequence[str]], int]


def _report(argv: Sequence[str]) -> int:
    from ._report import main as report

    return report(argv)


def _diff(argv: Sequence[str]) -> int:
    from ._report import diff_main

    return diff_main(argv)


def _program_diff(argv: Sequence[str]) -> int:
    from ._report import program_diff_main

    return program_diff_main(argv)


def _run(argv: Sequence[str]) -> int:
    from ._run import main as run

    return run(argv)


#: Each sub-command: its function and its one-line help.
COMMANDS: dict[str, tuple[Command, str]] = {
    "report": (_report, "summarise jax.compile log lines per function "
                        "(otel-jax report [options] app.log ...; otel-jax report --help)"),
    "diff": (_diff, "compare two runs' compiles per function, exit 1 past thresholds "
                    "(otel-jax diff [options] BASE NEW; otel-jax diff --help)"),
    "program-diff": (_program_diff, "what changed between two kept programs of a function "
                                    "(otel-jax program-diff BASE.mlir.gz NEW.mlir.gz)"),
    "run": (_run, "run a Python program with otel_jax installed, no code change "
                  "(otel-jax run [options] [--] python train.py ...; otel-jax run --help)"),
}


def _parser() -> argparse.ArgumentParser:
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="otel-jax", description="Make JAX recompilation visible: otel_jax's commands.")
    parser.add_argument("-V", "--version", action="version",
                        version=f"otel-jax {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, add_help=False, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``otel-jax`` console command; returns the exit status (that of
    the sub-command; 2 for a usage error)."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words and words[0] in COMMANDS:
        command, _ = COMMANDS[words[0]]
        return command(words[1:])
    try:  # no sub-command, --help or an unknown one: argparse says which exist
        _parser().parse_args(words)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    return 2  # not reached: a known sub-command is dispatched above
