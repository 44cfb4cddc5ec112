"""The accelerator benchmark (benchmarks/accelerator.py) and what it shares with
benchmarks/compile_path.py: a clock that reads 0 is reported, never divided by; and the
command itself, run small on the CPU (the machine it is for has an accelerator)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks import accelerator, compile_path

ROOT = Path(__file__).resolve().parents[1]


def test_a_clock_that_reads_0_is_reported_never_divided_by():
    # the calling thread's CPU time read 0 in a pair's off side, or in every timing
    some = compile_path.Result([0.0, 0.010, 0.020], [0.010, 0.020, 0.020])
    assert some.zero_reads == 1 and some.ratio == 2.0 / 1.0
    assert some.pair_ratio == 1.5  # the pair whose off side read 0 is left out
    assert "the clock read 0 in 1 of 6 timings" in some.line("(2)")
    every = compile_path.Result([0.0] * 4, [0.0] * 4)
    assert every.ratio is None and every.pair_ratio is None
    assert "not measured" in every.line("(2)")
    row = accelerator.result_row("(2) CPU", every)
    assert row[0] == "(2) CPU" and row[3] == "not measured" and "read 0 in 8" in row[1]


def test_the_thread_clock_is_described_as_it_reads():
    assert "reads 0" in compile_path.clock_text(0.0)
    assert "10 ms steps" in compile_path.clock_text(0.010)
    assert compile_path.clock_text(1e-6) == "the thread CPU clock runs"
    assert compile_path.thread_clock_tick() > 0  # this machine's clock runs


def test_the_command_prints_one_table():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accelerator.py"),
                          "--quick", "--only", "24"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    table = out.stdout[out.stdout.index("| measurement |"):].splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == [
        "| (2) one jitted f, new shape, wall (4 pairs)",
        "| (2) one jitted f, new shape, compiling thread's CPU",
        "| (4) cache hit of a small jitted f, per call"]
    assert " x cpu (cpu); " in out.stdout.splitlines()[0]  # the programs tests start: CPU
