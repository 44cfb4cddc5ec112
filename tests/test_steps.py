"""otel_jax.step(): counts warm-up steps; as a context manager or decorator, a step span and
a step-time histogram that says whether the step compiled."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from opentelemetry.trace import StatusCode

import otel_jax
from otel_jax._engine import ENGINE


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
    assert not ENGINE._warmup_done
    train(jnp.ones(2))
    assert ENGINE._warmup_done
    steps = [s for s in telemetry.exporter.get_finished_spans()
             if s.name.endswith("<locals>.train")]
    assert len(steps) == 2


def test_bare_call_still_counts_and_decorator_factory_counts_per_call(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     warmup_steps=3)
    otel_jax.step()
    otel_jax.step()
    assert not ENGINE._warmup_done

    @otel_jax.step("named")  # creating the decorator is not a step
    def work():
        return 1

    assert not ENGINE._warmup_done
    work()
    assert ENGINE._warmup_done


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
