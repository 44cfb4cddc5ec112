"""Emitting off the compiling thread: what is there when the jit call returns, and after
``otel_jax.flush()``."""

from __future__ import annotations

import functools
import gc
import os
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_jax
from otel_jax._core import _failopen
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._core._vocab import Metric
from otel_jax._pipeline import _background
from otel_jax._pipeline._background import WORKER


class BlockingExporter(SpanExporter):
    """Holds the emitting thread in ``export`` until released (at most 30 s)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.exported: list = []

    def export(self, spans):  # type: ignore[no-untyped-def]
        self.entered.set()
        self.release.wait(30)
        self.exported.extend(spans)
        return SpanExportResult.SUCCESS

    def compiles(self) -> list:
        return [s for s in self.exported if s.name.startswith("jax.compile ")]


def short(span) -> str:  # type: ignore[no-untyped-def]
    """A compile span's function, without the test function it is local to."""
    return span.name.rsplit(".", 1)[-1]


def _provider(exporter: SpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def blocked():
    """install() whose spans go to an exporter that blocks until released."""
    otel_jax.uninstall()
    exporter = BlockingExporter()
    reader = InMemoryMetricReader()
    otel_jax.install(tracer_provider=_provider(exporter),
                     meter_provider=MeterProvider(metric_readers=[reader]), log_output=None)
    try:
        yield exporter, reader
    finally:
        exporter.release.set()
        otel_jax.flush()
        otel_jax.uninstall()


def test_spans_arrive_after_flush_and_the_call_does_not_wait_for_the_exporter(blocked):
    exporter, _ = blocked

    @jax.jit
    def held(x):
        return x * 2

    held(jnp.ones(3))  # returns although its span's export blocks
    assert exporter.entered.wait(30)
    assert exporter.compiles() == []
    assert [e.count for e in otel_jax.compile_history(held)] == [1]  # synchronous
    exporter.release.set()
    assert otel_jax.flush() is True
    assert [short(s) for s in exporter.compiles()] == ["held"]


def test_flush_is_bounded_when_the_exporter_blocks(blocked):
    exporter, _ = blocked

    @jax.jit
    def stuck(x):
        return x + 1

    stuck(jnp.ones(3))
    assert exporter.entered.wait(30)
    assert otel_jax.flush(0.05) is False  # gave up: the exporter still holds the thread
    exporter.release.set()
    assert otel_jax.flush(None) is True
    assert len(exporter.compiles()) == 1


def test_a_full_queue_drops_and_counts_never_blocks(blocked, monkeypatch):
    exporter, reader = blocked
    _failopen.reset_warnings()
    monkeypatch.setattr(WORKER, "capacity", 1)

    @jax.jit
    def flood(x):
        return x - 1

    # NumPy inputs: a new shape of jnp.ones would be an eager compile of its own.
    flood(np.ones(1, np.float32))
    assert exporter.entered.wait(30)  # the first compile's emission holds the thread
    before = WORKER.dropped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flood(np.ones(2, np.float32))  # waits to be emitted: the one place there is
        flood(np.ones(3, np.float32))
        flood(np.ones(4, np.float32))
    assert WORKER.dropped == before + 2
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1 and "dropped" in ours[0] and "jax.compile.dropped" in ours[0]
    # The record, the history and the testing kit never lose a compile.
    assert [e.count for e in otel_jax.compile_history(flood)] == [1, 2, 3, 4]
    exporter.release.set()
    assert otel_jax.flush()
    assert [s.attributes["jax.compile.count"] for s in exporter.compiles()] == [1, 2]
    data = reader.get_metrics_data()
    points = [p for rm in data.resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == Metric.DROPPED for p in m.data.data_points]
    assert [p.value for p in points] == [WORKER.dropped]


def test_spans_nest_under_the_users_span_with_the_compiles_own_times():
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    provider = _provider(memory)
    otel_jax.install(tracer_provider=provider, log_output=None)
    tracer = provider.get_tracer("tests")

    @jax.jit
    def nested(x):
        return jnp.sin(x)

    try:
        with tracer.start_as_current_span("train_step") as step:
            nested(jnp.ones(3))
        assert otel_jax.flush()
        [entry] = otel_jax.compile_history(nested)
        [span] = [s for s in memory.get_finished_spans()
                  if s.name.startswith("jax.compile ") and short(s) == "nested"]
        [user] = [s for s in memory.get_finished_spans() if s.name == "train_step"]
    finally:
        otel_jax.uninstall()
    assert span.parent.span_id == step.get_span_context().span_id
    assert span.context.trace_id == step.get_span_context().trace_id
    assert span.start_time == int(entry.timestamp * 1e9)
    assert abs((span.end_time - span.start_time) - entry.compile_s * 1e9) < 1e3
    # The compile's own times, inside the step's, not the time it was emitted at.
    assert user.start_time <= span.start_time <= span.end_time <= user.end_time
    phases = [s for s in memory.get_finished_spans() if s.parent is not None
              and s.parent.span_id == span.context.span_id]
    assert phases and all(span.start_time <= p.start_time <= p.end_time <= span.end_time
                          for p in phases)


def test_uninstall_flushes():
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    otel_jax.install(tracer_provider=_provider(memory), log_output=None)

    @jax.jit
    def last(x):
        return x * 3

    last(jnp.ones(3))
    otel_jax.uninstall()
    assert [short(s) for s in memory.get_finished_spans()
            if s.name.startswith("jax.compile ")] == ["last"]


def test_testing_kit_and_raise_policy_see_each_compile_before_the_call_returns(blocked):
    exporter, _ = blocked

    @jax.jit
    def guarded(x):
        return x / 2

    with otel_jax.testing.record_compiles(guarded) as compiles:
        guarded(jnp.ones(3))
        assert exporter.entered.wait(30)  # the span is still waiting to be exported
        assert [r.cause_kind.value for r in compiles] == ["first_compile"]
    with pytest.raises(AssertionError, match="expected at most 0 compilations"), \
            otel_jax.testing.assert_max_compiles(0, fn=guarded):
        guarded(jnp.ones(4))
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=_provider(exporter), log_output=None,
                     on_recompile="raise")
    otel_jax.mark_warmup_done()
    with pytest.raises(otel_jax.RecompileError, match="f32\\[4\\] -> f32\\[5\\]"):
        guarded(jnp.ones(5))
    assert exporter.compiles() == []  # all of it while the exporter was still held
    # The refused compile is forgotten (JAX compiles it again on a retry), as before.
    assert [e.count for e in otel_jax.compile_history(guarded)] == [1, 2]


def test_emitting_on_the_compiling_thread_when_asked(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_EMIT_IN_BACKGROUND", "false")
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    handle = otel_jax.install(tracer_provider=_provider(memory), log_output=None)
    assert handle._options.emit_in_background is False

    @jax.jit
    def inline(x):
        return x + 2

    pending = WORKER.pending
    try:
        inline(jnp.ones(3))
        names = [short(s) for s in memory.get_finished_spans()]  # no flush: already there
    finally:
        otel_jax.uninstall()
    assert "inline" in names
    assert WORKER.pending == pending


def test_flush_from_an_emitting_job_does_not_wait_for_itself():
    worker = _background.Worker()
    answers: list[bool] = []
    done = threading.Event()

    def job() -> None:
        answers.append(worker.flush(30))
        done.set()

    assert worker.submit(job)
    assert done.wait(30) and worker.flush(30)
    assert answers == [False]  # itself is still running: not everything was emitted


@pytest.fixture
def held_worker():
    """install() at its defaults, with otel_jax's background thread held by a job until
    released: what it is to do waits, as behind a slow exporter."""
    otel_jax.uninstall()
    memory = InMemorySpanExporter()
    otel_jax.install(tracer_provider=_provider(memory), log_output=None)
    release, entered = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(30)

    WORKER.submit(hold)
    assert entered.wait(30)
    try:
        yield release, memory
    finally:
        release.set()
        otel_jax.flush()
        otel_jax.uninstall()


def _made_where(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The names of the threads that make compile records, in order."""
    from otel_jax._pipeline import _assemble

    threads: list[str] = []
    real = _assemble.assemble

    def assemble(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(_assemble, "assemble", assemble)
    return threads


def test_records_are_made_after_the_call_with_what_died_with_it(held_worker, monkeypatch):
    release, memory = held_worker
    threads = _made_where(monkeypatch)

    def run(n: int, scale: float) -> str:
        scaled = jax.jit(lambda x: x * scale)  # gone when run returns
        scaled(np.ones(n, np.float32))
        scaled(np.ones(n + 1, np.float32))
        return scaled.__qualname__

    name = run(3, 2.0)
    assert run(3, 3.0) == name  # a new function object of the same source, at 3 again
    gc.collect()
    assert threads == []  # the calls returned; nothing is made while the thread is held
    release.set()
    assert otel_jax.flush()  # made now, where flush() finds them still to be made
    assert len(threads) == 4
    entries = otel_jax.compile_history(name)
    assert [e.count for e in entries] == [1, 2, 3, 4]
    # Both objects were gone when the third record was made: still two objects, and the
    # second and fourth still one object each (an id, reused at once, would say neither).
    assert [e.cause_kind for e in entries] == [
        "first_compile", "shape", "function_identity", "shape"]
    assert "scale" in entries[2].cause  # the closure's value, read in the call: 2.0 -> 3.0
    assert "2.0" in entries[2].cause and "3.0" in entries[2].cause
    assert otel_jax.flush()
    spans = [s for s in memory.get_finished_spans() if s.name.startswith("jax.compile ")]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        e.cause_kind for e in entries]


class Knob:  # no __eq__ or __hash__: JAX's cache tells instances apart by identity
    def __init__(self, level: int) -> None:
        self.level = level


def test_a_static_value_changed_after_the_call_reads_as_it_was(held_worker, monkeypatch):
    release, _ = held_worker

    @functools.partial(jax.jit, static_argnames="knob")
    def tuned(x, knob):
        return x * knob.level

    first, second = Knob(1), Knob(2)
    tuned(np.ones(3, np.float32), knob=first)
    tuned(np.ones(3, np.float32), knob=second)
    second.level = 7  # after the call, before its record is made
    tuned(np.ones(3, np.float32), knob=first)  # the first object again: JAX's cache hit
    release.set()
    entries = otel_jax.compile_history(tuned)
    assert [e.count for e in entries] == [1, 2]
    assert entries[1].cause_kind == "static_argument"
    assert "level: 1 -> 2" in entries[1].cause  # as at the call, not 1 -> 7


def test_what_needs_the_record_at_the_call_gets_it_there(held_worker, monkeypatch):
    release, _ = held_worker
    threads = _made_where(monkeypatch)

    @jax.jit
    def watched(x):
        return x + 1

    with otel_jax.testing.record_compiles(watched) as compiles:
        watched(np.ones(3, np.float32))
        assert [r.count for r in compiles] == [1]  # before the thread was released
    assert threads == [threading.current_thread().name]
    release.set()


def test_a_backed_up_thread_leaves_the_compiling_thread_to_make_records(
        held_worker, monkeypatch):
    release, _ = held_worker
    threads = _made_where(monkeypatch)
    monkeypatch.setattr(WORKER, "capacity", 8)  # 4 records waiting to be made fill half

    @jax.jit
    def flood(x):
        return x - 1

    for n in range(1, 7):
        flood(np.ones(n, np.float32))
    here = threading.current_thread().name
    # The 4th compile found half the queue waiting: it made the four records, oldest first.
    assert threads == [here] * 4
    entries = otel_jax.compile_history(flood)  # the last two, made here, though still held
    assert threads == [here] * 6
    assert [e.count for e in entries] == [1, 2, 3, 4, 5, 6]
    assert [e.cause_kind for e in entries] == ["first_compile"] + ["shape"] * 5
    release.set()
    assert otel_jax.flush()


def test_compile_history_does_not_wait_for_a_held_thread(held_worker, monkeypatch):
    release, memory = held_worker
    threads = _made_where(monkeypatch)

    @jax.jit
    def late(x):
        return x * 5

    late(np.ones(3, np.float32))
    late(np.ones(4, np.float32))
    t0 = time.monotonic()
    entries = otel_jax.compile_history(late)  # made here, now: the thread is still held
    assert time.monotonic() - t0 < 5.0
    assert threads == [threading.current_thread().name] * 2
    assert [(e.count, e.cause_kind) for e in entries] == [(1, "first_compile"), (2, "shape")]
    assert [s for s in memory.get_finished_spans() if s.name.startswith("jax.compile ")] == []
    release.set()
    assert otel_jax.flush()  # emitted by the thread, once free, in order
    spans = [s for s in memory.get_finished_spans() if s.name.startswith("jax.compile ")]
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_wait_for_the_parents_records(held_worker):
    release, _ = held_worker

    @jax.jit
    def before_fork(x):
        return x + 3

    before_fork(np.ones(3, np.float32))  # its record waits for the held thread
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns that a threaded process forks
        pid = os.fork()
    if pid == 0:  # the child: the parent's thread, and its pending records, are not here
        code = 1
        try:
            t0 = time.monotonic()
            otel_jax.compile_history(before_fork)
            code = 0 if time.monotonic() - t0 < 2.0 else 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    release.set()
    assert [e.count for e in otel_jax.compile_history(before_fork)] == [1]


def test_the_collector_stays_the_programs_while_otel_jaxs_thread_is_held(blocked):
    # The program's collector is never switched by otel_jax: while an exporter holds
    # otel_jax's thread, young collections go on, and the program's own gc.disable() made
    # meanwhile still holds once the thread let go.
    exporter, _ = blocked
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 0:
            collections.append(1)

    @jax.jit
    def held(x):
        return x * 4

    held(np.ones(3, np.float32))
    assert exporter.entered.wait(30)  # otel_jax's thread is inside the exporter
    assert gc.isenabled()
    gc.callbacks.append(count)
    try:
        for _ in range(100_000):  # cyclic garbage: only the collector frees it
            cycle: list = []
            cycle.append(cycle)
    finally:
        gc.callbacks.remove(count)
    assert len(collections) > 10
    gc.disable()
    try:
        exporter.release.set()
        assert otel_jax.flush(30)
        assert not gc.isenabled()
        held(np.ones(4, np.float32))  # another compile, emitted while it is off
        assert otel_jax.flush(30)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_thread_ends_at_exit_within_its_bound_and_drops_what_keeps_coming():
    # At the process's exit a job that keeps making work (a processor that compiles at
    # every span) gives up once the bound passed: the thread ends, the rest is counted.
    worker = _background.Worker()
    emitted: list[int] = []

    def job(n: int) -> None:
        emitted.append(n)
        time.sleep(0.01)
        if worker.overdue():
            worker.dropped += 1
            return
        worker.submit(functools.partial(job, n + 1))  # from the thread: queued, not run here

    worker.submit(functools.partial(job, 0))
    deadline = time.monotonic() + 30
    while not emitted and time.monotonic() < deadline:
        time.sleep(0.01)
    thread = worker._thread
    assert thread is not None
    worker.stop(0.2)  # past 0.2 s the job running drops the rest: the thread then ends
    thread.join(30)
    assert not thread.is_alive() and worker._thread is None
    assert worker.dropped == 1 and 5 < len(emitted) < 1000
    ran: list[int] = []
    assert worker.submit(lambda: ran.append(threading.get_ident())) is False
    assert ran == [threading.get_ident()]  # later jobs run on the caller's thread


def test_a_chain_of_jobs_run_on_the_exiting_thread_ends_within_its_bound(monkeypatch):
    # Once the thread has ended, a compile's job runs on the exiting thread, and so do the
    # jobs its emission hands over: a processor that compiles at every span makes one at
    # every job. Past the bound the chain drops the rest, and the exit goes on.
    monkeypatch.setattr(_background, "EXIT_CHAIN_S", 0.2, raising=False)
    worker = _background.Worker()
    worker.stop(0)  # as at exit, with no thread started
    emitted: list[int] = []

    def job(n: int) -> None:
        emitted.append(n)
        time.sleep(0.01)
        if worker.overdue() or n >= 1000:  # the cap only ends the test when nothing would
            worker.dropped += 1
            return
        worker.submit(functools.partial(job, n + 1))  # from the job: runs after it, here

    assert worker.submit(functools.partial(job, 0)) is False  # run here, not queued
    assert worker.dropped == 1 and 5 < len(emitted) < 1000, len(emitted)
    assert not worker.overdue()  # the next compile's own job runs, with a bound of its own
    assert worker.submit(lambda: emitted.append(-1)) is False and emitted[-1] == -1


def test_a_thread_that_does_not_come_back_at_exit_is_named(monkeypatch):
    entered, release = threading.Event(), threading.Event()

    class Holder:
        def __init__(self) -> None:
            self.thread = threading.Thread(target=self.work, name="otel_jax-test", daemon=True)

        def work(self) -> None:
            entered.set()
            stuck_in_the_programs_code()

        def end_by(self, deadline: float) -> threading.Thread:
            return self.thread

    def stuck_in_the_programs_code() -> None:
        release.wait(30)

    monkeypatch.setattr(_background, "_OURS", "/nowhere/")  # this file is not otel_jax's
    monkeypatch.setattr(_background, "_ENDING", __import__("weakref").WeakSet())
    holder = Holder()
    _background.ends_at_exit(holder)
    holder.thread.start()
    assert entered.wait(30)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert _background.end_threads_at_exit(0.05) == [holder.thread]
    finally:
        release.set()
    [said] = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert "otel_jax-test in " in said and "stuck_in_the_programs_code" in said, said


def test_compile_history_sees_every_compile_that_returned_however_long_its_record_takes(
        monkeypatch):
    # A loaded machine: otel_jax's thread takes longer to make a record than any fixed
    # wait would allow. The history still holds every compile that returned.
    from otel_jax._pipeline._engine import ENGINE

    otel_jax.uninstall()
    otel_jax.install(log_output=None)
    making = threading.Event()
    build = ENGINE._build_record

    def slow(captured, route):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "otel_jax-emit" and not making.is_set():
            making.set()
            time.sleep(6.0)  # longer than the 5 s the kit used to wait
        return build(captured, route)

    monkeypatch.setattr(ENGINE, "_build_record", slow)
    try:
        @jax.jit
        def loaded(x):
            return x * 7

        loaded(np.ones(3, np.float32))
        loaded(np.ones(4, np.float32))
        assert making.wait(60)  # the thread is making the first record
        entries = otel_jax.compile_history(loaded)
        assert [(e.count, e.cause_kind) for e in entries] == [
            (1, "first_compile"), (2, "shape")]
    finally:
        otel_jax.flush()
        otel_jax.uninstall()


def _exit_in_background(seconds: float = 0.05) -> tuple[threading.Event, list, list]:
    """``end_threads_at_exit(seconds)`` on a thread of its own: (ended, what it returned,
    the OtelJaxWarnings it said)."""
    ended, stuck, said = threading.Event(), [], []

    def exit_now() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stuck.extend(_background.end_threads_at_exit(seconds))
        said.extend(str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning))
        ended.set()

    threading.Thread(target=exit_now, daemon=True).start()
    return ended, stuck, said


def test_the_exit_waits_for_the_applications_code_blocked_in_native_code_to_its_end(
        monkeypatch):
    # A span processor of the application's that runs a computation on otel_jax's thread
    # (``jax.jit(big)(x).block_until_ready()``) is blocked in C++: no Python frame of
    # JAX's on its stack says where it is. Its call is marked as the application's code,
    # and the exit waits for it to its end, saying so once.
    from otel_jax._core import _where

    entered, release = threading.Event(), threading.Event()

    def emission() -> None:
        with _where.THEIRS:  # what otel_jax's emission does around the SDK's calls
            entered.set()
            release.wait(60)  # in C, as a computation's wait is

    monkeypatch.setattr(_background, "_ENDING", __import__("weakref").WeakSet())
    thread = threading.Thread(target=emission, name="otel_jax-test", daemon=True)
    thread.start()
    assert entered.wait(30)
    try:
        ended, stuck, said = _exit_in_background()
        assert not ended.wait(1.5), "the exit did not wait for the application's code"
    finally:
        release.set()
    assert ended.wait(30), "the exit did not end once the application's code returned"
    assert stuck == [], stuck
    assert len([s for s in said if "waiting for the application's code" in s]) == 1, said
    assert any("otel_jax-test" in s for s in said), said


def test_the_exit_waits_for_otel_jaxs_own_call_into_jax_until_it_returns_and_no_longer(
        monkeypatch):
    # A gauge of otel_jax's that reads JAX on the SDK's metric reader thread: waited for
    # until that call returns (nothing is torn down inside C++), not said as the
    # application's, and not waited for once the reader is back in its own wait (which,
    # for a reader's loop, never ends).
    from otel_jax._core import _where

    entered, leave_jax, stop = threading.Event(), threading.Event(), threading.Event()

    @_where.jax_call
    def read_device() -> None:
        entered.set()
        leave_jax.wait(60)

    def reader_loop() -> None:
        read_device()
        stop.wait(60)

    monkeypatch.setattr(_background, "_ENDING", __import__("weakref").WeakSet())
    thread = threading.Thread(target=reader_loop, name="OtelPeriodicExportingMetricReader",
                              daemon=True)
    thread.start()
    assert entered.wait(30)
    try:
        ended, stuck, said = _exit_in_background()
        assert not ended.wait(1.5), "the exit did not wait for otel_jax's call into JAX"
        leave_jax.set()
        assert ended.wait(30), "the exit waited for the reader's own loop"
    finally:
        leave_jax.set()
        stop.set()
    assert stuck == [] and said == [], (stuck, said)


def test_the_exit_waits_for_the_applications_code_within_a_bound(monkeypatch):
    # One that never comes back (or a chain of them) costs the exit EXIT_THEIRS_S at most,
    # then one line names it.
    from otel_jax._core import _where

    entered, release = threading.Event(), threading.Event()

    def processor_of_theirs() -> None:
        with _where.THEIRS:
            entered.set()
            release.wait(60)

    monkeypatch.setattr(_background, "_ENDING", __import__("weakref").WeakSet())
    monkeypatch.setattr(_background, "EXIT_THEIRS_S", 1.0)
    thread = threading.Thread(target=processor_of_theirs, name="otel_jax-test", daemon=True)
    thread.start()
    assert entered.wait(30)
    try:
        started = time.monotonic()
        ended, stuck, said = _exit_in_background()
        assert ended.wait(30)
        assert time.monotonic() - started < 20
    finally:
        release.set()
    assert stuck == [thread]
    assert any("waiting for the application's code" in s for s in said), said
    assert any("otel_jax-test in " in s for s in said), said


def test_a_call_into_jax_that_a_daemon_thread_starts_once_the_exit_stopped_waiting_parks():
    # Past the exit's wait, a thread of otel_jax's that goes on to its next job (the record
    # of a compile the application's code made) does not start a call into JAX the
    # interpreter's teardown would find it inside of.
    from otel_jax._core import _where

    called, returned = threading.Event(), threading.Event()

    @_where.jax_call
    def into_jax() -> None:
        called.set()

    def job() -> None:
        into_jax()
        returned.set()

    _where.close()
    try:
        thread = threading.Thread(target=job, name="otel_jax-test", daemon=True)
        thread.start()
        assert not returned.wait(0.5) and not called.is_set()
        into_jax()  # the exiting thread itself goes on
        assert called.is_set()
        called.clear()
    finally:
        _where.reopen()
    assert returned.wait(30) and called.is_set()  # reopened (a fork, a test): it goes on
