"""The emitter contract (``otel_jax/_pipeline/_emitter.py``): one route for compiles,
storms and divergences, the span emitter's link handed to every other emitter, each
emitter failing open on its own; and where a storm is said when no log line is."""

from __future__ import annotations

import io
import json
import logging
import warnings

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax._capture._source import FunctionInfo
from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import DivergenceKind
from otel_jax._pipeline._emitter import STDLIB_WARNINGS, Route
from otel_jax._pipeline._engine import ENGINE
from otel_jax._pipeline._record import Divergence, SpanLink, Storm

LINK = SpanLink("0" * 31 + "1", "0" * 15 + "2")
STORM = Storm(FunctionInfo("train_step", "train.py", 3), 8, 8, {"shape": 8}, "x: f32[8] -> f32[9]",
              "pad to a bucket")
DIVERGENCE = Divergence("train_step", 2, DivergenceKind.SIGNATURE, "x: f32[4] (rank 0) vs "
                        "f32[5] (rank 1)", ((0,), (1,)))


class Spans:
    """A link emitter: says which record it saw, returns a fixed link."""

    def __init__(self, seen: list, link: SpanLink | None = LINK) -> None:
        self.seen, self.link = seen, link

    def compile(self, record):
        self.seen.append(("span", record))
        return self.link

    def storm(self, storm):
        self.seen.append(("span storm", storm))

    def divergence(self, divergence):
        self.seen.append(("span divergence", divergence))


class Kept:
    def __init__(self, name: str, seen: list, fail: bool = False) -> None:
        self.name, self.seen, self.fail = name, seen, fail

    def compile(self, record, link):
        if self.fail:
            raise ValueError(f"{self.name} down")
        self.seen.append((self.name, record, link))

    def storm(self, storm):
        if self.fail:
            raise ValueError(f"{self.name} down")
        self.seen.append((self.name + " storm", storm))

    def divergence(self, divergence):
        if self.fail:
            raise ValueError(f"{self.name} down")
        self.seen.append((self.name + " divergence", divergence))


@pytest.mark.injects_errors
def test_the_link_emitter_runs_first_and_every_emitter_gets_its_link():
    seen: list = []
    failopen = FailOpen()
    route = Route(failopen, Spans(seen), [Kept("a", seen), Kept("broken", seen, fail=True),
                                          Kept("b", seen)])
    record = object()  # the route hands records on; it reads nothing of them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert route.compile(record) == LINK  # type: ignore[arg-type]
        route.storm(STORM)
        route.divergence(DIVERGENCE)
    assert seen == [("span", record), ("a", record, LINK), ("b", record, LINK),
                    ("span storm", STORM), ("a storm", STORM), ("b storm", STORM),
                    ("span divergence", DIVERGENCE), ("a divergence", DIVERGENCE),
                    ("b divergence", DIVERGENCE)]
    # One emitter down costs its own output, counted, and one warning per place.
    assert failopen.internal_errors == 3
    said = [str(w.message) for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)]
    assert len(said) == 3 and all("broken down" in s for s in said)


@pytest.mark.injects_errors
def test_a_failing_span_emitter_leaves_the_others_a_record_without_link():
    seen: list = []

    class Broken(Spans):
        def compile(self, record):
            raise RuntimeError("tracer gone")

    failopen = FailOpen()
    route = Route(failopen, Broken(seen), [Kept("a", seen)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert route.compile("r") is None  # type: ignore[arg-type]
    assert seen == [("a", "r", None)] and failopen.internal_errors == 1


def test_a_joined_route_is_a_new_route():
    seen: list = []
    first = Route(FailOpen(), Spans(seen), [Kept("a", seen)])
    both = first.joined([Kept("b", seen)])
    first.compile("r")  # type: ignore[arg-type]
    assert seen == [("span", "r"), ("a", "r", LINK)]
    seen.clear()
    both.compile("r")  # type: ignore[arg-type]
    assert seen == [("span", "r"), ("a", "r", LINK), ("b", "r", LINK)]


def test_stdlib_warnings_say_storms_and_divergences(caplog):
    with caplog.at_level("WARNING", logger="otel_jax"):
        STDLIB_WARNINGS.storm(STORM)
        STDLIB_WARNINGS.divergence(DIVERGENCE)
        STDLIB_WARNINGS.compile("r", LINK)  # type: ignore[arg-type]  # nothing: not its to say
    assert [r.getMessage() for r in caplog.records] == [
        "train_step recompiled 8 times (threshold 8); causes so far: {'shape': 8}; "
        "last: x: f32[8] -> f32[9]",
        "train_step: ranks diverge at compile #2 (signature): x: f32[4] (rank 0) vs "
        "f32[5] (rank 1)"]


def _storm(f) -> None:
    for n in range(1, 11):
        jax.jit(f)(jnp.ones(n))  # a new shape each call: 9 recompiles


def _storm_records(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "otel_jax" and "recompiled" in r.getMessage()]


def test_a_storm_without_log_lines_is_a_logging_warning(caplog):
    otel_jax.uninstall()
    otel_jax.install(log_output=None, storm_threshold=3)
    try:
        with caplog.at_level("WARNING", logger="otel_jax"):
            with otel_jax.testing.record_compiles() as recorder:
                def no_lines(x):
                    return x + 1

                _storm(no_lines)
    finally:
        otel_jax.uninstall()
    said = _storm_records(caplog)
    assert len(said) == 1 and "recompiled 3 times (threshold 3)" in said[0]
    assert "{'shape': 3}" in said[0]
    assert recorder.count == 10  # the recorder got every compile through the same route


def test_a_storm_with_log_lines_is_said_there_only(caplog):
    otel_jax.uninstall()
    stream = io.StringIO()
    otel_jax.install(log_output=stream, storm_threshold=3)
    try:
        with caplog.at_level("WARNING", logger="otel_jax"):
            def with_lines(x):
                return x + 1

            _storm(with_lines)
    finally:
        otel_jax.uninstall()
    assert _storm_records(caplog) == []
    otel_jax.flush()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["recompiles"] for line in lines if line["event"] == "jax.recompile_storm"
            ] == [3]


def test_a_storm_under_a_recorder_alone_is_a_logging_warning(caplog):
    otel_jax.uninstall()
    ENGINE.storm_threshold, threshold = 3, ENGINE.storm_threshold
    try:
        with caplog.at_level(logging.WARNING, logger="otel_jax"):
            with otel_jax.testing.record_compiles() as recorder:
                def recorder_only(x):
                    return x + 1

                _storm(recorder_only)
    finally:
        ENGINE.storm_threshold = threshold
    assert len(_storm_records(caplog)) == 1 and recorder.count == 10
