"""Multi-process jobs: real processes joined by ``jax.distributed.initialize`` (gloo CPU
collectives, a free 127.0.0.1 port), each running tests/_multiprocess_worker.py.

Every process runs under a subprocess timeout and is killed in teardown.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port

from otel_jax._core._vocab import RankWire as W

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("_multiprocess_worker.py")
PROCESS_TIMEOUT_S = 240


class Job:
    def __init__(self, tmp_path: Path, scenario: str, count: int, timeout_s: float = 5.0,
                 on_divergence: str = "log", rank_local: str = "",
                 structlog: bool = False, fan_in: int | None = None) -> None:
        port = free_port()
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0",
               "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
               "OTEL_JAX_TEST_RANK_LOCAL": rank_local,
               "OTEL_JAX_TEST_STRUCTLOG": "1" if structlog else "",
               "OTEL_JAX_TEST_FAN_IN": "" if fan_in is None else str(fan_in)}
        self.logs = [tmp_path / f"rank{r}.jsonl" for r in range(count)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), scenario, str(r), str(count), str(port),
                 str(self.logs[r]), str(timeout_s), on_divergence],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True)
            for r in range(count)]

    def wait(self, ranks: list[int] | None = None) -> dict[int, dict]:
        results = {}
        for r, proc in enumerate(self.procs):
            if ranks is not None and r not in ranks:
                continue
            out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            assert proc.returncode == 0 and lines, f"rank {r} failed:\n{out}\n{err[-4000:]}"
            results[r] = json.loads(lines[-1][len("RESULT "):])
            results[r]["stderr"] = err
            results[r]["stdout"] = out
        return results

    def events(self, rank: int, event: str) -> list[dict]:
        return [e for e in (json.loads(ln) for ln in self.logs[rank].read_text().splitlines())
                if e["event"] == event]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait(timeout=30)


def _text(path: Path) -> str:
    """A log's complete lines so far ("" before it is made)."""
    try:
        text = path.read_text()
    except OSError:
        return ""
    return text[:text.rfind("\n") + 1]


@pytest.fixture
def job(tmp_path):
    jobs: list[Job] = []

    def start(*args, **kwargs) -> Job:
        j = Job(tmp_path, *args, **kwargs)
        jobs.append(j)
        return j

    yield start
    for j in jobs:
        j.kill()


def test_identical_programs_on_every_rank_are_no_divergence(job):
    j = job("same", 2)
    results = j.wait()
    for rank in (0, 1):
        assert results[rank]["settled"]
        assert len(j.events(rank, "jax.compile")) >= 3
        assert j.events(rank, "jax.compile.divergence") == []
        assert "OtelJaxWarning" not in results[rank]["stderr"]
        # Every entry deleted once its comparer read it; what stays of each compile is
        # its arrival counter and its verdict, for a peer that arrives late (the keys of
        # an ordinal go KEEP ordinals later, the rest with the job's service).
        left = results[rank]["keys_left"]
        assert left and all(key.rsplit("/", 1)[1] in (W.ARRIVED, W.VERDICT)
                            for key in left), left
        assert len(left) == 2 * 3  # total #1 and #2, double #1


def test_a_different_local_batch_is_named_with_its_path_and_both_shapes(job):
    j = job("shape", 2)
    j.wait()
    for rank in (0, 1):
        [div] = j.events(rank, "jax.compile.divergence")
        assert div["level"] == "warning"
        assert div["function"] == "total" and div["count"] == 1
        assert div["divergence_kind"] == "signature"
        assert div["divergence"] == "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)"
        assert div["ranks"] == [[0], [1]]
        assert div["diff"] == [{"path": "batch['x']", "kind": "shape", "before": "f32[4]",
                                "after": "f32[5]"}]
        assert div["process_index"] == rank
        # it links to this rank's compile span
        [compile_line] = j.events(rank, "jax.compile")
        assert div["span_id"] == compile_line["span_id"]


def test_structlog_output_puts_each_ranks_bound_context_on_its_divergence(job):
    # The divergence is found on otel_jax's cross-rank thread, which bound nothing: the
    # line carries what the rank's main thread had bound when it compiled.
    j = job("shape", 2, structlog=True)
    j.wait()
    for rank in (0, 1):
        [div] = j.events(rank, "jax.compile.divergence")
        assert div["level"] == "warning" and div["logger"] == "otel_jax"
        assert div["function"] == "total" and div["divergence_kind"] == "signature"
        assert div["run_id"] == "job-1" and div["host"] == f"host-{rank}"
        [compile_line] = j.events(rank, "jax.compile")
        assert compile_line["host"] == f"host-{rank}" and compile_line["count"] == 1
        assert div["span_id"] == compile_line["span_id"]


def test_one_global_array_from_each_process_rows(job):
    """The issue's own case: jax.make_array_from_process_local_data with 4 rows on rank 0
    and 5 on rank 1: only otel_jax says anything, on both ranks."""
    j = job("global_same", 2)
    results = j.wait()
    for rank in (0, 1):
        assert results[rank]["sum"] == 8.0
        assert j.events(rank, "jax.compile.divergence") == []
    j = job("global_shape", 2)
    # Up to JAX 0.12.0 both ranks then end; from 0.12.1 the sum's collective over the
    # mismatched global array waits forever, plain JAX too, and otel_jax's line is what
    # says why: the wait is for that line on both ranks (or their end), then they go.
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while time.monotonic() < deadline and not all(p.poll() is not None for p in j.procs):
        if all('"event": "jax.compile.divergence"' in _text(log) for log in j.logs):
            break
        time.sleep(0.2)
    ended = [p.poll() for p in j.procs]
    j.kill()
    # where the ranks ended by themselves (JAX up to 0.12.0), they ended well
    assert all(rc == 0 for rc in ended) or None in ended, ended
    for rank in (0, 1):
        [div] = j.events(rank, "jax.compile.divergence")
        # JAX >= 0.9 meshes default to explicit axes, whose sharding shows in the type
        assert re.fullmatch(r"x: f32\[8(@data)?\] \(rank 0\) vs f32\[10(@data)?\] \(rank 1\)",
                            div["divergence"]), div["divergence"]
        assert div["diff"][0]["kind"] == "shape"


@pytest.mark.parametrize("fan_in", [None, 2])
def test_four_ranks_one_of_them_different(job, fan_in):
    """As one group, and as a tree (fan-in 2: two groups of two under a root) over the
    real coordination service, whose 32-bit counters then take the groups' presence
    bits, digests and closes: every rank words the divergence the same way."""
    j = job("shape_last", 4, timeout_s=20.0, fan_in=fan_in)
    results = j.wait()
    for rank in range(4):
        assert results[rank]["settled"]
        [div] = j.events(rank, "jax.compile.divergence")
        assert div["divergence"] == "batch['x']: f32[4] (ranks 0-2) vs f32[5] (rank 3)"
        assert div["ranks"] == [[0, 1, 2], [3]]
        assert "otel_jax:" not in results[rank]["stderr"]  # no warning: no call failed


def test_the_tree_of_real_processes_that_agree_reports_nothing(job):
    j = job("same", 4, timeout_s=20.0, fan_in=2)
    results = j.wait()
    for rank in range(4):
        assert results[rank]["settled"]
        assert j.events(rank, "jax.compile.divergence") == []
        assert "otel_jax:" not in results[rank]["stderr"]


def test_same_signature_different_program(job):
    j = job("program", 2)
    j.wait()
    for rank in (0, 1):
        [div] = j.events(rank, "jax.compile.divergence")
        assert div["divergence_kind"] == "program"
        assert div["divergence"].startswith("same signature, different program (rank 0 vs "
                                             "rank 1)")
        [line] = j.events(rank, "jax.compile")
        assert line["fingerprint"]  # the same on both ranks
    fps = {j.events(r, "jax.compile")[0]["fingerprint"] for r in (0, 1)}
    assert len(fps) == 1


def test_a_rank_that_compiles_an_extra_time_is_reported_within_the_timeout(job):
    started = time.monotonic()
    j = job("extra", 2, timeout_s=3.0)
    j.wait()
    assert time.monotonic() - started < PROCESS_TIMEOUT_S
    assert j.events(0, "jax.compile.divergence") == []
    [div] = j.events(1, "jax.compile.divergence")
    assert div["divergence_kind"] == "missing"
    assert div["count"] == 2
    assert div["missing_ranks"] == [0]
    assert div["divergence"] == "rank 0 did not compile total #2 within 3 s of rank 1"


def test_an_extra_compile_on_one_rank_is_not_reported_at_every_later_ordinal(job):
    j = job("extra_then_same", 2, timeout_s=3.0)
    j.wait()
    for rank in (0, 1):
        # rank 1's extra f32[2] at #2; at #3 the shift is one ordinal old, and from #4 on
        # (two ordinals in a row) the same programs one ordinal apart are not reported
        divs = j.events(rank, "jax.compile.divergence")
        assert [d["count"] for d in divs] == [2, 3]
        assert "f32[2]" in divs[0]["divergence"] and "f32[6]" in divs[0]["divergence"]


def test_a_rank_that_ends_first_is_not_missing_on_the_others(job):
    j = job("finish_early", 2, timeout_s=2.0)
    results = j.wait()
    assert results[0]["settled"]
    for rank in (0, 1):
        assert j.events(rank, "jax.compile.divergence") == []
    assert [e["count"] for e in j.events(1, "jax.compile")] == [1, 2]


def test_a_slow_rank_does_not_call_the_others_missing(job):
    j = job("slow", 2, timeout_s=2.0)
    j.wait()
    assert j.events(1, "jax.compile.divergence") == []  # rank 0 compiled #2 long before
    late = j.events(0, "jax.compile.divergence")  # true: rank 1 was late by 6 s
    assert [(d["count"], d["missing_ranks"]) for d in late] == [(2, [1])]


def test_functions_declared_rank_local_are_not_reported_missing(job):
    j = job("rank0_evaluates", 2, timeout_s=2.0, rank_local="*double")
    j.wait()
    for rank in (0, 1):
        assert j.events(rank, "jax.compile.divergence") == []
    assert any(e["function"] == "double" for e in j.events(0, "jax.compile"))


def test_a_killed_rank_costs_no_hang(job):
    j = job("killed", 3, timeout_s=3.0)
    proc = j.procs[1]
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    assert proc.stdout is not None
    while time.monotonic() < deadline:  # rank 1 compiled, then waits to be killed
        line = proc.stdout.readline()
        if "READY" in line or not line:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    results = j.wait(ranks=[0, 2])
    for rank in (0, 2):
        assert results[rank]["errors"] == []
        missing = [d for d in j.events(rank, "jax.compile.divergence")
                   if d["divergence_kind"] == "missing"]
        assert missing and missing[0]["missing_ranks"] == [1]


def test_on_divergence_raise_raises_from_the_diverging_call(job):
    j = job("shape", 2, timeout_s=20.0, on_divergence="raise")
    results = j.wait()
    for rank in (0, 1):
        [error] = results[rank]["errors"]
        assert "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)" in error
        assert "total" in error


def test_on_divergence_raise_with_a_rank_that_never_arrives(job):
    j = job("extra", 2, timeout_s=2.0, on_divergence="raise")
    results = j.wait()
    assert results[0]["errors"] == []
    [error] = results[1]["errors"]
    assert "rank 0 did not compile total #2 within 2 s of rank 1" in error


def test_no_thread_is_inside_the_client_when_the_interpreter_finalizes(job):
    """A script that ends while its checker thread waits in a blocking read (rank 1 compiled
    once more than rank 0, a 60 s timeout): after every exit handler, JAX's shutdown
    included, no otel_jax thread is inside the coordination client (one that is takes the
    GIL back during finalization when the peer's exit ends the read, and the process
    aborts: "terminate called ... FATAL: exception not rethrown"); exit stays short."""
    j = job("exit_in_read", 2, timeout_s=60.0)
    results = j.wait()  # both exit with status 0
    _exits_with_no_thread_in_the_client(results, (0, 1))


def test_no_thread_is_inside_a_read_of_a_verdict_every_rank_reads_at_finalization(job):
    """Three ranks, two of them compile once more: rank 1 waits in its read of the verdict
    (a key every rank reads) when its script ends, rank 0 (the comparer) in its read of
    ``all``. Exit ends both reads at once, whoever reads the verdict too."""
    j = job("exit_in_read", 3, timeout_s=60.0)
    results = j.wait()
    _exits_with_no_thread_in_the_client(results, (0, 1, 2))


def _exits_with_no_thread_in_the_client(results: dict[int, dict], ranks) -> None:
    for rank in ranks:
        [line] = [ln for ln in results[rank]["stdout"].splitlines() if ln.startswith("EXIT ")]
        exit_ = json.loads(line[len("EXIT "):])
        assert exit_["inside_client"] == [], (rank, exit_)
        assert 0 <= exit_["exit_s"] < 20, (rank, exit_)  # JAX's shutdown barrier included
        print(f"rank {rank}: exit handlers took {exit_['exit_s']:.2f} s")


@pytest.mark.parametrize("count", [2, 4, 8])
def test_traffic_on_the_coordination_service_is_linear_in_the_rank_count(job, count):
    """Every call of each rank's coordination client counted from outside (the client
    object wrapped after jax.devices()): per compile of a 200-leaf train step, three
    calls and about 300 bytes per rank and a few calls more for the comparer, and a
    divergence still named with both sides (a fourth read per rank).
    8 processes on a small machine are slow: few compiles, bounded waits."""
    compiles = 3 if count < 8 else 2
    j = job("fleet", count, timeout_s=30.0 if count < 8 else 60.0)
    results = j.wait()
    same_calls = sum(results[r]["same"]["calls"] for r in range(count)) / compiles
    same_bytes = sum(results[r]["same"]["bytes"] for r in range(count)) / compiles
    # three calls per rank (its entry, its arrival, one read), a few for the comparer
    assert same_calls <= 3 * count + 6, same_calls
    assert same_bytes <= 500 * count + 2_000, same_bytes
    # the divergent compile asks two summaries and names the difference: still linear
    div_calls = sum(results[r]["diverged"]["calls"] for r in range(count))
    div_bytes = sum(results[r]["diverged"]["bytes"] for r in range(count))
    assert div_calls <= 8 * count, div_calls
    assert div_bytes <= 64_000 + 8_000 * count, div_bytes
    last = count - 1
    others = "rank 0" if count == 2 else f"ranks 0-{last - 1}" if count > 3 else "ranks 0,1"
    for rank in range(count):
        [div] = j.events(rank, "jax.compile.divergence")
        assert div["divergence"].startswith(
            f"batch['x']: f32[{12 + compiles},8] ({others}) vs f32[112,8] (rank {last})"), div
        assert div["ranks"] == [list(range(last)), [last]]
        assert div["count"] == compiles + 1
    # from the second compile on: the first one also starts the check's two threads
    cpu = sorted(1000 * c for r in range(count)
                 for c in results[r]["same"]["cpu_per_compile_s"][1:])
    div_cpu = sorted(1000 * results[r]["diverged"]["cpu_s"] for r in range(count))
    print(f"{count} ranks: {same_calls:.0f} calls, {same_bytes / 1000:.1f} KB per compile; "
          f"divergent compile {div_calls} calls, {div_bytes / 1000:.1f} KB; the check's "
          f"threads' CPU per compile: median {cpu[len(cpu) // 2]:.2f} ms, most "
          f"{cpu[-1]:.2f} ms; divergent compile median {div_cpu[count // 2]:.2f} ms, "
          f"most {div_cpu[-1]:.2f} ms")


# --- otel-jax report over the logs of several ranks ---------------------------------------

def _report(args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "otel_jax", "report", *args],
                          input=stdin, capture_output=True, text=True, timeout=120)


def test_report_over_the_logs_of_each_rank_lists_divergences_first(job):
    j = job("shape", 2)
    j.wait()
    proc = _report([str(p) for p in j.logs])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("Divergences between ranks: 1\n")
    assert ("total #1 [signature] batch['x']: f32[4] (rank 0) vs f32[5] (rank 1) "
            "(ranks 0 vs 1; reported by 0,1)") in out
    per_rank = out[out.index("Compiles per rank"):out.index("FUNCTION")]
    assert [line.split() for line in per_rank.splitlines()[2:4]] == [["0", "1", "0"],
                                                                    ["1", "1", "0"]]
    assert "2 jax.compile.divergence events (1 divergences)" in proc.stderr


def test_report_over_one_merged_stream():
    def compile_line(rank: int, count: int) -> str:
        return json.dumps({"event": "jax.compile", "function": "step", "count": count,
                           "is_recompile": count > 1, "process_index": rank,
                           "compile_s": 0.5})

    divergence = {"event": "jax.compile.divergence", "level": "warning", "function": "step",
                  "count": 2, "divergence_kind": "missing",
                  "divergence": "rank 0 did not compile step #2 within 30 s of rank 1",
                  "ranks": [[1]], "missing_ranks": [0], "process_index": 1}
    lines = [compile_line(0, 1), compile_line(1, 1), compile_line(1, 2),
             json.dumps(divergence), "not json {"]
    proc = _report(["--format", "markdown", "-"], stdin="\n".join(lines) + "\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.index("Divergences between ranks: 1") < out.index("Compiles per rank") \
        < out.index("| Function")
    assert "| 0 | 1 | 0 |" in out and "| 1 | 2 | 1 |" in out
    assert "rank 0 did not compile step #2 within 30 s of rank 1" in out


def test_report_of_a_single_process_log_has_no_rank_section():
    line = json.dumps({"event": "jax.compile", "function": "f", "count": 1,
                       "process_index": 0, "compile_s": 0.1})
    proc = _report(["-"], stdin=line + "\n")
    assert proc.returncode == 0
    assert "Divergences" not in proc.stdout and "per rank" not in proc.stdout
