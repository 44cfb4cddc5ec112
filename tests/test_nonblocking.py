"""The JSON log line never blocks the user's call (issue 12, item 2).

It is rendered and written by one daemon thread from a bounded queue; a
stream that does not keep up costs dropped lines (counted, one warning, a
final count at exit), never a jit call that does not return. Bounds below are
generous on purpose: the suite runs on a loaded 2-core machine; what they
catch is a call that never returns.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_jax
from otel_jax import OtelJaxWarning
from otel_jax._core._vocab import Attr
from otel_jax._emit import _logs
from otel_jax._pipeline._background import WORKER

HANG = 120.0  # seconds: far beyond any honest run, short of a hang


CHILD = textwrap.dedent("""
    import os, sys
    import jax, jax.numpy as jnp
    import otel_jax
    from otel_jax._emit import _logs
    if len(sys.argv) > 1:
        _logs.QUEUE_SIZE = int(sys.argv[1])
    otel_jax.install()  # JSON lines on stderr, which nobody reads

    @jax.jit
    def f(x):
        return x * 2

    # each shape compiles again: one line of about 1 KB per compile, so that the 64 KiB
    # pipe fills after about 66 and as many more must go by without blocking the loop
    for n in range(1, 141):
        f(jnp.ones(n))
    dropped = sum(e.dropped for e in list(_logs._live))
    print(f"DONE dropped={dropped}", flush=True)
""")


@pytest.mark.parametrize("queue_size", [None, 8], ids=["default queue", "queue of 8"])
def test_a_stderr_pipe_nobody_reads_does_not_stop_the_loop(tmp_path, queue_size):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    env["JAX_PLATFORMS"] = "cpu"
    out = (tmp_path / "stdout.txt").open("w")
    args = [sys.executable, "-c", CHILD] + ([] if queue_size is None else [str(queue_size)])
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, env=env)
    try:
        rc = proc.wait(timeout=HANG + 180)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the child never finished: a jit call blocked on the full stderr pipe")
    finally:
        out.close()
        proc.stderr.close()
    elapsed = time.monotonic() - started
    text = (tmp_path / "stdout.txt").read_text()
    assert rc == 0, text
    assert "DONE" in text
    if queue_size is not None:
        assert int(text.split("dropped=")[1]) > 0  # the pipe filled, the queue filled
    assert elapsed < HANG + 180


class _Gate:
    """A stream whose writes wait until the test opens the gate."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.open.wait()
        self.lines.extend(text.splitlines())
        return len(text)

    def flush(self) -> None:
        pass


def _compile_n(n: int, name: str = "g") -> float:
    def g(x):
        return x + 1
    g.__name__ = g.__qualname__ = name
    jitted = jax.jit(g)
    started = time.monotonic()
    for i in range(1, n + 1):
        jitted(jnp.ones(i))
    return time.monotonic() - started


def test_a_blocked_stream_drops_and_counts_and_warns_once(monkeypatch):
    monkeypatch.setattr(_logs, "QUEUE_SIZE", 4)
    gate = _Gate()
    otel_jax.uninstall()
    otel_jax.install(log_output=gate, storm_threshold=1000)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            elapsed = _compile_n(12, "blocked")
            # The lines reach the log emitter off the compiling thread; its writer is
            # blocked, but handing it lines never blocks.
            assert WORKER.flush(HANG)
        emitter = next(s for s in otel_jax.installation().sinks
                       if isinstance(s, _logs.JsonLogEmitter))
        assert elapsed < HANG
        # 12 lines: the writer's batch (blocked; at most the 4 the queue held when it
        # woke: one line, on a quiet machine), 4 queued again, the rest dropped
        assert emitter.dropped >= 12 - 4 - 4
        dropped_warnings = [w for w in caught if issubclass(w.category, OtelJaxWarning)
                            and "dropped" in str(w.message)]
        assert len(dropped_warnings) == 1
        assert not emitter.flush(0.2)  # bounded: the stream is still blocked
        gate.open.set()
        assert emitter.flush(HANG)
        written = [json.loads(line) for line in gate.lines]
        assert [r["count"] for r in written] == sorted(r["count"] for r in written)
        assert len(written) + emitter.dropped == 12
    finally:
        gate.open.set()
        otel_jax.uninstall()


def test_a_blocked_stream_costs_log_lines_only_never_a_compiles_spans(monkeypatch):
    # The writer falls behind the emitting thread by more than the bound of what waits for
    # that thread: every compile is still emitted and exported, none counted in
    # jax.compile.dropped; only the log lines that did not fit are dropped, counted apart.
    monkeypatch.setattr(_logs, "QUEUE_SIZE", 4)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gate = _Gate()
    otel_jax.uninstall()
    dropped_before = WORKER.dropped
    otel_jax.install(tracer_provider=provider, log_output=gate, storm_threshold=1000)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OtelJaxWarning)
            _compile_n(12, "outpaced")
            assert WORKER.flush(HANG)
        emitter = next(s for s in otel_jax.installation().sinks
                       if isinstance(s, _logs.JsonLogEmitter))
        counts = [s.attributes[Attr.COUNT] for s in exporter.get_finished_spans()
                  if str(s.attributes.get(Attr.FUNCTION, "")).endswith("outpaced")]
        assert sorted(counts) == list(range(1, 13))
        assert WORKER.dropped == dropped_before
        assert emitter.dropped >= 12 - 4 - 4
    finally:
        gate.open.set()
        otel_jax.uninstall()


SLOW_AT_EXIT = textwrap.dedent("""
    import atexit, os, threading, time
    written = []
    # registered before otel_jax's own exit handlers: runs after all of them
    atexit.register(lambda: os.write(1, f"WRITTEN {len(written)}\\n".encode()))
    from otel_jax._emit import _logs

    class Slow:  # a stream that keeps up with a line now and then, never with 200
        def write(self, text):
            time.sleep(0.4)
            written.extend(text.splitlines())

        def flush(self):
            pass

    emitter = _logs.JsonLogEmitter(Slow())
    for number in range(200):
        emitter.step({"step_name": "train", "step_number": number})
""")


def test_lines_left_when_the_exits_bound_passes_are_said_with_why():
    done = subprocess.run([sys.executable, "-c", SLOW_AT_EXIT], capture_output=True,
                          text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-2000:]
    [said] = [line for line in done.stderr.splitlines() if "were dropped" in line]
    assert "the exit's bound passed before they were written" in said, said
    dropped = int(said.split("dropped in this process: ")[1].split()[0])
    written = int(done.stdout.split("WRITTEN ")[1])
    # the words count every line that was not written, but a batch in the writer's hands
    assert dropped > 0 and 200 - 64 <= dropped + written <= 200, (said, written)


def test_uninstall_is_bounded_when_the_stream_never_returns():
    gate = _Gate()
    otel_jax.uninstall()
    otel_jax.install(log_output=gate)
    try:
        _compile_n(3, "never_returns")
        started = time.monotonic()
        otel_jax.uninstall()
        assert time.monotonic() - started < _logs.UNINSTALL_FLUSH_S + 30
    finally:
        gate.open.set()
        otel_jax.uninstall()


def test_lines_reach_a_stream_that_keeps_up_in_order_after_flush():
    class Lines:
        def __init__(self):
            self.text = []

        def write(self, text):
            self.text.append(text)

    stream = Lines()
    otel_jax.uninstall()
    otel_jax.install(log_output=stream)
    try:
        _compile_n(5, "in_order")
        assert otel_jax.flush(HANG)
        records = [json.loads(line) for line in "".join(stream.text).splitlines()]
        mine = [r for r in records if r["function"].endswith("in_order")]
        assert [r["count"] for r in mine] == [1, 2, 3, 4, 5]
        assert list(mine[0])[:4] == ["timestamp", "level", "event", "logger"]
        assert mine[0]["timestamp"].endswith("Z") and mine[0]["level"] == "info"
    finally:
        otel_jax.uninstall()


class _Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def write(self, text: str) -> int:
        raise self.exc

    def flush(self) -> None:
        pass


class _Slow:
    def write(self, text: str) -> int:
        time.sleep(0.05)
        return len(text)

    def flush(self) -> None:
        pass


def _closed() -> io.StringIO:
    s = io.StringIO()
    s.close()
    return s


# The fault family "the log stream misbehaves", one case per way it can.
STREAMS = {
    "blocks forever": _Gate,
    "raises OSError": lambda: _Raises(OSError(28, "No space left on device")),
    "broken pipe": lambda: _Raises(BrokenPipeError(32, "Broken pipe")),
    "closed StringIO": _closed,
    "slow": _Slow,
    "no flush method": lambda: type("W", (), {"write": lambda self, t: len(t)})(),
}


@pytest.mark.parametrize("kind", sorted(STREAMS))
def test_a_misbehaving_log_stream_never_reaches_the_user(kind):
    stream = STREAMS[kind]()
    otel_jax.uninstall()
    otel_jax.install(log_output=stream)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OtelJaxWarning)

            @jax.jit
            def h(x):
                return x * 3

            for n in (1, 2, 3, 4):
                assert float(h(jnp.ones(n)).sum()) == 3.0 * n
            started = time.monotonic()
            otel_jax.uninstall()
            assert time.monotonic() - started < _logs.UNINSTALL_FLUSH_S + 30
    finally:
        if isinstance(stream, _Gate):
            stream.open.set()
        otel_jax.uninstall()


def _fork() -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX and Python warn about fork with threads
        return os.fork()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_writes_with_its_own_writer(tmp_path):
    # The child must not run JAX (its threads do not survive fork): it logs
    # through the emitter directly.
    path = tmp_path / "child.log"
    stream = path.open("w")
    emitter = _logs.JsonLogEmitter(stream)
    emitter._emit(20, "jax.compile", {"function": "before_fork"})
    assert emitter.flush(HANG)
    pid = _fork()
    if pid == 0:
        code = 1
        try:
            for i in range(3):
                emitter._emit(20, "jax.compile", {"function": "in_child", "count": i})
            code = 0 if emitter.flush(30) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    emitter.close(HANG)
    stream.close()
    assert os.WEXITSTATUS(status) == 0
    functions = [json.loads(line)["function"] for line in path.read_text().splitlines()]
    assert functions.count("in_child") == 3 and functions.count("before_fork") == 1


class _Held:
    """A stream whose write holds the writer mid-line until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.entered.set()
        self.release.wait(HANG)
        self.lines.append(text)

    def flush(self) -> None:
        pass


def _child_exit_code(pid: int) -> int:
    deadline = time.monotonic() + HANG
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.05)


#: What a flush that returns "promptly" takes at most on a busy machine: far under the
#: 30 s it is given, which a flush waiting for a writer that is not there would use up.
PROMPT_S = 10.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
@pytest.mark.parametrize("writer", ["starts", "refused"])
def test_a_child_forked_while_a_line_is_in_flight_flushes_promptly(writer):
    # The parent's writer holds a line mid-write when the fork is taken: that line is the
    # parent's; the child waits only for its own, and not at all when no writer of its own
    # can run (a thread refused: nothing can arrive).
    stream = _Held()
    emitter = _logs.JsonLogEmitter(stream)
    emitter._emit(20, "jax.compile", {"function": "in_flight"})
    assert stream.entered.wait(HANG)
    pid = _fork()
    if pid == 0:
        code = 1
        try:
            t0 = time.monotonic()
            nothing_of_its_own = emitter.flush(30)
            took = time.monotonic() - t0
            if writer == "refused":
                def refused(*args, **kwargs):
                    raise RuntimeError("can't start new thread")
                _logs.start_thread = refused
                emitter._emit(20, "jax.compile", {"function": "in_child"})  # never raises
                t1 = time.monotonic()
                flushed = emitter.flush(30)
                took = max(took, time.monotonic() - t1)
                ok = (nothing_of_its_own and not flushed and emitter.unwritable() == 1)
            else:
                ok = nothing_of_its_own
            code = 0 if ok and took < PROMPT_S else 2 if not ok else 3
        finally:
            os._exit(code)
    try:
        assert _child_exit_code(pid) == 0  # 2: a wrong answer, 3: it waited
    finally:
        stream.release.set()
    assert emitter.flush(HANG) and [json.loads(t)["function"] for t in stream.lines] == [
        "in_flight"]
    emitter.close(HANG)


class _Stop(BaseException):
    """What ends a thread outright (no ``except Exception`` catches it)."""


def test_a_line_after_the_writer_is_gone_gets_a_writer_of_its_own(monkeypatch):
    # A writer thread ended by an error with a line in hand: that line is counted as
    # dropped, and the next line gets a writer of its own, written and flushed at once,
    # instead of waiting, queued, for a thread that is not there.
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    lines: list[str] = []

    class Ends:
        def write(self, text: str) -> None:
            if not lines:
                lines.append("")
                raise _Stop
            lines.append(text)

        def flush(self) -> None:
            pass

    emitter = _logs.JsonLogEmitter(Ends())
    emitter._emit(20, "jax.compile", {"function": "lost"})
    assert emitter.flush(HANG) and emitter.dropped == 1
    emitter._emit(20, "jax.compile", {"function": "written"})
    t0 = time.monotonic()
    assert emitter.flush(30)
    assert time.monotonic() - t0 < PROMPT_S
    assert [json.loads(t)["function"] for t in lines[1:]] == ["written"]
    emitter.close(HANG)


def test_the_writer_runs_before_the_first_line_so_a_refused_thread_loses_nothing(
        monkeypatch):
    # Python 3.12.0-3.12.1 start no thread once the main thread has finished: a line first
    # written then (a worker thread of the program's compiling while the main thread
    # exits) found no writer, and the exit dropped it. The writer starts with the output.
    lines: list[str] = []

    class Stream:
        def write(self, text: str) -> None:
            lines.append(text)

        def flush(self) -> None:
            pass

    emitter = _logs.JsonLogEmitter(Stream())
    try:
        def refused(*args: object, **kwargs: object) -> threading.Thread:
            raise RuntimeError("can't create new thread at interpreter shutdown")

        monkeypatch.setattr(_logs, "start_thread", refused)
        for n in range(20):
            emitter._emit(20, "jax.compile", {"function": f"f{n}"})
        assert emitter.flush(30) and emitter.dropped == 0
        written = "".join(lines).splitlines()
        assert [json.loads(t)["function"] for t in written] == [f"f{n}" for n in range(20)]
    finally:
        emitter.close(HANG)


UNREAD_EXIT = textwrap.dedent("""
    import sys, time, warnings
    import jax, jax.numpy as jnp
    if sys.argv[1] == "otel_jax":
        import otel_jax
        otel_jax.install()  # JSON lines on stderr, which nobody reads
    f = jax.jit(lambda x: x * 2)
    for n in range(1, 101):
        f(jnp.ones(n)).block_until_ready()
    print(f"MAIN-DONE {time.time()}", flush=True)
""")


def _exit_seconds(tmp_path, how: str) -> float:
    """From the end of the main thread's work to the end of the process, with a small
    stderr pipe nobody reads."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    env.update({"JAX_PLATFORMS": "cpu", "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"})
    out = (tmp_path / f"{how}.txt").open("w")
    proc = subprocess.Popen([sys.executable, "-c", UNREAD_EXIT, how], stdout=out,
                            stderr=subprocess.PIPE, env=env)
    try:
        import fcntl

        fcntl.fcntl(proc.stderr.fileno(), 1031, 4096)  # F_SETPIPE_SZ: a few lines fill it
    except (ImportError, OSError):
        pass
    try:
        rc = proc.wait(timeout=HANG + 180)
        ended = time.time()
    finally:
        out.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    text = (tmp_path / f"{how}.txt").read_text()
    assert rc == 0 and "MAIN-DONE" in text, (rc, text)
    return ended - float(text.split("MAIN-DONE ")[1].split()[0])


def test_the_exit_with_an_unread_stderr_waits_once_not_once_per_write(tmp_path):
    # Every write at exit (the log lines, the words on what was dropped, a warning, the
    # flushes' waits for the writer) shares one deadline: the whole exit takes about one
    # second more than the same program's without otel_jax, not one per write.
    plain = _exit_seconds(tmp_path, "plain")
    ours = _exit_seconds(tmp_path, "otel_jax")
    assert ours - plain < 4.0, (ours, plain)  # was 6 s and more


MAIN_EXITS_FIRST = textwrap.dedent("""
    import sys, threading, time
    import jax, numpy as np
    import otel_jax
    otel_jax.install(log_output=sys.stdout)

    def train():  # the program's own thread: its compiles come once the main thread ended
        time.sleep(0.5)
        for n in range(1, 21):
            jax.jit(lambda x: x * 2)(np.ones(n, np.float32))

    threading.Thread(target=train).start()
    sys.exit(0)
""")


def test_lines_of_compiles_made_after_the_main_thread_exited_are_all_written(tmp_path):
    # On Python 3.12.0-3.12.1 no thread starts once the main thread has finished: the
    # writer, started at the first line, never ran, and every line was dropped.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OTEL_") or k == "OTEL_JAX_HAZARDS"}
    env.update({"JAX_PLATFORMS": "cpu", "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"})
    done = subprocess.run([sys.executable, "-c", MAIN_EXITS_FIRST], capture_output=True,
                          text=True, timeout=HANG + 180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sum(1 for line in lines if line.get("event") == "jax.compile") == 20, (
        done.stdout[-2000:], done.stderr[-2000:])
    assert "dropped" not in done.stderr, done.stderr[-2000:]
