"""The ``otel-jax diff BASE NEW`` command: its arguments, the two runs read, the diff
written, and the exit status CI reads (0: no regression past the thresholds, 1: a
regression, 2: an input that cannot be read, or a usage error).

Reading (:mod:`._read`) feeds the comparison (:mod:`._compare`), which the renderers
turn into text (:mod:`._render_text`) or one HTML page (:mod:`._render_html`, imported only for
``--format html``); this module sits on top of them.  The ``otel-jax`` command line
(:mod:`otel_jax._cli`) calls :func:`main` for its ``diff`` sub-command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._output import close_output, open_output, reader_gone
from .._text import printable
from ._compare import MATCHES, Thresholds, compare
from ._read import Unreadable, load_run
from ._render_text import render_diff_json, render_diff_markdown, render_diff_table


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {n}")
    return n


def _percent(text: str) -> float:
    """``20%`` or ``20``: twenty percent, as the ratio 0.2."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 20%)") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a percentage >= 0: {text!r}")
    return value / 100


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _positive(text: str) -> int:
    n = _count(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {n}")
    return n


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="otel-jax diff",
        description=(
            "Compare two runs' compiles per function (matched by name and file, relative "
            "to each run's program, or by name: --match): compiles and recompiles by "
            "cause kind, compile seconds (total, p50, p95), causes and hazards new in NEW, "
            "functions new or gone, steps' compile share; sorted by compile seconds "
            "gained. Exit status: 0, or 1 when NEW is past a threshold given below, 2 "
            "when an input cannot be read."),
    )
    p.add_argument("base", metavar="BASE",
                   help="the earlier run: an otel_jax log ('.gz' is decompressed) or the "
                        "output of 'otel-jax report --format json'; '-' reads stdin")
    p.add_argument("new", metavar="NEW", help="the run to compare with it, likewise")
    p.add_argument("--format", choices=("table", "json", "markdown", "html"),
                   default="table", help="output format (default: table); html is one "
                                         "self-contained page")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="write the diff to PATH instead of stdout")
    p.add_argument("--top", type=_positive, metavar="N",
                   help="show only the N functions that gained the most compile seconds "
                        "(the thresholds still read every function)")
    p.add_argument("--match", choices=MATCHES, default=MATCHES[0],
                   help="how a function of BASE is found in NEW: 'file' by name and file "
                        "(relative to each run's program), 'name' by name alone (files "
                        "renamed or moved); 'auto' (default) by file, then a function "
                        "left unmatched by its name when one function of that name is "
                        "left in each run")
    p.add_argument("--max-new-recompiles", type=_count, metavar="N",
                   help="exit 1 when the functions' recompiles gained (each function's "
                        "increase, summed; a decrease offsets nothing) exceed N")
    p.add_argument("--max-compile-time-increase", type=_percent, metavar="PCT",
                   help="exit 1 when the compile seconds of the functions in both runs "
                        "rise by more than PCT (e.g. 20%%) and by more than the floor")
    p.add_argument("--compile-time-floor", type=_seconds, default=1.0, metavar="SECONDS",
                   help="an increase of compile seconds below this never fails, whatever "
                        "its percentage: timing noise on small totals (default: 1.0)")
    p.add_argument("--max-program-growth", type=_percent, metavar="PCT",
                   help="exit 1 when a function's largest lowered program (its operations, "
                        "as the program analysis counted them) grew by more than PCT "
                        "(e.g. 20%%)")
    p.add_argument("--fail-on-new-hazards", action="store_true",
                   help="exit 1 when NEW has a hazard warning (kind and path) BASE did "
                        "not have for that function (notes are listed, never fail)")
    return p


def _run(args: argparse.Namespace) -> int:
    if args.base == args.new == "-":
        print("otel-jax diff: BASE and NEW cannot both be stdin ('-')", file=sys.stderr)
        return 2
    try:
        base = load_run(args.base, "BASE")
        new = load_run(args.new, "NEW")
    except Unreadable as exc:
        print(f"otel-jax diff: {printable(str(exc))}", file=sys.stderr)
        return 2
    diff = compare(base, new, Thresholds(
        max_new_recompiles=args.max_new_recompiles,
        max_compile_time_increase=args.max_compile_time_increase,
        compile_time_floor_s=args.compile_time_floor,
        fail_on_new_hazards=args.fail_on_new_hazards,
        max_program_growth=args.max_program_growth), args.match)
    if args.format == "html":
        from ._render_html import render_diff_html

        text = render_diff_html(diff)
    elif args.format == "json":
        text = render_diff_json(diff)
    elif args.format == "markdown":
        text = render_diff_markdown(diff, args.top)
    else:
        text = render_diff_table(diff, args.top)
    out = open_output(args.output, "diff")
    if out is None:
        return 2
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:  # piped into e.g. ``head``: the exit status still tells
        reader_gone()
    finally:
        close_output(out)
    for run, label in ((base, "BASE"), (new, "NEW")):
        if run.unread:
            print(f"otel-jax diff: {label}: {run.unread}", file=sys.stderr)
        if run.skipped:
            print(f"otel-jax diff: {label}: skipped {run.skipped} "
                  + ("lines that are not otel_jax JSON events" if run.kind == "log"
                     else "entries that are not report rows"), file=sys.stderr)
    return 1 if diff.regressed else 0


def main(argv: Sequence[str]) -> int:
    """``otel-jax diff ARGS``: the exit status (0 no regression, 1 regression past a
    threshold, 2 unreadable input or usage error, 130 interrupted)."""
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130
