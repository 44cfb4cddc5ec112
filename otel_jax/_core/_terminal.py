"""Text for a terminal: what user code named (a function, a dict key, a file) shown so that
it can neither drive the terminal nor forge lines.

Standard library only: the report reads logs where only the vocabulary is loaded.
"""

from __future__ import annotations

import re

#: Characters that must not reach a terminal raw: C0/C1 controls (ESC starts escape
#: sequences, BEL rings, newlines would inject rows), DEL, line/paragraph separators
#: and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                          "\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``, ``\\n``), so that
    names from user code or read from a log can neither drive the terminal nor add lines
    or table rows. Every message otel_jax writes to a terminal passes through here: its
    warnings, the exit summary, the command line's messages and reports."""
    return _UNPRINTABLE.sub(_escape_char, text)


def json_printable(line: str) -> str:
    """A JSON text with the characters :func:`printable` escapes written as JSON's own
    ``\\uXXXX`` escapes: the same values for a machine, and a line that, shown on a
    terminal (a log file read with ``cat``, ``log_format="json"`` on a terminal), can
    neither drive it nor show itself reordered. JSON escapes C0 controls itself; with
    ``ensure_ascii=False`` it leaves DEL, C1 controls, separators and bidirectional
    overrides raw."""
    if line.isascii() and "\x7f" not in line:
        return line
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
