"""``otel-jax program-diff BASE NEW``: what changed between two kept programs of one
function (``install(programs=DIR)``): the operations gained or lost by kind, then the
changed regions of the program text in context, source locations stripped (they differ
with every edit above a line, and say nothing of the program).

Bounded: each program is read up to ``MAX_READ`` characters, and the diff prints at most
``--max-lines`` lines. Standard library only, like the report.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import re
import sys
from collections import Counter
from collections.abc import Sequence

from ._text import printable

#: The most characters of a program read (a kept program is a few MiB at most; one of a
#: million operations is cut here, and said so).
MAX_READ = 64 << 20
_OP = re.compile(r"=\s*\"?([a-z_]+\.[a-z_0-9.]+)\"?|^\s*\"?([a-z_]+\.[a-z_0-9.]+)\"?[\s(]")
_LOC_ALIAS = re.compile(r"^#loc[0-9]*\s*=")
_SSA = re.compile(r"%(?:cst_?|c_?)?[0-9]+")


def _read(path: str) -> tuple[str, bool]:
    """The program's text, and whether it was cut at ``MAX_READ``."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        text = f.read(MAX_READ + 1)
    return text[:MAX_READ], len(text) > MAX_READ


def strip_locations(text: str) -> list[str]:
    """The program's lines without source locations: the ``#loc`` alias lines dropped and
    each ``loc(...)`` an operation carries removed (parentheses balanced)."""
    out = []
    for line in text.splitlines():
        if _LOC_ALIAS.match(line):
            continue
        out.append(_drop_locs(line).rstrip())
    return out


def _drop_locs(line: str) -> str:
    parts = []
    i = 0
    while True:
        j = line.find("loc(", i)
        if j < 0 or (j > 0 and (line[j - 1].isalnum() or line[j - 1] in "_#")):
            if j < 0:
                parts.append(line[i:])
                return "".join(parts)
            parts.append(line[i:j + 4])
            i = j + 4
            continue
        parts.append(line[i:j].rstrip())
        depth, k, quoted = 0, j + 3, False
        while k < len(line):
            c = line[k]
            if c == '"' and line[k - 1] != "\\":
                quoted = not quoted
            elif not quoted and c == "(":
                depth += 1
            elif not quoted and c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def op_counts(lines: list[str]) -> Counter[str]:
    """Operations by name (``stablehlo.add``), as the program text writes them."""
    counts: Counter[str] = Counter()
    for line in lines:
        match = _OP.search(line)
        if match:
            counts[match.group(1) or match.group(2)] += 1
    return counts


def render(base: str, new: str, base_lines: list[str], new_lines: list[str],
           context: int = 3, max_lines: int = 400) -> str:
    """The operations gained or lost by kind, then a unified diff of the texts (SSA value
    numbers written as ``%_``: an operation added above renumbers every one below)."""
    before, after = op_counts(base_lines), op_counts(new_lines)
    out = [f"BASE {base}: {sum(before.values()):,} operations",
           f"NEW  {new}: {sum(after.values()):,} operations"]
    changed = sorted(((after[k] - before[k], k) for k in before.keys() | after.keys()
                      if after[k] != before[k]), key=lambda t: (-abs(t[0]), t[1]))
    if changed:
        out.append("operations by kind:")
        out += [f"  {k} {before[k]:,} -> {after[k]:,} ({d:+,})" for d, k in changed[:20]]
        if len(changed) > 20:
            out.append(f"  ({len(changed) - 20} more kinds changed)")
    diff = list(difflib.unified_diff(
        [_SSA.sub("%_", x) for x in base_lines], [_SSA.sub("%_", x) for x in new_lines],
        "BASE", "NEW", n=context, lineterm=""))
    if not diff:
        out.append("the programs are the same, locations aside")
    else:
        out += diff[:max_lines]
        if len(diff) > max_lines:
            out.append(f"... {len(diff) - max_lines:,} more lines of diff "
                       "(--max-lines to see more)")
    return "\n".join(printable(x) for x in out) + "\n"


def main(argv: Sequence[str]) -> int:
    """``otel-jax program-diff BASE NEW``: 0, or 2 when a program cannot be read."""
    p = argparse.ArgumentParser(
        prog="otel-jax program-diff",
        description="Compare two programs otel_jax kept (install(programs=DIR)): the "
                    "operations gained or lost by kind, then the changed regions in "
                    "context, source locations stripped.")
    p.add_argument("base", metavar="BASE", help="a kept program (.mlir.gz or text)")
    p.add_argument("new", metavar="NEW", help="the program to compare with it")
    p.add_argument("--context", type=int, default=3, metavar="N",
                   help="lines of context around each change (default 3)")
    p.add_argument("--max-lines", type=int, default=400, metavar="N",
                   help="the most lines of diff printed (default 400)")
    try:
        args = p.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    texts = []
    for path in (args.base, args.new):
        try:
            text, cut = _read(path)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            print(f"otel-jax program-diff: cannot read {printable(path)} "
                  f"({type(exc).__name__})", file=sys.stderr)
            return 2
        if cut:
            print(f"otel-jax program-diff: {printable(path)}: read its first "
                  f"{MAX_READ:,} characters", file=sys.stderr)
        texts.append(strip_locations(text))
    try:
        sys.stdout.write(render(args.base, args.new, texts[0], texts[1],
                                max(0, args.context), max(1, args.max_lines)))
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0
