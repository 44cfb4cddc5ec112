"""Why a compile is slow: the lowered program's size by the user's source line, and the
patterns an XLA engineer reading it would name (:func:`facts`, :func:`findings`).

Read off the walk of the lowered program (``_capture._jax._program_walk``) where the
record is made, off the compiling thread by default. Each pattern is said only where the
program shows it, and only for a program large enough to matter:

- ``unrolled_loop``: at least ``UNROLL_SHARE`` of a program of at least ``NOTE_OPS``
  operations is code repeated: operations
  at one place (same source chain, same name stack) repeating ``MIN_REPEAT`` times or
  more, a Python loop (a ``for``, a comprehension over layers) that tracing unrolled,
  once per pass, or a ``scan`` unrolled (the line calls ``scan(``, or the repeated
  operations sit in a loop XLA runs). Its passes: the most times one operation repeats.
- ``captured_constant``: a constant of at least ``CONSTANT_BYTES`` baked into the program
  (an array captured from the enclosing scope, which JAX to 0.10 inlines; 0.12 passes it
  as an argument of its own): it is part of the program text XLA parses, hashes and
  compiles, and of every program that captures it.
- ``program_growth``: the program grew by at least ``GROWTH_RATIO`` and ``NOTE_OPS``
  operations since the compile its cause is compared with, and by which lines.

A finding is a warning (and a Python warning) where the cost is material: a program of at
least ``WARN_OPS`` operations (a constant: always, past its threshold); else a note.
Decided by the program alone, never by its compile's seconds, which grow with how busy
the machine is: the same program gets the same words on every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .._capture._jax._program_walk import Constant, ProgramCost, ProgramWalk
from .._core._units import human_bytes

#: Below this many operations a program is small: no pattern is said.
NOTE_OPS = 1_000
#: A finding is a warning from this many operations on.
WARN_OPS = 10_000
#: One line makes at least this share of the program: it is what makes it large.
UNROLL_SHARE = 0.5
#: A constant this large baked into the program is named.
CONSTANT_BYTES = 1 << 20
#: The program grew by this ratio (and ``NOTE_OPS`` operations) since the compared compile.
GROWTH_RATIO = 1.25
#: Lines kept per program, most operations first (the top ones said; all compared later).
MAX_LINES = 16
#: Lines said as the program's top lines.
TOP_LINES = 3

UNROLLED_LOOP = "unrolled_loop"
CAPTURED_CONSTANT = "captured_constant"
PROGRAM_GROWTH = "program_growth"


@dataclass(frozen=True, slots=True)
class LineOps:
    """One of the user's lines and what of the program it makes."""

    line: str  # ``file:line``
    ops: int
    repeated: int  # of ``ops``, those repeating ``MIN_REPEAT`` times or more at one place
    passes: int  # the most times one operation repeats there (a loop's passes)
    op: str  # that operation's name (``func.call``: a function called each pass)
    in_loop: int  # of ``ops``, those inside a loop XLA runs (a scan's body)


@dataclass(frozen=True, slots=True)
class ProgramFacts:
    """The lowered program's size, by line, its constants and XLA's cost analysis."""

    ops: int
    complete: bool  # False: the program has at least ``ops`` (the walk stopped)
    lines: tuple[LineOps, ...]  # most operations first, ``MAX_LINES`` at most
    constant_bytes: int
    constants: tuple[Constant, ...]  # the largest, largest first
    flops: float | None = None
    bytes_accessed: float | None = None

    def share(self, line: LineOps) -> float:
        return line.ops / self.ops if self.ops else 0.0

    @property
    def top_lines(self) -> tuple[LineOps, ...]:
        return self.lines[:TOP_LINES]

    def ops_text(self) -> str:
        return f"{'at least ' if not self.complete else ''}{self.ops:,}"

    def top_lines_text(self, cwd: str = "") -> str:
        """``a.py:12 96% (24,000 ops), a.py:20 2% (500 ops)``."""
        return ", ".join(f"{short(t.line, cwd)} {self.share(t):.0%} ({t.ops:,} ops)"
                         for t in self.top_lines)

    def constants_text(self, cwd: str = "") -> str:
        return ", ".join(f"{c.type} {human_bytes(c.nbytes)}"
                         + (f" at {short(c.line, cwd)}" if c.line else "")
                         for c in self.constants[:TOP_LINES])


@dataclass(frozen=True, slots=True)
class ProgramFinding:
    """A pattern the program shows: what makes it large, where, and the fix."""

    kind: str  # ``unrolled_loop``, ``captured_constant``, ``program_growth``
    line: str  # the user's ``file:line`` it is at ("" when none)
    text: str
    hint: str
    warn: bool = True  # the cost is material: a warning; ``False``: a note

    @property
    def level(self) -> str:
        return "warning" if self.warn else "info"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "text": self.text, "hint": self.hint,
                "level": self.level}


def short(line: str, cwd: str = "") -> str:
    """A line relative to ``cwd`` when under it (the words; the fields keep it whole)."""
    if cwd and line.startswith(cwd + os.sep):
        return line[len(cwd) + 1:]
    return line


def facts(walk: ProgramWalk, cost: ProgramCost | None) -> ProgramFacts:
    """What is kept of one walk: the lines making the most, the constants, the cost."""
    lines = sorted(((n, line) for line, n in walk.by_line.items() if line),
                   key=lambda t: (-t[0], t[1]))[:MAX_LINES]
    return ProgramFacts(
        ops=walk.ops, complete=walk.complete,
        lines=tuple(LineOps(line, n, *walk.repeats.get(line, (0, 1, "")),
                            walk.in_loops.get(line, 0)) for n, line in lines),
        constant_bytes=walk.constant_bytes, constants=walk.constants,
        flops=cost.flops if cost is not None else None,
        bytes_accessed=cost.bytes_accessed if cost is not None else None)


def findings(program: ProgramFacts, earlier: ProgramFacts | None = None,
             compared_with: int | None = None, cwd: str = "") -> tuple[ProgramFinding, ...]:
    """The patterns ``program`` shows (``earlier``: the program of compile
    ``compared_with`` of the same function, to say what grew)."""
    material = program.ops >= WARN_OPS
    found: list[ProgramFinding] = []
    repeated = sum(t.repeated for t in program.lines)
    large = program.ops >= NOTE_OPS
    if large and repeated >= program.ops * UNROLL_SHARE:
        found.append(_unrolled(program, material, cwd))
    for constant in program.constants:
        if constant.nbytes < CONSTANT_BYTES:
            break
        where = f" at {short(constant.line, cwd)}" if constant.line else ""
        found.append(ProgramFinding(
            CAPTURED_CONSTANT, constant.line,
            f"a {constant.type} constant of {human_bytes(constant.nbytes)} is baked into "
            f"the program{where}: an array captured from the enclosing scope becomes part "
            "of the program text XLA parses and compiles, and is compiled again into every "
            "program that captures it",
            "pass it to the jitted function as an argument"))
        break  # the largest says it; the others are in the program's constants
    if earlier is not None and compared_with is not None:
        grown = _growth(program, earlier, compared_with, material, cwd)
        if grown is not None:
            found.append(grown)
    return tuple(found)


def _unrolled(program: ProgramFacts, material: bool, cwd: str) -> ProgramFinding:
    lines = sorted((t for t in program.lines if t.repeated),
                   key=lambda t: (-t.repeated, t.line))
    top = lines[0]
    where = ", ".join(f"{short(t.line, cwd)} {t.repeated / program.ops:.0%}"
                      for t in lines[:TOP_LINES])
    repeated = sum(t.repeated for t in program.lines)
    said = (f"{repeated / program.ops:.0%} of the program's {program.ops_text()} operations "
            f"are the same code repeated, up to {top.passes:,} times ({where})")
    if top.in_loop * 2 >= top.ops or _calls_scan(top.line):
        return ProgramFinding(
            UNROLLED_LOOP, top.line,
            said + ": a scan unrolled there, its body copied once per unrolled step",
            "give the scan a small unroll (scan(..., unroll=k) with k of 1 to 8): XLA "
            "then compiles the body a few times and runs it in a loop", warn=material)
    called = " (a function called each pass)" if top.op == "func.call" else ""
    return ProgramFinding(
        UNROLLED_LOOP, top.line,
        said + f": a Python loop unrolled by tracing, about {top.passes:,} passes{called}, "
        "each compiled as new code",
        "write the loop as lax.fori_loop or lax.scan (over stacked parameters, for layers): "
        "its body is compiled once; scan(..., unroll=k) unrolls k passes where that runs "
        "faster", warn=material)


def _calls_scan(line: str) -> bool:
    """Whether the source line calls a scan (``lax.scan(...)``, ``jax.lax.scan(...)``):
    read where the file is (a program run with ``python -c`` has no source)."""
    import linecache

    file, _, number = line.rpartition(":")
    if not number.isdigit():
        return False
    return "scan(" in linecache.getline(file, int(number))


def _growth(program: ProgramFacts, earlier: ProgramFacts, compared_with: int,
            material: bool, cwd: str) -> ProgramFinding | None:
    if program.ops - earlier.ops < NOTE_OPS or program.ops < earlier.ops * GROWTH_RATIO:
        return None
    before = {t.line: t.ops for t in earlier.lines}
    grew = sorted(((t.ops - before.get(t.line, 0), t.line) for t in program.lines
                   if t.ops > before.get(t.line, 0)), key=lambda g: (-g[0], g[1]))[:TOP_LINES]
    lines = ", ".join(f"{short(line, cwd)} +{n:,}" for n, line in grew)
    return ProgramFinding(
        PROGRAM_GROWTH, grew[0][1] if grew else "",
        f"the program grew from {earlier.ops_text()} to {program.ops_text()} operations "
        f"since compile #{compared_with}" + (f": {lines}" if lines else ""),
        "a value that sets how many passes a Python loop makes (a static argument, a "
        "shape) changed between the two compiles: a traced bound (lax.fori_loop) keeps "
        "one program", warn=material)
