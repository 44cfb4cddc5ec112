"""The demo's outputs in the docs and their screenshots, made from the current code (`make docs`).

Runs the demo (examples/train.py) once, then writes, in place:

- README.md and docs/*.md (``PAGES``): the block after each ``<!-- make docs: NAME -->``
  comment (NAME: ``demo-console``, ``demo-stdout``, ``demo-hazard``, ``demo-json-line``,
  ``report``): what a terminal shows of the demo's log (its warnings, then each line as
  ``install(log_format="console")`` renders it), the demo's stdout, the weak-type hazard
  said at its first compile (the warning and its JSON line), its weak-type compile's JSON
  line (wrapped) and ``otel-jax report`` of its log;
- docs/report-html.png (the top of the HTML report of the demo's log) and
  docs/report-steps.png (the page's steps section), with headless Chromium
  (``scripts/ensure-chromium``; without it the screenshots are left as they are, and one
  line says so).

tests/test_docs.py checks that these blocks match what the demo prints now.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where the README's JSON line says the checkout is.
HOME = "/home/me/otel_jax"
#: The pages whose marked blocks are made here.
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"(<!-- make docs: (?P<name>[\w-]+) -->\n```[^\n]*\n)(?P<body>.*?)(^```)",
                    re.M | re.S)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "JAX_")) and k != "XLA_FLAGS"}
    env.update(PYTHONPATH=str(ROOT), OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none", JAX_PLATFORMS="cpu")
    return env


def run_demo(folder: Path) -> tuple[str, Path]:
    """The demo's stdout, and its log (stderr) as ``compiles.log`` in ``folder``."""
    log = folder / "compiles.log"
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, str(ROOT / "examples" / "train.py")],
                              cwd=folder, env=environment(), stdout=subprocess.PIPE,
                              stderr=err, text=True, timeout=1200, check=True)
    return proc.stdout, log


def report(log: Path, *args: str) -> str:
    """``otel-jax report ARGS compiles.log``, run beside the log (the page names the file)."""
    return subprocess.run([sys.executable, "-m", "otel_jax", "report", *args, log.name],
                          cwd=log.parent, env=environment(), capture_output=True, text=True,
                          timeout=600, check=True).stdout


def _event(log: Path, name: str, field: str) -> dict[str, object]:
    """The first ``name`` event of the demo's log whose ``field`` is ``weak_type``, with the
    checkout's path as a user's would read (the rest is as the demo wrote it)."""
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == name and event.get(field) == "weak_type":
            return dict(json.loads(json.dumps(event).replace(json.dumps(str(ROOT))[1:-1], HOME)))
    raise SystemExit(f"the demo's log has no weak_type {name}")


def hazard(log: Path, width: int = 92) -> str:
    """The demo's weak-type hazard, said at its first compile: its JSON line (the warning
    is left to it in a file)."""
    return wrapped(_event(log, "jax.compile.hazard", "hazard_kind"), width)


def json_line(log: Path, width: int = 92) -> str:
    """The demo's weak-type compile, one JSON object wrapped between fields."""
    return wrapped(_event(log, "jax.compile", "cause_kind"), width)


def wrapped(event: dict[str, object], width: int) -> str:
    """``event`` as one JSON object, wrapped between fields."""
    fields = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in event.items()]
    lines, current = [], "{"
    for i, field in enumerate(fields):
        piece = field + ("," if i < len(fields) - 1 else "}")
        if len(current) + 1 + len(piece) > width and current.strip("{ "):
            lines.append(current)
            current = " " + piece
        else:
            current += ("" if current == "{" else " ") + piece
    lines.append(current)
    return "\n".join(lines) + "\n"


def console(log: Path) -> str:
    """What a terminal shows of the demo's stderr: every line of INFO and above as
    ``log_format="console"`` renders it (no colors), in the checkout's folder, and any
    Python warning as it is."""
    from datetime import datetime

    sys.path.insert(0, str(ROOT))
    from otel_jax._emit._console import render_console

    out = []
    for line in log.read_text().splitlines():
        if "OtelJaxWarning" in line:
            out.append(line.replace(str(ROOT), HOME))
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("level") == "debug":
            continue
        stamp = datetime.fromisoformat(str(event.pop("timestamp")).replace("Z", "+00:00"))
        level, name = str(event.pop("level")), str(event.pop("event"))
        event.pop("logger", None)
        rendered = render_console(stamp.timestamp(), level, name, event, cwd=str(ROOT))
        if rendered:  # not a step line: a terminal is not shown those
            out.append(rendered.rstrip("\n"))
    return "\n".join(out) + "\n"


def blocks(stdout: str, log: Path) -> dict[str, str]:
    return {"demo-console": console(log), "demo-stdout": stdout, "demo-hazard": hazard(log),
            "demo-json-line": json_line(log), "report": report(log)}


def shown(pages: tuple[Path, ...] = PAGES) -> dict[str, str]:
    """Each marked block of the pages, by name, as it stands."""
    return {m.group("name"): m.group("body")
            for page in pages for m in MARKER.finditer(page.read_text())}


def write_pages(made: dict[str, str], pages: tuple[Path, ...] = PAGES) -> None:
    missing = set(made) - set(shown(pages))
    if missing:
        raise SystemExit(f"no page has a block for {sorted(missing)}")
    for page in pages:
        text = page.read_text()
        new = MARKER.sub(
            lambda m: m.group(1) + made.get(m.group("name"), m.group("body")) + m.group(4),
            text)
        if new != text:
            page.write_text(new)


def screenshots(log: Path, folder: Path) -> bool:
    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        print("docs: no Chromium (scripts/ensure-chromium): the screenshots are left as "
              "they are")
        return False
    page = folder / "report.html"
    report(log, "--format", "html", "-o", str(page))
    with Browser(binary, width=1280, height=900) as browser:
        browser.open(page)
        browser.screenshot(ROOT / "docs" / "report-html.png", full_page=False)
        browser.element_screenshot("steps", ROOT / "docs" / "report-steps.png")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-screenshots", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="otel_jax-docs-") as tmp:
        folder = Path(tmp)
        stdout, log = run_demo(folder)
        write_pages(blocks(stdout, log))
        print("docs: the demo's output, JSON lines and report written in README.md and "
              "docs/tour.md")
        if not args.no_screenshots and screenshots(log, folder):
            print("docs: docs/report-html.png and docs/report-steps.png written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
