"""The log lines as a person reads them in a terminal: one short line per event.

``install(log_format="console")`` (and ``"auto"``, the default, when the output is a
terminal) renders each event the way structlog's ``ConsoleRenderer`` does for a person:
the time, the level in brackets, then what happened, cause first. A compile is its
function and count, its cause, the calling line and its seconds; a hazard is the warning
it is, with its fix. The JSON lines (``render`` in :mod:`._logs`) stay the format for
machines: the same fields, every one of them; this line is a reading of them, never
parsed back (``otel-jax report`` reads the JSON lines of ``otel-jax run``'s files).

Colors only on a terminal, and never where ``NO_COLOR`` is set (https://no-color.org).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, Literal, get_args

from .._core._terminal import printable
from .._core._vocab import (
    EVENT_COMPILE,
    EVENT_DIVERGENCE,
    EVENT_HAZARD,
    EVENT_STEP,
    EVENT_STORM,
    NO_COLOR_ENV,
    CauseKind,
    Field,
)

#: ``install(log_format=...)``: ``"auto"`` console lines on a terminal, JSON elsewhere.
LogFormat = Literal["auto", "json", "console"]
LOG_FORMATS: Final[tuple[str, ...]] = get_args(LogFormat)
#: A line's fields as the JSON line has them.
_Fields = Mapping[str, Any]

_RESET = "\033[0m"
_BRIGHT = "\033[1m"
_DIM = "\033[2m"
_LEVEL_STYLES: Final = {"debug": "\033[34m", "info": "\033[32m", "warning": "\033[33m",
                        "error": "\033[31m"}
#: The widest level name, so that the events line up (as structlog pads them).
_LEVEL_WIDTH = max(map(len, _LEVEL_STYLES))


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (never raises: a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def wants_console(log_format: str, stream: Any) -> bool:
    """Whether lines written to ``stream`` are console lines under ``log_format``."""
    return log_format == "console" or (log_format == "auto" and is_terminal(stream))


def wants_colors(stream: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Colors: only on a terminal, and not where ``NO_COLOR`` is set to anything."""
    environ = os.environ if environ is None else environ
    return not environ.get(NO_COLOR_ENV) and is_terminal(stream)


class _Style:
    """The few styles of a line; empty strings where there are no colors."""

    def __init__(self, colors: bool) -> None:
        self.colors = colors

    def __call__(self, code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if self.colors and text else text


def _where(callsite: Any, cwd: str) -> str:
    """The calling line, relative to the working directory when it is under it."""
    text = str(callsite or "")
    if cwd and text.startswith(cwd + os.sep):
        return text[len(cwd) + 1:]
    return text


#: How much of a cause or a fix a line shows (the JSON line has it whole).
_SHORT = 160


def _short(value: Any, limit: int = _SHORT) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _seconds(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, (int, float)) else ""


def _compile(f: _Fields, style: _Style, cwd: str) -> str:
    kind = f.get(Field.CAUSE_KIND)
    if kind == CauseKind.FIRST_COMPILE.value:
        what = "first compile"
    else:
        what = f"{kind}: {_short(f.get(Field.CAUSE))}"
    if f.get(Field.AFTER_WARMUP):
        what += " (after warm-up)"
    if f.get(Field.MEMORY_CHANGE):
        what += f"; {f[Field.MEMORY_CHANGE]}"
    if f.get(Field.PERSISTENT_CACHE_HIT):
        what += "; from the persistent cache"
    what += _program(f.get(Field.PROGRAM_FINDINGS), cwd)
    return _join(style(_BRIGHT, f"{f.get(Field.FUNCTION)} #{f.get(Field.COUNT)}"), what,
                 style(_DIM, _where(f.get(Field.CALLSITE), cwd)),
                 _seconds(f.get(Field.COMPILE_S)))


#: How much of a hazard's text or fix a line shows: the whole of what the rules say (the
#: line is where a terminal reads it: the OtelJaxWarning at the same call is left to it).
_HAZARD_TEXT = 600


def _program(findings: Any, cwd: str) -> str:
    # A compile whose program is large for a reason worth a warning says it in full, where
    # and the fix: as for hazards, this line is where a terminal reads it (the warning at
    # the same line is left to it).
    for finding in findings if isinstance(findings, list) else ():
        if isinstance(finding, dict) and finding.get("level") == "warning":
            where = _where(finding.get("line"), cwd)
            text = finding.get("text")
            return (f"; large program ({finding.get('kind')})"
                    + (f" at {where}" if where else "")
                    + (f": {_short(text, _HAZARD_TEXT)}" if text else "")
                    + f". Fix: {_short(finding.get('hint'), _HAZARD_TEXT)}.")
    return ""


def _hazard(f: _Fields, style: _Style, cwd: str) -> str:
    # The hazard in full, as its OtelJaxWarning words it: on a terminal where Python would
    # write that warning too, this line is the one place it is said.
    hazard, hint = f.get(Field.HAZARD), f.get(Field.HINT)
    text = f"({f.get(Field.HAZARD_KIND)})" + (f": {_short(hazard, _HAZARD_TEXT)}" if hazard
                                              else "")
    if hint:
        text += f". Fix: {_short(hint, _HAZARD_TEXT)}."
    return _join(style(_BRIGHT, f"{f.get(Field.FUNCTION)} will compile again") + " " + text,
                 style(_DIM, _where(f.get(Field.CALLSITE), cwd)))


def _storm(f: _Fields, style: _Style, cwd: str) -> str:
    causes = f.get(Field.CAUSES) or {}
    counts = ", ".join(f"{kind} x{n}" for kind, n in causes.items()) if isinstance(
        causes, dict) else ""
    hint = f.get(Field.HINT)
    return _join(style(_BRIGHT, f"{f.get(Field.FUNCTION)} recompile storm"),
                 f"{f.get(Field.RECOMPILES)} recompiles (threshold {f.get(Field.THRESHOLD)})"
                 + (f": {counts}" if counts else "") + (f"; hint: {hint}" if hint else ""))


def _divergence(f: _Fields, style: _Style, cwd: str) -> str:
    return _join(style(_BRIGHT, f"{f.get(Field.FUNCTION)} #{f.get(Field.COUNT)} ranks differ"),
                 f"{f.get(Field.DIVERGENCE_KIND)}: {f.get(Field.DIVERGENCE)}")


def _clean(text: str) -> str:
    """``text`` on one line, its control and format characters shown, not sent to the
    terminal: a newline, an escape sequence, a right-to-left override that would show
    the rest of the line reversed (:func:`printable`)."""
    return printable(text)


def _join(*parts: str) -> str:
    return "  ".join(p for p in parts if p)


#: How each event reads; an event not here is its name and its fields, as structlog does.
_EVENTS: Final[dict[str, Callable[[_Fields, _Style, str], str]]] = {
    EVENT_COMPILE: _compile, EVENT_HAZARD: _hazard, EVENT_STORM: _storm,
    EVENT_DIVERGENCE: _divergence,
}
#: Events a person at a terminal is not shown: each step's line repeats its compiles' (the
#: step spans, the metrics, the JSON lines and the summary at exit keep them).
QUIET_EVENTS: Final = frozenset({EVENT_STEP})


def render_console(stamp: float, level: str, event: str, fields: _Fields, *,
                   colors: bool = False, cwd: str | None = None) -> str:
    """One console line (with its newline): ``12:03:04 [info   ] train_step #2  weak_type:
    lr: f32[] (weak) -> f32[]  train.py:110  1.59 s``; ``""`` for an event of
    ``QUIET_EVENTS``."""
    if event in QUIET_EVENTS:
        return ""
    style = _Style(colors)
    fields = {k: _clean(v) if isinstance(v, str) else v for k, v in fields.items()}
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = ""
    body = _EVENTS.get(event)
    text = body(fields, style, cwd) if body is not None else _join(
        style(_BRIGHT, _clean(event)), _clean(" ".join(f"{k}={v}" for k, v in fields.items())))
    when = datetime.fromtimestamp(stamp).strftime("%H:%M:%S")
    tag = style(_LEVEL_STYLES.get(level, ""), f"{level:<{_LEVEL_WIDTH}}")
    return f"{style(_DIM, when)} [{tag}] {text}\n"
