"""pytest plugin of the differential corpus check (``benchmarks/corpus.py`` loads it).

Loaded with ``-p corpus_plugin`` into a run of a peer library's own test suite. In both
runs it turns on ``jax_explain_cache_misses``, counts backend compiles per test with a
``jax.monitoring`` listener of its own (independent of otel_jax) and keeps JAX's cache-miss
explanations per test, in the order they happen. With ``OTEL_JAX_CORPUS_MODE=otel`` it also
calls ``otel_jax.install()`` (JSON lines to a file, as a user would) and keeps otel_jax's
compile records per test. At the end it writes everything to ``OTEL_JAX_CORPUS_OUT`` (JSON).

What it keeps is bounded: texts are cut at ``TEXT_LIMIT`` characters, diffs at
``DIFF_LIMIT`` changes.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

import pytest

MODE_ENV = "OTEL_JAX_CORPUS_MODE"  # "plain" or "otel"
OUT_ENV = "OTEL_JAX_CORPUS_OUT"  # where the run's JSON goes
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
OUTSIDE_TESTS = "<outside tests>"  # compiles while collecting (module imports) or at exit
TEXT_LIMIT = 2000
DIFF_LIMIT = 20
EXPLANATION_MARK = "TRACING CACHE MISS"
CHECKPOINT_EVERY = 200  # tests: a run cut short still leaves what it saw


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "..."


def _under_a_jit() -> bool:
    """Whether the explanation being logged is of a function traced inside another jit's
    trace (it will not be compiled on its own); False when JAX no longer says."""
    try:
        from jax._src import core

        return bool(core.unsafe_am_i_under_a_jit())
    except Exception:
        return False


class _Collector:
    """Events of one run, per test id, in one global order."""

    def __init__(self, mode: str, out: str) -> None:
        self.mode = mode
        self.out = out
        self.lock = threading.Lock()
        self.current = OUTSIDE_TESTS
        self.seq = 0
        self.tests: dict[str, dict[str, Any]] = {}
        self.recorder: Any = None
        self.records_taken = 0
        self.started = time.perf_counter()
        self.install_error: str | None = None

    def _test(self, nodeid: str) -> dict[str, Any]:
        test = self.tests.get(nodeid)
        if test is None:
            test = self.tests[nodeid] = {"outcome": None, "reports": {}, "duration_s": 0.0,
                                         "events": [], "records": []}
        return test

    def _event(self, event: dict[str, Any]) -> None:
        with self.lock:
            self.seq += 1
            event["seq"] = self.seq
            self._test(self.current)["events"].append(event)

    # --- JAX's own reports -------------------------------------------------------------

    def on_duration(self, event: str, duration: float, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self._event({"type": "compile", "fun_name": str(kwargs.get("fun_name", ""))})

    def on_log(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:
            return
        if EXPLANATION_MARK in text:
            self._event({"type": "explain", "text": _cut(text), "nested": _under_a_jit()})

    # --- otel_jax's records ------------------------------------------------------------

    def take_records(self, nodeid: str) -> None:
        """Every record made so far that was not taken yet belongs to ``nodeid``."""
        if self.recorder is None:
            return
        import corpus_hints

        import otel_jax

        otel_jax.flush()
        records = self.recorder.records
        new = records[self.records_taken:]
        self.records_taken = len(records)
        test = self._test(nodeid)
        for r in new:
            test["records"].append({
                "qualname": r.function.qualname,
                "file": r.function.file,
                "line": r.function.line,
                "count": r.count,
                "cause_kind": r.cause_kind.value,
                "cause": _cut(r.cause),
                "diff": [c.as_dict() for c in r.diff.changes[:DIFF_LIMIT]],
                "diff_total": r.diff.total,
                "eager_op": r.eager_op,
                "compared_with": r.compared_with,
                **corpus_hints.record_facts(self.recorder, r),
                "hazards": [h.as_dict() for h in getattr(r, "hazards", ())],
            })

    def write(self, finished: bool = True) -> None:
        dropped = getattr(self.recorder, "dropped", 0) if self.recorder is not None else 0
        import jax

        data = {"mode": self.mode, "jax": jax.__version__,
                "wall_s": time.perf_counter() - self.started,
                "install_error": self.install_error, "records_dropped": dropped,
                "finished": finished, "tests": self.tests}
        with open(self.out + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(self.out + ".tmp", self.out)


class _Handler(logging.Handler):
    def __init__(self, collector: _Collector) -> None:
        super().__init__(logging.WARNING)
        self.collector = collector

    def emit(self, record: logging.LogRecord) -> None:
        self.collector.on_log(record)


_collector: _Collector | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _collector
    mode = os.environ.get(MODE_ENV, "plain")
    out = os.environ.get(OUT_ENV)
    if not out:
        return
    import jax
    from jax._src import monitoring

    collector = _collector = _Collector(mode, out)
    jax.config.update("jax_explain_cache_misses", True)
    monitoring.register_event_duration_secs_listener(collector.on_duration)
    jax_logger = logging.getLogger("jax")
    jax_logger.addHandler(_Handler(collector))
    if jax_logger.getEffectiveLevel() > logging.WARNING:
        jax_logger.setLevel(logging.WARNING)
    if mode == "otel":
        try:
            import corpus_hints  # imports otel_jax: in this run only

            import otel_jax

            log_path = os.path.splitext(out)[0] + ".jsonl"
            # the JSON lines go to a file as a user's would: their cost is part of the run
            # (left open: otel_jax flushes to it at exit)
            stream = open(log_path, "w", encoding="utf-8")
            otel_jax.install(log_output=stream)
            collector.recorder = corpus_hints.Recorder(include_eager=True).__enter__()
        except Exception as exc:  # the run goes on; the comparison says it
            collector.install_error = f"{type(exc).__name__}: {exc}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    collector = _collector
    if collector is None:
        yield
        return
    collector.take_records(OUTSIDE_TESTS)
    collector._test(item.nodeid)
    collector.current = item.nodeid
    try:
        yield
    finally:
        collector.take_records(item.nodeid)
        collector.current = OUTSIDE_TESTS
        if len(collector.tests) % CHECKPOINT_EVERY == 0:
            collector.write(finished=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    collector = _collector
    if collector is None:
        return
    test = collector._test(report.nodeid)
    test["duration_s"] += report.duration
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    test["reports"][report.when] = outcome
    reports = test["reports"]
    if "failed" in reports.values():
        final = "failed"
    elif "xfailed" in reports.values():
        final = "xfailed"
    elif "skipped" in reports.values():
        final = "skipped"
    elif "xpassed" in reports.values():
        final = "xpassed"
    else:
        final = "passed"
    test["outcome"] = final
    if report.failed and "error" not in test:
        test["error"] = _cut(str(report.longreprtext).strip().splitlines()[-1]
                             if report.longreprtext else "")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    collector = _collector
    if collector is None:
        return
    collector.take_records(OUTSIDE_TESTS)
    collector.write()
