"""scripts/ensure-tools, run against a stand-in ``go`` on PATH: one line per tool with its
build time, Go's own output in a log per tool, and that log's tail only when a build fails."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ensure-tools"

# Answers the three commands ensure-tools runs as Go would, with Go's chatter on stderr.
FAKE_GO = r"""#!/usr/bin/env bash
set -eu
for i in $(seq 1 40); do echo "go: downloading example.com/module$i v1.0.$i" >&2; done
case "$1 $2" in
  "mod download")
    mkdir -p "$FAKE_SRC/cmd/jaeger"
    printf '{\n\t"Path": "x",\n\t"Dir": "%s",\n\t"Sum": "h1:x"\n}\n' "$FAKE_SRC" ;;
  "build -trimpath")
    out="$4"; printf '#!/bin/sh\necho jaeger\n' > "$out"; chmod +x "$out" ;;
  install*)
    tool="${2##*/}"; tool="${tool%@*}"
    if [ "${FAKE_GO_FAIL:-}" = "$tool" ]; then
      echo "cmd/$tool/main.go:12:2: undefined: somethingThatMoved" >&2; exit 2
    fi
    printf '#!/bin/sh\necho %s\n' "$tool" > "$GOBIN/$tool"; chmod +x "$GOBIN/$tool" ;;
  *) echo "unexpected: go $*" >&2; exit 3 ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "OTEL_JAX_TOOLS_DIR": str(tmp_path / "tools"),
                "FAKE_SRC": str(tmp_path / "src"), **env}
        return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True,
                              text=True, timeout=60)

    return run, tmp_path / "tools"


def test_one_line_per_tool_with_its_time_and_go_output_in_logs(fake_go):
    run, tools = fake_go
    out = run()
    assert out.returncode == 0, out.stderr
    where, *lines = out.stderr.splitlines()
    assert where.startswith(f"ensure-tools: the test servers go to {tools} (built once per "
                            "machine: about 50 minutes"), where
    assert len(lines) == 4, out.stderr
    for line, tool in zip(lines, ("jaeger", "prometheus", "promtool", "victoria-logs")):
        assert re.fullmatch(rf"ensure-tools: building {tool} v[\d.]+ \(once per machine\) "
                            r"\.\.\. built in (\d+m \d\ds|\d+s)", line), line
    assert "go: downloading" not in out.stderr + out.stdout
    logs = sorted(p.name for p in (tools / "logs").iterdir())
    assert [name.split("-v")[0] for name in logs] == [
        "jaeger", "prometheus", "promtool", "victoria-logs"]
    assert "go: downloading" in (tools / "logs" / logs[0]).read_text()
    assert all(os.access(p, os.X_OK) for p in (*tools.glob("jaeger-*/jaeger"),
                                               *tools.glob("prometheus-*/prom*"),
                                               *tools.glob("victorialogs-*/victoria-logs")))
    assert len(list(tools.glob("victorialogs-v*/victoria-logs"))) == 1
    again = run()  # built: nothing to do, nothing said
    assert again.returncode == 0 and again.stderr == ""


def test_a_failed_build_shows_the_tail_of_its_log(fake_go):
    run, tools = fake_go
    out = run(FAKE_GO_FAIL="promtool")
    assert out.returncode == 1
    assert "building prometheus" in out.stderr and "built in" in out.stderr
    assert re.search(r"building promtool v[\d.]+ \(once per machine\) \.\.\. FAILED after "
                     r"\d+s; the last lines of .*promtool-v[\d.]+\.log:", out.stderr)
    assert "undefined: somethingThatMoved" in out.stderr
    # The error, without the module downloads before it (they stay in the log).
    assert "go: downloading" not in out.stderr
    assert not list(tools.glob("prometheus-*/promtool"))
