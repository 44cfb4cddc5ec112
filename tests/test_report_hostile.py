"""``otel-jax report`` on hostile input: never a traceback, never raw control characters on
the terminal, strict JSON, and the summary of what was read when it stops early."""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_jax import _cli
from otel_jax._report import _aggregate, _read, _text


def line(**fields: Any) -> str:
    event = {"event": "jax.compile", "function": "f", "compile_s": 0.5}
    event.update(fields)
    return json.dumps(event)


def strict_json(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=reject)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = _cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


ESC = "\x1b[2J\x1b]0;owned\x07"

# (log text, what the table must show) — each line is hostile in one way.
HOSTILE = {
    "oversized integer duration": (
        '{"event": "jax.compile", "function": "f", "compile_s": ' + "9" * 400 + "}\n"
        + line() + "\n", {"f": 2}),
    "oversized integer line and count": (
        line(line=int("9" * 300), count=int("9" * 300), diff_total=int("9" * 300),
             is_recompile=True, diff=[{"path": "x", "before": 1, "after": 2}]) + "\n",
        {"f": 1}),
    "durations that sum to infinity": (
        (line(function="g", compile_s=1e308) + "\n") * 3 + line(function="g", compile_s=1e999)
        .replace("Infinity", "1e999") + "\n", {"g": 4}),
    "escape codes and newlines in names": (
        line(function=f"evil{ESC}\nFAKE 9 9 9.000 9.000 9.000", is_recompile=True,
             cause_kind=f"shape{ESC}", cause=f"x\r\n{ESC}", hint="\x07\u202eh") + "\n",
        {"evil": 1}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_lines(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = HOSTILE[case]
    path = tmp_path / "hostile.log"
    path.write_text(text)

    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    assert rc == 0, err
    rows = strict_json(out)
    compiles = {r["function"].split("\x1b")[0]: r["compiles"] for r in rows}
    assert compiles == expected
    for row in rows:
        assert all(v is None or isinstance(v, (int, str)) or abs(v) < 1e300
                   for v in row.values() if not isinstance(v, list))

    rc, out, err = run(capsys, "report", str(path))
    assert rc == 0, err
    lines = out.splitlines()
    assert not any(c in out for c in "\x1b\x07\r\u202e")
    function_rows = [ln for ln in lines[1:] if not ln.startswith(" ")]
    assert len(function_rows) == len(expected)  # no row injected by a newline in a name

    rc, out, err = run(capsys, "report", "--format", "markdown", str(path))
    assert rc == 0, err
    assert not any(c in out for c in "\x1b\x07\r\u202e")
    assert len(out.splitlines()) == 2 + len(expected)


def test_escapes_are_visible_not_dropped(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "esc.log"
    path.write_text(line(function="a\x1b[31mb\nc") + "\n")
    _, out, _ = run(capsys, "report", str(path))
    assert "a\\x1b[31mb\\nc" in out


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "not gzip"])
def test_damaged_gzip_is_one_clear_error(damage: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = gzip.compress(("\n".join(line(count=i) for i in range(2000)) + "\n").encode())
    if damage == "corrupt":
        data = data[:30] + bytes(200) + data[230:]
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data = b"plain text, not gzip\n" * 10
    path = tmp_path / "app.log.gz"
    path.write_bytes(data)
    rc, out, err = run(capsys, "report", str(path))
    assert rc == 1
    assert "corrupt or truncated" in err and "Traceback" not in err
    assert out  # the summary of what could be read is still printed


@pytest.mark.parametrize("filler", [b"\n", b"x" * 10_000 + b"\n"])
def test_a_compressed_log_is_read_to_bounds_and_says_what_it_left(
        filler: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Kilobytes that expand a thousand times and more (blank lines, each a turn of the
    # reader; long lines, each a scan): read to the bounds, not to the end, and said.
    events = (line(count=1) + "\n" + line(function="g") + "\n").encode()
    many = 2 * min(100_000, (64 << 20) // len(filler) + 1)  # twice the floors of the bounds
    path = tmp_path / "bomb.log.gz"
    path.write_bytes(gzip.compress(events + filler * many, 9))
    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    assert rc == 1 and "Traceback" not in err
    assert "stopped reading" in err and "the rest unread" in err, err
    assert {r["function"] for r in strict_json(out)} == {"f", "g"}
    size = path.stat().st_size
    max_lines = max(_read.FLOOR_LINES, size // _read.MIN_COMPRESSED_PER_LINE)
    max_bytes = max(_read.FLOOR_BYTES, size * _read.MAX_EXPANSION)
    assert many > max_lines or len(filler) * many > max_bytes + _read.MAX_LINE_BYTES
    lines, read = (int(n) for n in re.search(r"after (\d+) lines \((\d+) bytes\)", err)
                   .groups())
    assert lines <= max_lines and read <= max_bytes + _read.MAX_LINE_BYTES
    rc, out, err = run(capsys, "diff", str(path), str(path))
    assert rc == 0 and "otel-jax diff: BASE: stopped reading" in err, err
    # a log that ends within the bounds is read whole, and says nothing of them
    path.write_bytes(gzip.compress(events + filler * 100))
    rc, out, err = run(capsys, "report", str(path))
    assert rc == 0 and "stopped reading" not in err


def test_a_compressed_line_without_end_is_cut_fast_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two megabytes holding 2 GiB without a newline (gzip members, each 16 MiB of one
    # byte): the bounds hold inside a line too, and the report says where it stopped.
    events = (line(count=1) + "\n" + line(function="g") + "\n").encode()
    member = gzip.compress(b"x" * (16 << 20), 9)
    path = tmp_path / "line-bomb.log.gz"
    path.write_bytes(gzip.compress(events) + member * 128)
    assert path.stat().st_size < 3 << 20
    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    assert rc == 1 and "Traceback" not in err
    assert {r["function"] for r in strict_json(out)} == {"f", "g"}
    cut = re.search(r"stopped reading \S+ inside line 3, after (\d+) bytes of it without a "
                    r"newline \((\d+) bytes decompressed", err)
    assert cut is not None and "that line skipped and the rest unread" in err, err
    assert int(cut[1]) <= _read.MAX_COMPRESSED_LINE_BYTES + _read.MAX_LINE_BYTES
    assert int(cut[2]) <= len(events) + _read.MAX_COMPRESSED_LINE_BYTES + _read.MAX_LINE_BYTES
    # a long line that ends within the bound is read, and nothing is said
    path.write_bytes(gzip.compress(events + b"y" * (3 << 20) + b"\n" + events))
    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    assert rc == 0 and "stopped reading" not in err, err


def test_interrupt_prints_the_summary_so_far(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    lines = [(line(function="step", count=i) + "\n").encode() for i in range(1, 6)]

    class Stream:
        def readline(self, limit: int = -1) -> bytes:
            if lines:
                return lines.pop(0)
            raise KeyboardInterrupt  # Ctrl-C while waiting for more of the stream

    class Stdin:
        buffer = Stream()

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdin", Stdin())
    rc, out, err = run(capsys, "report", "--format", "json", "-")
    assert rc == 130
    assert "interrupted" in err
    assert [(r["function"], r["compiles"]) for r in strict_json(out)] == [("step", 5)]


def test_markdown_escapes_html_and_emphasis() -> None:
    log = "\n".join([
        line(function="main.<locals>.<lambda>", is_recompile=True,
             cause_kind="function_identity", cause="<function>: a -> b", hint="use <b>x</b>"),
        line(function="Model.__call__", file="/src/a_b.py"),
    ]) + "\n"
    rows, _ = _aggregate.summarize(io.BytesIO(log.encode()))
    out = _text.render(rows, "markdown")
    assert "main.&lt;locals>.&lt;lambda>" in out  # every < escaped: no tag opens
    assert "use &lt;b>x&lt;/b>" in out and "<b>" not in out
    assert "`<function>: a -> b`" in out  # inside a code span, HTML is not read
    assert "Model.\\_\\_call\\_\\_" in out  # not bold "call"
    assert "a_b.py" in out  # an underscore inside a word is left alone


def test_divergence_lines_with_missing_fields_or_negative_ranks_are_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def div(**fields: Any) -> str:
        event = {"event": "jax.compile.divergence", "function": "step", "count": 2,
                 "divergence_kind": "signature", "divergence": "x: f32[4] (rank 0) vs f32[5] "
                 "(rank 1)", "ranks": [[0], [1]], "missing_ranks": [], "process_index": 0}
        event.update(fields)
        return json.dumps({k: v for k, v in event.items() if v is not None})

    log = tmp_path / "ranks.jsonl"
    log.write_text("\n".join([
        div(), div(process_index=-1), div(process_index=True),
        div(function=None), div(divergence_kind=None), div(count=None), div(count=0),
        div(ranks=[[-1, 0], [1]]),
    ]) + "\n")
    rc, out, err = run(capsys, "report", "--format", "markdown", str(log))
    assert rc == 0
    assert "(unknown)" not in out and "-1" not in out
    assert "reported by 0)" in out
    assert "skipped 4 lines" in err  # no function, no kind, no count, count 0


def test_an_event_with_a_huge_field_counts(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A valid ``jax.compile`` line with a 50 MB field is an event, its fields after the
    huge one read; only the huge string is cut."""
    huge = "x" * 50_000_000
    path = tmp_path / "huge.log"
    path.write_text(line(hint=huge, is_recompile=True, cause_kind="shape", compile_s=2.0,
                         diff=[{"path": "a", "before": "f32[1]", "after": "f32[2]"}])
                    + "\n" + line(function="g") + "\n")
    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    rows = {r["function"]: r for r in strict_json(out)}
    assert rc == 0 and set(rows) == {"f", "g"}, err
    f = rows["f"]
    assert f["compiles"] == 1 and f["recompiles"] == 1 and f["total_s"] == 2.0
    assert f["causes"][0]["top_diff"] == "a: f32[1] -> f32[2]"
    assert f["causes"][0]["hint"].startswith("xxx") and len(f["causes"][0]["hint"]) <= 400
    assert "skipped" not in err


@pytest.mark.parametrize("text", [
    "é" * 5000, "\\" * 3000 + "\"" * 3000, "\u00e9\U0001f600\n\t\x01" * 900,
    "a" * 4093 + "é" * 10, "𝄞" * 2000,
])
def test_huge_strings_are_cut_on_character_and_escape_boundaries(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut in small chunks, escapes and multi-byte characters straddle every boundary:
    the condensed line is still the same event, each long string a prefix of the original."""
    monkeypatch.setattr(_read, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(_read, "MAX_FIELD_BYTES", 100)
    for ensure_ascii in (True, False):
        event = {"event": "jax.compile", "function": "f", "cause": text, "hint": text,
                 "compile_s": 0.25, "diff": [{"path": text, "before": 1, "after": 2}]}
        raw = json.dumps(event, ensure_ascii=ensure_ascii).encode()
        stream = io.BytesIO(raw + b"\n")
        first = stream.readline(4096)
        condensed = _read._condense(first, stream.readline, 4096)
        assert condensed is not None
        parsed = json.loads(condensed)
        assert parsed["compile_s"] == 0.25 and parsed["function"] == "f"
        for got in (parsed["cause"], parsed["hint"], parsed["diff"][0]["path"]):
            assert got.endswith("...") and text.startswith(got[:-3])
        report = _aggregate.Report()
        report.feed_lines(io.BytesIO(raw + b"\n" + raw))  # the last line has no newline
        assert report.events == 2 and report.skipped == 0


def test_a_huge_line_that_is_not_text_is_skipped(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "array.log"
    path.write_text(line(diff=[1] * 2_000_000) + "\n" + line(function="g") + "\n")
    rc, out, err = run(capsys, "report", "--format", "json", str(path))
    assert rc == 0 and [r["function"] for r in strict_json(out)] == ["g"]
    assert "skipped 1 lines" in err


def test_the_fast_json_reader_reads_what_the_standard_one_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With orjson (the extra otel_jax[report]) or without it, the same report: what orjson
    refuses (NaN, Infinity, deep nesting) falls back to the standard reader."""
    pytest.importorskip("orjson")
    path = tmp_path / "mixed.log"
    path.write_text("".join(text for case, (text, _) in HOSTILE.items()
                            if not case.startswith("oversized integer"))
                    + '{"event": "jax.compile", "function": "n", "compile_s": NaN}\n'
                    + '{"event": "jax.compile", "function": "big", "compile_s": Infinity}\n'
                    + '{"event": "jax.compile", "x": ' + "[" * 3000 + "]" * 3000 + "}\n")
    fast = run(capsys, "report", "--format", "json", str(path))
    monkeypatch.setitem(sys.modules, "orjson", None)
    slow = run(capsys, "report", "--format", "json", str(path))
    assert fast == slow and fast[0] == 0
    assert {"n", "big"} <= {r["function"] for r in strict_json(fast[1])}
