"""A function's programs in the report: the largest by operations, with the lines that make
it and what was found in it (``program``), and the programs kept in a folder
(``program_files``, ``install(programs=DIR)``), from the compile lines' ``program_*`` fields.

Its own module: one row holds one :class:`ProgramTally`, bounded (the files listed, the lines
and findings of the largest program only), so a report's memory does not grow with the run.
"""

from __future__ import annotations

from typing import Any

from .._core._vocab import Field
from ._read import _MAX_DIFF, _MAX_FILE, _text

#: Program files listed per function (the first kept; the rest counted).
MAX_PROGRAM_FILES = 16
#: Lines and findings kept of the largest program.
MAX_PROGRAM_LINES = 3
MAX_PROGRAM_FINDINGS = 4
_KINDS = 40


def _int(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value < (1 << 62) else None


def _lines(value: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in value[:MAX_PROGRAM_LINES] if isinstance(value, list) else ():
        if not isinstance(item, dict):
            continue
        line, ops, share = item.get("line"), _int(item.get("ops")), item.get("share")
        if isinstance(line, str) and ops is not None:
            out.append({"line": _text(line, _MAX_FILE), "ops": ops,
                        "share": share if isinstance(share, float | int)
                        and not isinstance(share, bool) and 0 <= share <= 1 else None})
    return out


def _findings(value: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in value[:MAX_PROGRAM_FINDINGS] if isinstance(value, list) else ():
        if isinstance(item, dict) and isinstance(item.get("kind"), str):
            out.append({"kind": _text(item["kind"], _KINDS),
                        "line": _text(item.get("line"), _MAX_FILE),
                        "text": _text(item.get("text"), _MAX_DIFF),
                        "hint": _text(item.get("hint"), _MAX_DIFF),
                        "level": "warning" if item.get("level") == "warning" else "info"})
    return out


class ProgramTally:
    """One function's programs, as its compile lines give them."""

    __slots__ = ("largest", "files", "more_files", "_seen")

    def __init__(self) -> None:
        self.largest: dict[str, Any] | None = None  # the program with the most operations
        self.files: list[dict[str, Any]] = []
        self.more_files = 0
        self._seen: set[str] = set()

    def add(self, ev: dict[str, Any]) -> None:
        count = _int(ev.get(Field.COUNT))
        ops = _int(ev.get(Field.PROGRAM_OPS))
        if ops is not None and (self.largest is None or ops > self.largest["ops"]):
            self.largest = {
                "count": count, "ops": ops,
                "at_least": ev.get(Field.PROGRAM_OPS_AT_LEAST) is True,
                "top_lines": _lines(ev.get(Field.PROGRAM_TOP_LINES)),
                "constant_bytes": _int(ev.get(Field.PROGRAM_CONSTANT_BYTES)),
                "findings": _findings(ev.get(Field.PROGRAM_FINDINGS)),
            }
        path = _text(ev.get(Field.PROGRAM_FILE), _MAX_FILE)
        if path is not None and path not in self._seen:
            if len(self.files) < MAX_PROGRAM_FILES:
                self._seen.add(path)
                self.files.append({"count": count, "file": path, "ops": ops})
            else:
                self.more_files += 1

    def merge(self, other: ProgramTally) -> None:
        if other.largest is not None and (
                self.largest is None or other.largest["ops"] > self.largest["ops"]):
            self.largest = dict(other.largest)
        for f in other.files:
            if f["file"] not in self._seen:
                if len(self.files) < MAX_PROGRAM_FILES:
                    self._seen.add(f["file"])
                    self.files.append(dict(f))
                else:
                    self.more_files += 1
        self.more_files += other.more_files

    def to_dict(self) -> dict[str, Any]:
        return {"program": dict(self.largest) if self.largest is not None else None,
                "program_files": [dict(f) for f in self.files],
                "program_files_more": self.more_files}


def program_size_text(program: dict[str, Any] | None) -> str:
    """A row's ``program`` in one line: ``#1: 25,003 ops, 96% at train.py:12``."""
    if not program:
        return ""
    count = program.get("count")
    text = (("" if count is None else f"#{count}: ")
            + ("at least " if program.get("at_least") else "") + f"{program['ops']:,} ops")
    top = program.get("top_lines") or []
    if top and top[0].get("share") is not None:
        text += f", {top[0]['share']:.0%} at {short_line(top[0]['line'])}"
    return text


def short_line(line: Any) -> str:
    """``file:line`` as the table's location column shows a file: its base name."""
    text = str(line or "")
    return text.replace("\\", "/").rpartition("/")[2] or text


def programs_lines(row: dict[str, Any]) -> list[str]:
    """The text report's lines for a row's programs: the largest by operations and what
    makes it large, then the programs kept, by compile."""
    out: list[str] = []
    program = row.get("program")
    size = program_size_text(program)
    if size:
        out.append(f"  program {size}")
    for f in (program or {}).get("findings") or ():
        out.append(f"      {f['kind']}" + (f" at {short_line(f['line'])}" if f.get("line")
                                             else "")
                   + (f"; fix: {f['hint']}" if f.get("hint") else ""))
    for f in row.get("program_files") or ():
        count = f.get("count")
        ops = f.get("ops")
        out.append(f"  kept {'' if count is None else f'#{count} '}{f['file']}"
                   + ("" if ops is None else f" ({ops:,} ops)"))
    more = row.get("program_files_more") or 0
    if more:
        out.append(f"  kept {more} more")
    return out


def programs_section(add: Any, rows: list[dict[str, Any]]) -> None:
    """The HTML report's programs: per function, its largest program by operations, the
    line that makes most of it, what makes it large, and a link to each program kept."""
    from html import escape
    from urllib.parse import quote

    shown = [r for r in rows if r.get("program") or r.get("program_files")]
    if not shown:
        return
    add('<section id="programs"><h2>Programs</h2><div class="scroll"><table class="sortable">'
        "<thead><tr><th>Function</th><th>Operations</th><th>Top line</th><th>Found</th>"
        "<th>Kept</th></tr></thead><tbody>")
    for r in shown:
        program = r.get("program") or {}
        top = (program.get("top_lines") or [{}])[0]
        where = (f'{escape(str(top.get("line")))} ({top["share"]:.0%})'
                 if top.get("line") and top.get("share") is not None else "")
        found = "".join(
            f'<div title="{escape(f.get("text") or "")}">{escape(f["kind"])} '
            f'{"warning" if f["level"] == "warning" else "note"}'
            + (f': {escape(f["hint"])}' if f.get("hint") else "") + "</div>"
            for f in program.get("findings") or ())
        kept = "".join(
            f'<div><a href="{escape(quote(f["file"], safe="/:._-"))}">{_at(f.get("count"))}'
            f'{escape(f["file"].rpartition("/")[2])}</a></div>'
            for f in r.get("program_files") or ())
        ops = program.get("ops")
        add(f'<tr><td title="{escape(r.get("file") or "")}">{escape(r["function"])}</td>'
            f'<td class="n" data-v="{ops if ops is not None else -1}">'
            f'{"" if ops is None else ("≥ " if program.get("at_least") else "") + f"{ops:,}"}'
            f'</td><td class="mono">{where}</td><td>{found}</td><td class="mono">{kept}</td>'
            "</tr>")
    add("</tbody></table></div></section>")


def _at(count: Any) -> str:
    return "" if count is None else f"#{count} "
