"""Where ``otel-jax report`` and ``otel-jax diff`` write: standard output or a file, and a
reader that went away (``| head``) ending the output quietly, as other command-line tools
do."""

from __future__ import annotations

import os
import sys
from typing import IO

from ._text import printable


def open_output(path: str | None, command: str) -> IO[str] | None:
    """``path`` opened for writing, or standard output without one; ``None`` (one line on
    stderr, naming ``command``, says why) where it cannot be opened."""
    if not path:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"otel-jax {command}: cannot write {printable(path)}: {exc.strerror or exc}",
              file=sys.stderr)
        return None


def close_output(out: IO[str]) -> None:
    """Close what :func:`open_output` opened (standard output stays open)."""
    if out is not sys.stdout:
        out.close()


def reader_gone() -> None:
    """Standard output's reader went away: what is still written goes nowhere, and no
    second ``BrokenPipeError`` comes at the interpreter's exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
