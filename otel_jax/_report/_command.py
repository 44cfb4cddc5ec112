"""The ``otel-jax report`` command: its arguments, the files read, the report written.

Reading (:mod:`._read`) feeds the aggregate (:mod:`._aggregate`), which the renderers
turn into text (:mod:`._text`) or one HTML page (:mod:`._html`, imported only for
``--format html``); this module sits on top of them all. The ``otel-jax`` command line
(:mod:`otel_jax._cli`) calls :func:`main` for its ``report`` sub-command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._aggregate import DEFAULT_MAX_FUNCTIONS, Report
from ._output import close_output, open_output, reader_gone
from ._read import Decompressed, open_log, read_errors
from ._text import printable, render, render_persistent_cache, render_ranks, render_steps


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {n}")
    return n


def _parser() -> argparse.ArgumentParser:
    rep = argparse.ArgumentParser(
        prog="otel-jax report",
        description=(
            "Summarise otel_jax JSON log lines (one object per line) per "
            "function: compiles, recompiles, compile seconds, p95, seconds "
            "lost to recompiles, and recompile causes with their most "
            "frequent diff and hint. Rows are sorted by total compile "
            "seconds. Reads in a streaming way; memory does not grow with "
            "the log's length."
        ),
    )
    rep.add_argument("files", nargs="*", default=["-"], metavar="file",
                     help="log file ('.gz' is decompressed); '-' or omitted reads stdin. "
                          "Several files (the logs of the ranks of a multi-process job) "
                          "are summarised together, divergences between ranks first")
    rep.add_argument("--format", choices=("table", "json", "markdown", "html"),
                     default="table",
                     help="output format (default: table); html is one self-contained page "
                          "(timeline, tables, every kept compile's diff; charts need the "
                          "extra otel_jax[report])")
    rep.add_argument("-o", "--output", metavar="PATH",
                     help="write the report to PATH instead of stdout")
    rep.add_argument("--top", type=_positive_int, metavar="N",
                     help="show only the N functions with the most compile seconds "
                          "(the (other)/(eager ops) aggregate rows are still shown)")
    rep.add_argument("--function", action="append", metavar="NAME", dest="functions",
                     help="only this function (repeatable); '(eager ops)' selects "
                          "eager-op compiles")
    rep.add_argument("--include-eager", action="store_true",
                     help="list eager-op compiles as rows per op instead of one "
                          "summary of them (the '(eager ops)' row in JSON)")
    rep.add_argument("--max-functions", type=_positive_int, default=DEFAULT_MAX_FUNCTIONS,
                     metavar="N",
                     help="distinct rows kept before merging the rest into '(other)' "
                          f"(default: {DEFAULT_MAX_FUNCTIONS})")
    return rep


def _run_report(args: argparse.Namespace) -> int:
    kind: type[Report] = Report
    if args.format == "html":
        from ._page_data import HtmlReport

        kind = HtmlReport
    report = kind(include_eager=args.include_eager, functions=args.functions,
                  max_functions=args.max_functions)
    status = 0
    for path in args.files or ["-"]:
        status = max(status, _feed(report, path))
        if status == 130:
            break
    if status == 2:
        return 1

    rows = report.rows(args.top)
    out = open_output(args.output, "report")
    if out is None:
        return 1
    try:
        if args.format == "html":
            from ._html import render_html

            out.write(render_html(report, rows, sources=args.files))  # type: ignore[arg-type]
        else:
            width = None
            if args.format == "table" and out.isatty():
                import shutil

                width = shutil.get_terminal_size().columns
            if args.format != "json":
                out.write(render_ranks(report, args.format))
            out.write(render(rows, args.format, width))
            if args.format != "json":  # the JSON output stays a list of rows
                out.write(render_persistent_cache(report.persistent_cache(), args.format))
                out.write(render_steps(report.steps.summary(), args.format))
        out.flush()
    finally:
        close_output(out)

    note = f"otel-jax report: {report.events} jax.compile events"
    if report.divergence_events:
        note += (f", {report.divergence_events} jax.compile.divergence events "
                 f"({len(report.divergences)} divergences)")
    if report.steps.events:
        note += f", {report.steps.events} jax.step events"
    hazards = report.hazards.total()["said"]
    if hazards:
        note += f", {hazards} jax.compile.hazard events"
    if report.filtered:
        note += f", {report.filtered} filtered out by --function"
    if report.skipped:
        note += f"; skipped {report.skipped} lines that are not jax.compile JSON events"
    print(note, file=sys.stderr)
    return status


def _feed(report: Report, path: str) -> int:
    """Feed one file (or stdin) to ``report``: 0, 1 (unreadable part), 2 (cannot open or
    read at all) or 130 (interrupted)."""
    status = 0
    name = printable(path)
    try:
        if path == "-":
            if sys.stdin is None:
                print("otel-jax report: no stdin to read", file=sys.stderr)
                return 2
            if sys.stdin.isatty():
                print("otel-jax report: reading the log from stdin (Ctrl-D ends)",
                      file=sys.stderr)
            report.feed_lines(sys.stdin.buffer)
        else:
            try:
                stream = open_log(path)
            except OSError as exc:
                print(f"otel-jax report: cannot open {name}: {exc.strerror or exc}",
                      file=sys.stderr)
                return 2
            try:
                with stream:
                    report.feed_lines(stream)
                if isinstance(stream, Decompressed) and stream.stopped:
                    print(f"otel-jax report: {stream.said(name)}; the summary below covers "
                          "what was read", file=sys.stderr)
                    status = 1
            except read_errors() as exc:
                print(f"otel-jax report: cannot read {name} past the first "
                      f"{report.events + report.skipped + report.filtered} lines, it is "
                      f"corrupt or truncated ({type(exc).__name__}: {exc}); the summary "
                      "below covers what was read", file=sys.stderr)
                status = 1
    except KeyboardInterrupt:
        # Ctrl-C on a long or endless stream: the summary of what was read so far.
        print("otel-jax report: interrupted; the summary below covers what was read",
              file=sys.stderr)
        status = 130
    return status


def main(argv: Sequence[str]) -> int:
    """``otel-jax report ARGS``: the exit status (0 ok, 1 unreadable input, 2 usage
    error, 130 interrupted)."""
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return _run_report(args)
    except BrokenPipeError:  # output piped into e.g. ``head``: stop quietly
        reader_gone()
        return 0
    except KeyboardInterrupt:
        return 130
