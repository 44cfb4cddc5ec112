"""``otel-jax report --format html``: one self-contained page, bounded, escaped, and checked
in a real headless Chromium (no console errors, no network requests, no injected script)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import pythonpath

from otel_jax import _cli
from otel_jax._report import _html_style, _page_data

ROOT = Path(__file__).resolve().parent.parent
#: Screenshots and pages kept for a person to look at (gitignored).
OUTPUT = ROOT / "test-output"

INJECTED = ('evil<script>window.__owned=1</script><img src=x onerror="window.__owned=2">'
            "\"'&</td></tr></table>")


def event(function: str, count: int, compile_s: float, second: float, *, hour: str = "10:00",
          **fields: Any) -> str:
    recompile = count > 1
    ev: dict[str, Any] = {
        "timestamp": f"2026-12-01T{hour}:{second:09.6f}Z", "level": "info",
        "event": "jax.compile", "logger": "otel_jax", "function": function,
        "file": "/src/train.py", "line": 60, "callsite": "/src/train.py:110",
        "count": count, "is_recompile": recompile, "eager_op": False, "after_warmup": False,
        "cause_kind": "shape" if recompile else "first_compile",
        "cause": ("batch['x']: f32[128,32] -> f32[104,32]" if recompile
                  else f"first compilation of {function}"),
        "diff": ([{"path": "batch['x']", "kind": "shape", "before": "f32[128,32]",
                   "after": "f32[104,32]"}] if recompile else []),
        "diff_total": 1 if recompile else 0, "compared_with": count - 1 if recompile else None,
        "fingerprint": "fd8b25153330d086", "program_fingerprint": None,
        "hint": "pad or bucket inputs", "compile_s": compile_s, "trace_s": compile_s / 4,
        "lower_s": compile_s / 4, "backend_compile_s": compile_s / 2,
        "device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "process_index": 0,
        "trace_id": "8a082858344745a4c4b89b8ab17fb7ce", "span_id": "4d537b3ba8ae5ee5",
    }
    ev.update(fields)
    return json.dumps(ev)


def sample_log(hour: str = "10:00") -> str:
    def event(*args: Any, **fields: Any) -> str:
        return _event(*args, hour=hour, **fields)

    lines = [
        event("train_step", 1, 0.9, 1.0),
        event("train_step", 2, 0.5, 2.0, cause_kind="weak_type", cause="lr: f32[] (weak) -> f32[]",
              diff=[{"path": "lr", "kind": "weak_type", "before": "f32[] (weak)",
                     "after": "f32[]"}]),
        event("train_step", 3, 1.2, 4.0, after_warmup=True, persistent_cache_hit=False,
              persistent_cache_miss_reason="key_changed",
              persistent_cache_miss_detail="XLA flags: 1a2b -> 3c4d"),
        event(INJECTED, 1, 0.3, 4.5, callsite=f"/src/{INJECTED}.py:7"),
        event(INJECTED, 2, 0.2, 5.0, cause=INJECTED, hint=INJECTED,
              diff=[{"path": INJECTED, "kind": "shape", "before": INJECTED, "after": "x"}]),
        json.dumps({"timestamp": f"2026-12-01T{hour}:05.500000Z", "level": "warning",
                    "event": "jax.recompile_storm", "function": "train_step", "recompiles": 8,
                    "threshold": 8, "last_cause": "shape"}),
        "not json at all",
    ]
    return "\n".join(lines) + "\n"


_event = event


def html_report(capsys: pytest.CaptureFixture[str], tmp_path: Path, *logs: str,
                extra: tuple[str, ...] = ()) -> tuple[str, str]:
    paths = []
    for i, text in enumerate(logs):
        path = tmp_path / f"rank{i}.log"
        path.write_text(text)
        paths.append(str(path))
    out = tmp_path / "report.html"
    rc = _cli.main(["report", "--format", "html", "-o", str(out), *extra, *paths])
    _, err = capsys.readouterr()
    assert rc == 0, err
    return out.read_text(), err


def test_page_has_every_section_and_escapes_the_log(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page, err = html_report(capsys, tmp_path, sample_log())
    assert "5 jax.compile events" in err and "skipped 1 lines" in err
    for element in ('id="summary"', 'id="timeline"', 'id="functions-table"',
                    'id="callsite-tree"', 'id="compiles"', 'class="diff"', 'id="cache"'):
        assert element in page
    # summary figures, the kept compile's cache state and miss reason, the storm
    assert '<div class="v">5</div><div class="k">compiles</div>' in page
    assert '<div class="v">1</div><div class="k">recompiles after warm-up</div>' in page
    assert '<div class="v">1</div><div class="k">recompile storms</div>' in page
    assert "miss: key_changed" in page and "XLA flags: 1a2b -&gt; 3c4d" in page
    assert "f32[] (weak)" in page and "pad or bucket inputs" in page
    # nothing from the log is markup: the only <script> is the page's own, hashed in the CSP
    assert page.count("<script") == 1 and "<img src=x" not in page
    assert "onerror=&quot;window.__owned=2&quot;" in page
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    import base64
    import hashlib
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page)  # nothing fetched


def test_the_eager_ops_row_shows_where_they_ran(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    log = "\n".join([event("add", 1, 0.5, 1.0, eager_op=True, callsite="/src/main.py:<7>"),
                     event("broadcast_in_dim", 2, 0.25, 2.0, eager_op=True,
                           callsite="/src/main.py:9", hint="keep it to a few values")]) + "\n"
    page, _ = html_report(capsys, tmp_path, log)
    row = page[page.index("(eager ops)"):]
    row = row[:row.index("</tr>")]
    assert "at <code>/src/main.py:&lt;7&gt;</code> ×1 (0.500 s)" in row
    assert "at <code>/src/main.py:9</code> ×1 (0.250 s)" in row
    assert "keep it to a few values" not in row


def test_without_matplotlib_every_table_renders_and_the_page_says_why(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    page, _ = html_report(capsys, tmp_path, sample_log())
    assert 'id="charts-missing"' in page and "pip install matplotlib" in page
    assert 'id="timeline-chart"' not in page
    for element in ('id="functions-table"', 'id="callsite-tree"', 'class="diff"'):
        assert element in page


def test_with_matplotlib_the_timeline_is_an_inline_svg(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page, _ = html_report(capsys, tmp_path, sample_log())
    chart = re.search(r'id="timeline-chart"[^>]*src="data:image/svg\+xml;base64,([^"]+)"',
                      page)
    assert chart is not None
    import base64
    svg = base64.b64decode(chart.group(1)).decode()
    assert "train_step" in svg and "<script" not in svg  # names are escaped text
    assert "evil&lt;script" in svg


def test_ranks_divergences_first_then_counts_side_by_side(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    divergence = {"timestamp": "2026-12-01T10:00:03.000000Z", "level": "warning",
                  "event": "jax.compile.divergence", "function": "total_loss", "count": 1,
                  "divergence_kind": "signature",
                  "divergence": "batch['x']: f32[4,3] (rank 0) vs f32[5,3] (rank 1)",
                  "ranks": [[0], [1]], "missing_ranks": []}
    rank0 = "\n".join([event("total_loss", 1, 0.4, 1.0, process_index=0),
                       json.dumps({**divergence, "process_index": 0})]) + "\n"
    rank1 = "\n".join([event("total_loss", 1, 0.4, 1.0, process_index=1),
                       event("total_loss", 2, 0.4, 2.0, process_index=1),
                       json.dumps({**divergence, "process_index": 1})]) + "\n"
    page, _ = html_report(capsys, tmp_path, rank0, rank1)
    assert page.index('id="divergences"') < page.index('id="timeline"')
    table = page[page.index('id="divergence-table"'):page.index('id="rank-table"')]
    assert "total_loss" in table and "#1" in table and "signature" in table
    assert "[0] vs [1]" in table and "0, 1" in table  # both ranks reported it
    ranks = page[page.index('id="rank-table"'):]
    assert "rank 0" in ranks and "rank 1" in ranks
    assert '<td class="n">1 (0)</td>' in ranks and "2 (1)" in ranks


def test_stdin_and_stdout(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "otel_jax", "report", "--format", "html"],
        input=sample_log().encode(), capture_output=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": pythonpath(ROOT)})
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.startswith(b"<!DOCTYPE html>") and b'id="functions-table"' in proc.stdout


def test_detail_is_kept_for_the_longest_compiles_and_the_page_stays_bounded(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Many compiles, many functions, huge diffs: detail for the longest only, the rest
    counted, and the page stays small."""
    lines = []
    big_diff = [{"path": f"p{i}" * 40, "kind": "shape", "before": "b" * 500, "after": "a" * 500}
                for i in range(50)]
    kinds = sorted(_html_style._COLOURS) + [f"kind{k}" for k in range(30)]
    for i in range(20_000):
        name = f"fn{i % 3000}_" + "n" * 180
        lines.append(event(name, 2 + i // 3000, 0.001 * (i % 997), 1 + i * 1e-3,
                           diff=big_diff, diff_total=80, cause_kind=kinds[i % len(kinds)],
                           callsite=f"/src/{'d' * 300}{i % 400}.py:{i % 97}",
                           cause="c" * 1000, hint="h" * 1000))
    page, _ = html_report(capsys, tmp_path, "\n".join(lines) + "\n")
    assert page.count('<details class="compile') == _page_data.MAX_DETAILS
    assert f"{_page_data.MAX_DETAILS} of 20000 compiles in detail" in page
    assert "more changes not shown" in page
    assert len(page.encode()) < 5_000_000, len(page.encode())
    assert "more cause kinds" in page and "more (call site, function) pairs" in page
    # the longest compile (0.996 s) is among those kept
    assert "0.996 s" in page


def test_import_otel_jax_does_not_import_matplotlib() -> None:
    code = "import sys, otel_jax; print('matplotlib' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": pythonpath(ROOT)})
    assert proc.stdout.strip() == "False", proc.stderr


def test_every_cause_kind_has_a_colour() -> None:
    from otel_jax._core._vocab import CAUSE_KINDS

    assert set(CAUSE_KINDS) <= set(_html_style._COLOURS)


def test_timestamps() -> None:
    cache: dict[str, float] = {}
    a = _page_data._epoch("2026-12-01T19:50:30.310517Z", cache)
    b = _page_data._epoch("2026-12-01T19:50:30.810517Z", cache)
    assert a is not None and b is not None and b - a == pytest.approx(0.5)
    assert _page_data._epoch("2026-12-01T21:50:30.310517+02:00", cache) == pytest.approx(a)
    for bad in (None, 5, "", "yesterday at noon", "2026-13-01T00:00:00Z", "x" * 100):
        assert _page_data._epoch(bad, cache) is None


# -- in a real browser ------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _browser import find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium (Debian: apt-get install chromium; `make test` installs it "
                    "where it can)")
    return binary


@pytest.mark.slow
def test_the_demo_report_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    """The demo's real log, plus a function whose name is an injected script, rendered by
    headless Chromium: no console error, no network request, the timeline, the table and a
    compile's diff are there, the table sorts, and the injected script never ran."""
    from _browser import Browser

    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT), "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    demo = subprocess.run([sys.executable, str(ROOT / "examples" / "train.py")],
                          capture_output=True, timeout=600, env=env, cwd=ROOT)
    assert demo.returncode == 0, demo.stderr.decode()[-2000:]
    log = tmp_path / "compiles.log"
    # the hostile lines in the same minute as the demo's compiles
    stamp = json.loads(demo.stderr.splitlines()[0])["timestamp"]
    log.write_bytes(demo.stderr + sample_log(hour=stamp[11:16]).encode())
    page = tmp_path / "report.html"
    assert _cli.main(["report", "--format", "html", "-o", str(page), str(log)]) == 0

    OUTPUT.mkdir(exist_ok=True)
    with Browser(chromium) as browser:
        browser.open(page)
        found = browser.evaluate("""(() => {
            const q = (s) => document.querySelectorAll(s).length;
            const img = document.getElementById("timeline-chart");
            return {timeline: img ? img.naturalWidth : (q("#charts-missing") ? -1 : 0),
                    rows: q("#functions-table tbody tr"), diffs: q("table.diff tbody tr"),
                    fnLinks: q("#functions-table a[href^='#fn-']"),
                    callsites: q("#callsite-tree li"),
                    owned: typeof window.__owned,
                    injected: q("script") + q("img[src=x]"),
                    evilText: document.body.textContent.includes("evil<script>")};
        })()""")
        column = ("Array.from(document.querySelectorAll('#functions-table tbody tr'))"
                  ".map(r => Number(r.cells[2].getAttribute('data-v')))")
        click = "document.querySelectorAll('#functions-table th')[2].click()"
        browser.evaluate(click)
        descending = browser.evaluate(column)
        browser.evaluate(click)
        ascending = browser.evaluate(column)
        browser.screenshot(OUTPUT / "report_html_demo.png")
        browser.screenshot(OUTPUT / "report_html_demo_top.png", full_page=False)
        console, requests = list(browser.console), list(browser.requests)

    assert console == []
    page_url = page.resolve().as_uri()
    assert [u for u in requests if u != page_url and not u.startswith("data:")] == []
    assert found["timeline"] != 0  # the chart drew (or, without matplotlib, says why)
    assert found["rows"] >= 3 and found["fnLinks"] == found["rows"]
    assert found["diffs"] >= 4 and found["callsites"] >= 3
    assert found["owned"] == "undefined" and found["injected"] == 1  # only the page's script
    assert found["evilText"]  # the name is shown, as text
    # the table sorts by a column, both ways
    assert descending == sorted(descending, reverse=True) and ascending == sorted(descending)
    assert len(set(descending)) > 1


# -- notebooks ------------------------------------------------------------------------

EVIL = '<img src=x onerror="window.__owned=3"><script>window.__owned=4</script>'


def notebook_history(telemetry: Any) -> tuple[Any, Any]:
    import jax
    import jax.numpy as jnp

    import otel_jax

    def step(x: Any, tag: str) -> Any:
        return x * 2

    step.__qualname__ = step.__name__ = "step" + EVIL
    jitted = jax.jit(step, static_argnames="tag")
    jitted(jnp.ones(3), tag=EVIL)
    jitted(jnp.ones(4), tag=EVIL)
    history = otel_jax.compile_history(jitted)
    return history, history[-1]


def test_compile_history_and_an_entry_are_escaped_html_tables(telemetry: Any) -> None:
    history, entry = notebook_history(telemetry)
    assert [e.count for e in history] == [1, 2] and isinstance(history, list)
    table, one = history._repr_html_(), entry._repr_html_()
    for page in (table, one):
        assert "<script" not in page and "<img" not in page
        assert "&lt;img src=x onerror=&quot;window.__owned=3&quot;&gt;" in page
        assert page.count("<table>") == (1 if page is table else 2)
    assert table.count("<tr>") == 3 and "#2" in table and "shape" in table
    assert "f32[3]" in one and "f32[4]" in one and "static = " in one


@pytest.mark.slow
def test_notebook_tables_in_headless_chromium(chromium: str, telemetry: Any,
                                              tmp_path: Path) -> None:
    from _browser import Browser

    history, entry = notebook_history(telemetry)
    page = tmp_path / "notebook.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>"
                    + history._repr_html_() + entry._repr_html_() + "</body></html>")
    with Browser(chromium) as browser:
        browser.open(page)
        found = browser.evaluate("({owned: typeof window.__owned, "
                                 "tables: document.querySelectorAll('table').length, "
                                 "shown: document.body.textContent.includes('onerror=')})")
        console, requests = list(browser.console), list(browser.requests)
    assert found == {"owned": "undefined", "tables": 3, "shown": True}
    assert console == [] and requests == [page.resolve().as_uri()]


@pytest.mark.slow
def test_real_rank_logs_in_headless_chromium(chromium: str, tmp_path: Path) -> None:
    """Both ranks' logs of a real two-process JAX job (examples/multiprocess.py: rank 1 gets
    one more row): the divergence is listed first, with its ranks, then the counts per rank
    side by side."""
    from _browser import Browser

    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "multiprocess.py")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": pythonpath(ROOT),
                               "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
                               "OTEL_LOGS_EXPORTER": "none"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    command = next(line for line in proc.stdout.splitlines()
                   if line.startswith("$ otel-jax report "))
    logs = command.split()[3:]
    assert len(logs) == 2
    page = tmp_path / "ranks.html"
    assert _cli.main(["report", "--format", "html", "-o", str(page), *logs]) == 0
    text = page.read_text()
    assert text.index('id="divergences"') < text.index('id="timeline"')
    OUTPUT.mkdir(exist_ok=True)
    with Browser(chromium) as browser:
        browser.open(page)
        found = browser.evaluate("""(() => {
            const rows = Array.from(document.querySelectorAll("#divergence-table tbody tr"));
            const head = Array.from(document.querySelectorAll("#rank-table thead th"));
            return {divergences: rows.map(r => Array.from(r.cells).map(c => c.textContent)),
                    ranks: head.map(h => h.textContent)};
        })()""")
        browser.screenshot(OUTPUT / "report_html_ranks.png")
        console = list(browser.console)
    assert console == []
    assert any(d[0].endswith("total_loss") and d[1] == "#1" and d[2] == "signature"
               and "f32[4,3] (rank 0) vs f32[5,3] (rank 1)" in d[3] and d[4] == "[0] vs [1]"
               and d[6] == "0, 1" for d in found["divergences"]), found
    assert found["ranks"] == ["Function", "rank 0", "rank 1"]
