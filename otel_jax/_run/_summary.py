"""``otel-jax run``'s summary at exit: the JSON lines every process of the run wrote, read
back as ``otel-jax report`` reads a log.

Printed on stderr by the program's own process only, and by default only when something
recompiled (``--summary always`` prints it anyway, ``never`` not at all); ``--html PATH``
writes the report's page as well. Bounded like the report: the lines are read streaming.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from .._core._exitwrite import write_within
from .._core._vocab import RowKind
from .._report._aggregate import Report
from .._report._text import printable, render_persistent_cache, render_steps, render_table

#: The file names the processes of a run write (see ``_bootstrap.RunLog``).
LOG_SUFFIX = ".jsonl"
CUT_SUFFIX = ".cut"
_AGGREGATES = (RowKind.EAGER_OPS.value, RowKind.OTHER.value)


def _feed(report: Report, folder: str) -> tuple[int, bool]:
    """Every process's lines into ``report``: the processes that wrote any, and whether
    one's file was cut at its size limit."""
    processes = 0
    names = sorted(os.listdir(folder))
    for name in names:
        if not name.endswith(LOG_SUFFIX):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as stream:
                before = report.events + report.steps.events + report.skipped
                report.feed_lines(stream)
                processes += report.events + report.steps.events + report.skipped > before
        except OSError:
            continue
    return processes, any(name.endswith(CUT_SUFFIX) for name in names)


def summary_text(report: Report, processes: int, cut: bool) -> str:
    """The text printed at exit."""
    rows = report.rows()
    eager = sum(r["compiles"] for r in rows if r["row_kind"] == RowKind.EAGER_OPS.value)
    recompiles = sum(r["recompiles"] for r in rows if r["row_kind"] not in _AGGREGATES)
    # JAX's eager ops compile one primitive at a time: counted apart from the program's
    # functions, whose compiles the summary is about
    head = (f"otel-jax run: {_n(report.events - eager, 'compile')}, "
            f"{_n(recompiles, 'recompile')} of the program's functions"
            + (f" and {_n(eager, 'compile')} of JAX's eager ops" if eager else "")
            + f" in {_n(processes, 'process', 'es')}"
            + ("; a process's log reached its size limit, later lines are not counted"
               if cut else "") + ". Per function, and why:\n")
    return (head + render_table(rows)
            + render_persistent_cache(report.persistent_cache(), "table")
            + render_steps(report.steps.summary(), "table"))


def _n(count: int, noun: str, plural: str = "s") -> str:
    return f"{count} {noun}{'' if count == 1 else plural}"


def recompiled(report: Report) -> bool:
    """Whether any of the program's functions (not JAX's eager ops) compiled again."""
    return any(r["recompiles"] for r in report.rows() if r["row_kind"] not in _AGGREGATES)


def at_exit(folder: str, mode: str, html: str | None, err: IO[str] | None = None) -> None:
    """Summarise the run folder: the text on ``err`` (stderr), and the page at ``html``.
    What is said is written within ``EXIT_WRITE_S`` (a parent that reads stderr only once
    the program ended may have let the pipe fill): past it, it is lost, and the exit goes
    on."""
    err = err if err is not None else sys.stderr
    kind: type[Report] = Report
    if html:
        from .._report._page_data import HtmlReport

        kind = HtmlReport
    report = kind()
    processes, cut = _feed(report, folder)
    said = []
    if mode == "always" or (mode == "auto" and recompiled(report)):
        said.append("\n" + summary_text(report, processes, cut))
    if html:
        from .._report._html import render_html

        try:
            with open(html, "w", encoding="utf-8", errors="replace") as page:
                page.write(render_html(report, report.rows(),  # type: ignore[arg-type]
                                       title="JAX compile report (otel-jax run)"))
            said.append(f"otel-jax run: wrote the report to {printable(html)}\n")
        except OSError as exc:
            said.append(f"otel-jax run: cannot write {printable(html)}: "
                        f"{exc.strerror or exc}\n")
    if said:
        write_within(err, "".join(said))
