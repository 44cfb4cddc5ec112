"""otel_jax.step(): counts warm-up steps; as a context manager or decorator, a step span and
a step-time histogram that says whether the step compiled."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from opentelemetry.trace import StatusCode

import otel_jax
from otel_jax._pipeline._engine import ENGINE


def _step_points(telemetry):
    return list(telemetry.metric_points("jax.step.duration"))


def test_step_span_holds_the_compile_spans_and_the_histogram_says_which_step_compiled(
        telemetry):
    @jax.jit
    def update(x):
        return x * 2

    for n in (3, 3, 4):
        with otel_jax.step("train_step"):
            update(jnp.ones(n))
    steps = [s for s in telemetry.exporter.get_finished_spans() if s.name == "train_step"]
    assert [s.attributes["jax.step.compiled"] for s in steps] == [True, False, True]
    assert [s.attributes["jax.step.compiles"] for s in steps] == [1, 0, 1]
    assert steps[0].attributes["jax.step.compile_s"] > 0
    assert steps[1].attributes["jax.step.compile_s"] == 0
    numbers = [s.attributes["jax.step.number"] for s in steps]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    compiles = telemetry.compiles("test_step_span_holds_the_compile_spans_and_the_histogram"
                                  "_says_which_step_compiled.<locals>.update")
    assert [c.parent.span_id for c in compiles] == [
        steps[0].context.span_id, steps[2].context.span_id]
    by_compiled = {p.attributes["jax.step.compiled"]: p.count for p in _step_points(telemetry)
                   if p.attributes["jax.step.name"] == "train_step"}
    assert by_compiled == {True: 2, False: 1}


def test_decorated_function_is_one_step_per_call_and_counts_warmup(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=2)

    @otel_jax.step
    def train(x):
        return jax.jit(lambda v: v + 1)(x)

    train(jnp.ones(2))
    assert not ENGINE.policy.warmup_done
    train(jnp.ones(2))
    assert not ENGINE.policy.warmup_done  # step 2 is the last of warm-up until step 3 begins
    train(jnp.ones(2))
    assert ENGINE.policy.warmup_done
    steps = [s for s in telemetry.exporter.get_finished_spans()
             if s.name.endswith("<locals>.train")]
    assert len(steps) == 3


def test_bare_call_still_counts_and_decorator_factory_counts_per_call(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=3)
    otel_jax.step()
    otel_jax.step()
    assert not ENGINE.policy.warmup_done

    @otel_jax.step("named")  # creating the decorator is not a step
    def work():
        return 1

    assert not ENGINE.policy.warmup_done
    work()  # step 3: the last of warm-up
    assert not ENGINE.policy.warmup_done
    work()
    assert ENGINE.policy.warmup_done


def test_a_step_that_raises_ends_its_span_as_an_error(telemetry):
    with pytest.raises(ValueError), otel_jax.step("failing"):
        raise ValueError("user error")
    with otel_jax.step("fine"):
        pass
    spans = {s.name: s for s in telemetry.exporter.get_finished_spans()}
    failing, fine = spans["failing"], spans["fine"]
    assert failing.attributes["jax.step.compiled"] is False
    assert failing.status.status_code is StatusCode.ERROR
    assert failing.status.description == "ValueError: user error"
    assert [e.name for e in failing.events] == ["exception"]
    assert fine.status.status_code is StatusCode.UNSET and not fine.events


class _Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no text")


def test_a_step_whose_exception_cannot_print_still_ends_its_span(telemetry):
    with pytest.raises(_Unprintable), otel_jax.step("unprintable"):
        raise _Unprintable()
    [span] = [s for s in telemetry.exporter.get_finished_spans() if s.name == "unprintable"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "_Unprintable"


def _after_warmup_by_input(telemetry, suffix):
    return [(s.attributes["jax.compile.after_warmup"], s.attributes["jax.compile.cause.kind"])
            for s in telemetry.compiles() if s.attributes["code.function.name"].endswith(suffix)]


def test_warmup_is_the_first_n_step_scopes_and_the_gap_after_the_last(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=3)

    @jax.jit
    def train(x):
        return x * 2

    @jax.jit
    def evaluate(x):
        return x.sum()

    try:
        for epoch in range(2):
            # 3 steps an epoch, the last one a partial batch: 4, 4, 2 rows.
            for rows in (4, 4, 2):
                with otel_jax.step("train_step"):
                    train(jnp.ones(rows + epoch * 10))
            evaluate(jnp.ones(epoch + 1))  # between epochs: still in the epoch
    finally:
        otel_jax.uninstall()
    trains = _after_warmup_by_input(telemetry, ".train")
    # Epoch 1: the first compile and the partial batch (step 3 of 3) are warm-up;
    # epoch 2 (steps 4-6): every compile is after it.
    assert [a for a, _ in trains] == [False, False, True, True]
    assert [k for _, k in trains] == ["first_compile", "shape", "shape", "shape"]
    assert [a for a, _ in _after_warmup_by_input(telemetry, ".evaluate")] == [False, True]


def test_nested_steps_are_all_marked_and_count_once(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=2)

    @jax.jit
    def inner(x):
        return x + 1

    @otel_jax.step
    def forward(x):
        return inner(x)

    try:
        with otel_jax.step("epoch"):
            with otel_jax.step("train_step"):
                forward(jnp.ones(2))  # compiles in the innermost of three open steps
            with otel_jax.step("train_step"):
                forward(jnp.ones(2))
                otel_jax.step()  # a bare call inside a step is a part of it too
        first_done = ENGINE.policy.warmup_done
        with otel_jax.step("epoch"):  # step 2: the last of warm-up
            forward(jnp.ones(3))
        second_done = ENGINE.policy.warmup_done
        with otel_jax.step("epoch"):  # step 3: after warm-up
            forward(jnp.ones(4))
    finally:
        otel_jax.uninstall()
    assert (first_done, second_done) == (False, False)
    spans = [s for s in telemetry.exporter.get_finished_spans()
             if s.name in ("epoch", "train_step") or s.name.endswith("forward")]
    compiled = [(s.name.rsplit(".", 1)[-1], s.attributes["jax.step.compiled"],
                 s.attributes["jax.step.number"]) for s in spans]
    assert compiled == [
        ("forward", True, 1), ("train_step", True, 1),  # the compile marks all three
        ("forward", False, 1), ("train_step", False, 1), ("epoch", True, 1),
        ("forward", True, 2), ("epoch", True, 2),
        ("forward", True, 3), ("epoch", True, 3)]
    assert [s.attributes["jax.step.compiles"] for s in spans if s.name == "epoch"] == [1, 1, 1]
    assert [a for a, _ in _after_warmup_by_input(telemetry, "inner")] == [False, False, True]
    by_compiled = {}
    for p in _step_points(telemetry):
        key = (p.attributes["jax.step.name"], p.attributes["jax.step.compiled"])
        by_compiled[key] = by_compiled.get(key, 0) + p.count
    assert by_compiled[("epoch", True)] == 3 and by_compiled[("train_step", True)] == 1


def test_bare_calls_end_warmup_at_the_nth_call(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=2)
    try:
        otel_jax.step()
        assert not ENGINE.policy.warmup_done
        otel_jax.step()
        assert ENGINE.policy.warmup_done
    finally:
        otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=0)
    try:
        assert ENGINE.policy.warmup_done  # no warm-up at all: from the first compile on
    finally:
        otel_jax.uninstall()


def test_demo_warmup_is_its_first_epoch():
    """examples/train.py declares its first epoch the warm-up: the partial batch that ends
    epoch 1 and epoch 1's evaluation compile during warm-up, every compile from epoch 2 on
    after it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import clean_env

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(root / "examples" / "train.py")], cwd=root,
                         env=clean_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(ln) for ln in out.stderr.splitlines() if ln.startswith("{")]
    compiles = [ln for ln in lines if ln.get("event") == "jax.compile" and not ln["eager_op"]]
    train = [(c["count"], c["cause_kind"], c["after_warmup"]) for c in compiles
             if c["function"] == "train_step"]
    assert train == [(1, "first_compile", False), (2, "weak_type", False),
                     (3, "shape", False),  # epoch 1's partial batch: its last step
                     (4, "pytree_structure", True), (5, "shape", True)]
    evaluations = [c["after_warmup"] for c in compiles
                   if c["function"] == "main.<locals>.<lambda>"]
    assert evaluations == [False, True, True]  # one per epoch


# -- jax.step log lines ---------------------------------------------------------------


def _step_lines(telemetry):
    return [line for line in telemetry.log_lines() if line["event"] == "jax.step"]


def test_every_step_that_compiled_is_a_line_and_the_others_are_sampled(telemetry):
    from otel_jax._pipeline._steps import STEPS

    STEPS.telemetry.log.interval_s = 3600.0  # no sample after the first of the name

    @jax.jit
    def update(x):
        return x * 2

    sizes = [3] * 10 + [4] + [4] * 5
    for n in sizes:
        with otel_jax.step("train_step"):
            update(jnp.ones(n))
    lines = _step_lines(telemetry)
    # the first (chosen as the name's sample, and it compiled) and the one with a new shape
    assert [(ln["compiled"], ln["compiles"], ln["steps"]) for ln in lines] == [
        (True, 1, 1), (True, 1, 10)]
    spans = {s.context.span_id: s for s in telemetry.exporter.get_finished_spans()
             if s.name == "train_step"}
    for line in lines:
        assert line["step_name"] == "train_step" and line["nested"] is False
        assert line["duration_s"] >= line["compile_s"] > 0
        assert line["steps_s"] >= line["duration_s"]
        span = spans[int(line["span_id"], 16)]
        assert line["step_number"] == span.attributes["jax.step.number"]
        assert line["trace_id"] == format(span.context.trace_id, "032x")
    # at exit the steps after the last line get one: every step is counted
    STEPS.telemetry.log_pending()
    lines = _step_lines(telemetry)
    assert len(lines) == 3 and lines[-1]["compiled"] is False and lines[-1]["steps"] == 5
    assert sum(ln["steps"] for ln in lines) == len(sizes)
    STEPS.telemetry.log_pending()  # nothing left
    assert len(_step_lines(telemetry)) == 3


def test_uncompiled_steps_are_sampled_once_per_interval_per_name(telemetry):
    import time

    from otel_jax._pipeline._steps import STEPS

    STEPS.telemetry.log.interval_s = 0.2
    update = jax.jit(lambda x: x + 1)
    update(jnp.ones(2))  # compiled before the steps
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < 1.0:
        with otel_jax.step("a"):
            update(jnp.ones(2))
        with otel_jax.step("b"):
            pass
        n += 1
    lines = _step_lines(telemetry)
    for name in ("a", "b"):
        mine = [ln for ln in lines if ln["step_name"] == name]
        assert 2 <= len(mine) <= 6, mine  # about 1 s / 0.2 s, never one per step
        assert all(ln["compiled"] is False for ln in mine)
        assert len(mine) < n
    STEPS.telemetry.log_pending()
    for name in ("a", "b"):
        assert sum(ln["steps"] for ln in _step_lines(telemetry) if ln["step_name"] == name) == n


def test_a_nested_step_line_says_so_and_warning_level_writes_none(telemetry):
    with otel_jax.step("epoch"):
        with otel_jax.step("train_step"):
            jax.jit(lambda x: x - 1)(jnp.ones(5))
    lines = {ln["step_name"]: ln for ln in _step_lines(telemetry)}
    assert lines["epoch"]["nested"] is False and lines["train_step"]["nested"] is True
    assert lines["epoch"]["compiled"] and lines["train_step"]["compiled"]
    assert lines["epoch"]["step_number"] == lines["train_step"]["step_number"]

    otel_jax.uninstall()
    import io

    quiet = io.StringIO()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=quiet,
                     log_level="warning")
    with otel_jax.step("train_step"):
        jax.jit(lambda x: x * 7)(jnp.ones(5))
    otel_jax.flush()
    assert "jax.step" not in quiet.getvalue()
