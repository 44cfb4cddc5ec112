"""Hazards: recompiles named at the compile before them, on real JAX compiles.

Each program is the minimal form of a pattern users hit; the hazard must come at the
compile that shows it (before the recompile is paid for), with the argument path, and
only where the program does what the hazard says. Then the outputs: a span event on the
compile span, a ``jax.compile.hazard`` log line, the ``jax.compile.hazards`` counter, one
``OtelJaxWarning`` per function and kind at the user's line, and ``install(hazards=False)``.
"""

from __future__ import annotations

import dataclasses
import functools
import runpy
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax._core import _vocab
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._pipeline._engine import ENGINE

pytestmark = [pytest.mark.hazards,
              pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")]


def _hazards(records, kind: str | None = None) -> list:
    """``(count, hazard)`` of the records' hazards (of one kind)."""
    return [(r.count, h) for r in records for h in r.hazards
            if kind is None or h.kind.value == kind]


# --- weak_type ---------------------------------------------------------------------------

def test_a_python_scalar_fed_back_as_an_array_is_named_at_the_first_compile():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            params, lr = step(params, lr)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile", "weak_type"]
    [(count, hazard)] = _hazards(rec.records)
    assert count == 1 and hazard.kind is _vocab.CauseKind.WEAK_TYPE
    assert hazard.path == "lr" and hazard.warn
    assert "output [1]" in hazard.text and "jnp.asarray" in hazard.hint
    # the recompile it named is the one that came
    assert [c.path for c in rec.records[1].diff.changes] == ["lr"]


def test_no_weak_type_hazard_where_the_loop_sets_the_name_again_before_each_call():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        params = jnp.ones(3)
        for i in range(3):
            lr = 0.1 / (i + 1)  # a fresh Python float each pass: what came back is dropped
            params, lr = step(params, lr)
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_weak_scalar_fed_back_then_updated_in_place_in_the_loop_is_still_named():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            params, lr = step(params, lr)
            lr *= 0.5  # what came back, decayed: still the strongly typed array
    assert len(rec.records) == 2
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (1, "weak_type", "lr", True)


def test_a_weak_scalar_fed_back_then_reassigned_arithmetic_on_itself_is_still_named():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            params, lr = step(params, lr)
            lr = -lr / 2.0 + 1e-4  # the array that came back, still strongly typed
    assert len(rec.records) == 2
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (1, "weak_type", "lr", True)


def test_no_weak_type_hazard_where_the_loop_makes_a_python_float_of_what_came_back():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        params, lr = jnp.ones(3), 0.1
        for _ in range(3):
            params, lr = step(params, lr)
            lr = float(lr)  # a Python float again: the first call's type, a cache hit
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_weak_scalar_fed_back_outside_a_loop_is_a_note():
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    def train_step(params, lr):
        params, lr = step(params, lr)  # no loop here: its caller may pass a new float
        return params

    with otel_jax.testing.record_compiles(step) as rec:
        params = jnp.ones(3)
        for _ in range(3):
            params = train_step(params, 0.1)
    assert len(rec.records) == 1
    [(_, hazard)] = _hazards(rec.records)
    assert (hazard.kind.value, hazard.path, hazard.warn) == ("weak_type", "lr", False)
    assert "the next call compiles again" not in hazard.text


def test_a_training_state_that_holds_a_python_scalar_is_named_by_its_path():
    @jax.jit
    def step(state):
        return {"w": state["w"] * state["scale"], "scale": state["scale"] * jnp.float32(0.5)}

    with otel_jax.testing.record_compiles(step) as rec:
        state = {"w": jnp.ones(2), "scale": 2.0}
        for _ in range(3):
            state = step(state)
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path) == (1, "weak_type", "state['scale']")
    assert rec.records[1].cause_kind.value == "weak_type"


def test_no_weak_type_hazard_where_the_output_is_not_fed_back():
    @jax.jit
    def step(params, lr):
        return params - lr * params, jnp.sum(params) * jnp.float32(1)

    with otel_jax.testing.record_compiles(step) as rec:
        params = jnp.ones(3)
        for _ in range(2):
            params, loss = step(params, 0.1)  # a literal: nothing is fed back
        lr = 0.1
        other, loss = step(params, lr)  # the output goes to another name
    assert len(rec.records) == 1 and not _hazards(rec.records)


# --- static_argument ----------------------------------------------------------------------

class _Config:  # hashed and compared by identity
    def __init__(self, n: int) -> None:
        self.n = n


@dataclasses.dataclass(frozen=True)
class _FrozenConfig:
    n: int


def _double(x):
    return x * 2


def test_a_static_argument_hashed_by_identity_is_named_at_the_first_compile():
    def apply(x, config):
        return x * config.n

    jitted = jax.jit(apply, static_argnums=1)
    with otel_jax.testing.record_compiles(jitted) as rec:
        jitted(jnp.ones(2), _Config(2))
        jitted(jnp.ones(2), _Config(2))  # equal, yet another object: compiles again
    [(count, hazard)] = _hazards(rec.records)
    assert (count, hazard.kind.value, hazard.path, hazard.warn) == (
        1, "static_argument", "config", True)
    assert "__hash__" in hazard.hint
    assert rec.records[1].cause_kind.value == "static_argument"


_SHARED = _Config(2)


def test_an_identity_hashed_static_passed_as_the_same_object_is_a_note_not_a_warning():
    class Model:  # a long-lived object passed as a static self: every call hits the cache
        def __init__(self) -> None:
            self.w = 3.0

        def apply(self, x):
            return x * self.w

    apply = jax.jit(Model.apply, static_argnums=0)
    shared = jax.jit(lambda x, config: x * config.n, static_argnums=1)
    model = Model()
    with otel_jax.testing.record_compiles() as rec:
        for _ in range(3):
            apply(model, jnp.ones(2))
            shared(jnp.ones(2), _SHARED)
    assert [r.cause_kind.value for r in rec.records] == ["first_compile"] * 2
    found = _hazards(rec.records, "static_argument")
    assert sorted(h.path for _, h in found) == ["config", "self"]
    assert not [h for _, h in found if h.warn]  # nothing said recompiles: a note each
    assert all("same object" in h.text for _, h in found)


def test_value_hashed_statics_and_module_level_functions_are_no_hazard():
    def apply(x, config, fn):
        return fn(x) * config.n

    jitted = jax.jit(apply, static_argnums=(1, 2))
    with otel_jax.testing.record_compiles(jitted) as rec:
        jitted(jnp.ones(2), _FrozenConfig(2), _double)
        jitted(jnp.ones(2), _FrozenConfig(2), _double)
    assert len(rec.records) == 1 and not _hazards(rec.records)


def test_a_dtype_static_is_a_note_not_a_warning():
    def cast(x, dtype):
        return x.astype(dtype)

    jitted = jax.jit(cast, static_argnums=1)
    with otel_jax.testing.record_compiles(jitted) as rec:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jitted(jnp.ones(2), jnp.dtype("bfloat16"))
            otel_jax.flush()
    [(_, hazard)] = _hazards(rec.records)
    assert (hazard.kind.value, hazard.path, hazard.warn) == ("static_argument", "dtype", False)
    assert not [w for w in caught if issubclass(w.category, OtelJaxWarning)]


# --- function_identity --------------------------------------------------------------------

def test_a_function_defined_in_a_loop_body_is_named_at_its_first_compile():
    with otel_jax.testing.CompileRecorder() as rec:
        for _ in range(3):
            scaled = jax.jit(lambda x: x * 3)
            scaled(jnp.ones(2))
        records = [r for r in rec.records if "<lambda>" in r.function.qualname]
    assert [r.cause_kind.value for r in records] == [
        "first_compile", "function_identity", "function_identity"]
    [(count, hazard)] = _hazards(records)
    assert (count, hazard.kind.value, hazard.warn) == (1, "function_identity", True)
    assert "loop" in hazard.text


def test_a_function_made_per_loop_item_on_purpose_is_a_note_naming_the_item():
    with otel_jax.testing.CompileRecorder() as rec:
        for act in (jnp.tanh, jnp.sin, jnp.cos):  # one program per activation, meant
            activated = jax.jit(lambda x: act(x) + 1)
            activated(jnp.ones(2))
        records = [r for r in rec.records if "<lambda>" in r.function.qualname]
    assert len(records) == 3
    [(count, hazard)] = _hazards(records)
    assert (count, hazard.kind.value, hazard.warn) == (1, "function_identity", False)
    assert "act" in hazard.text and "argument" in hazard.hint


def test_a_function_made_in_a_loop_and_called_after_it_is_a_note():
    with otel_jax.testing.CompileRecorder() as rec:
        made = [jax.jit(lambda x, k=k: x * k) for k in range(2)]
        made[0](jnp.ones(2))  # called outside the loop that made it, once
    [(_, hazard)] = _hazards([r for r in rec.records if "<lambda>" in r.function.qualname],
                             "function_identity")
    assert not hazard.warn and "loop" in hazard.text


def _make_and_call(x):
    inner = jax.jit(lambda y: y + 1)
    return inner(x)


def test_a_function_defined_in_another_function_is_no_hazard():
    # a step function and a factory or a test body look alike at the first compile: the
    # second compile's cause names it
    with otel_jax.testing.CompileRecorder() as rec:
        _make_and_call(jnp.ones(2))
        _make_and_call(jnp.ones(2))
    records = [r for r in rec.records if "<lambda>" in r.function.qualname]
    assert [r.cause_kind.value for r in records] == ["first_compile", "function_identity"]
    assert not [h for r in records for h in r.hazards]


def _make_step():
    @jax.jit
    def step(x):
        return x - 1

    return step


def test_module_level_and_factory_made_functions_are_no_hazard():
    jitted = jax.jit(_double)
    made = _make_step()  # made once by a factory, called here
    with otel_jax.testing.CompileRecorder() as rec:
        jitted(jnp.ones(2))
        made(jnp.ones(2))
    assert len(rec.records) == 2 and not [h for r in rec.records for h in r.hazards]


# --- shape ----------------------------------------------------------------------------------

def test_a_length_that_changes_at_every_compile_is_a_note_then_a_warning_as_it_goes_on():
    @jax.jit
    def total(tokens):
        return tokens.sum()

    with otel_jax.testing.record_compiles(total) as rec:
        for n in (3, 5, 7, 9, 11, 13):
            total(jnp.ones(n))
    assert [r.cause_kind.value for r in rec.records][1:] == ["shape"] * 5
    [(count, note), (later, hazard)] = _hazards(rec.records)
    # three new lengths may be a few fixed ones (evaluation splits): a note
    assert (count, note.kind.value, note.path, note.warn) == (3, "shape", "tokens", False)
    assert "(3, 5, 7)" in note.text and "pad" in note.hint
    # five in a row: data-dependent lengths, a warning (said once)
    assert (later, hazard.kind.value, hazard.path, hazard.warn) == (5, "shape", "tokens", True)
    assert "(3, 5, 7, 9, 11)" in hazard.text


def test_a_few_fixed_evaluation_splits_called_every_epoch_are_no_warning():
    @jax.jit
    def evaluate(params, x):
        return jnp.mean(x @ params)

    splits = [jnp.ones((n, 3)) for n in (118, 30, 45, 77)]  # train, val, test, holdout
    with otel_jax.testing.record_compiles(evaluate) as rec:
        for _epoch in range(3):
            for x in splits:
                evaluate(jnp.ones(3), x)
    assert len(rec.records) == 4  # then every call hits the cache
    assert not [h for _, h in _hazards(rec.records) if h.warn]


def test_shapes_that_come_back_are_no_hazard():
    @jax.jit
    def total(tokens):
        return tokens.sum()

    with otel_jax.testing.record_compiles(total) as rec:
        for n in (3, 5, 3, 5, 3):
            total(jnp.ones(n))
    assert len(rec.records) == 2 and not _hazards(rec.records)


def test_lengths_already_bucketed_are_no_hazard():
    @jax.jit
    def total(tokens):
        return tokens.sum()

    # a warm-up over the buckets (powers of two, multiples of 128), then only cache hits
    with otel_jax.testing.record_compiles(total) as rec:
        for n in (64, 128, 256, 512, 1024, 384, 640, 64, 128, 256):
            total(jnp.ones(n))
    assert len(rec.records) == 7 and not _hazards(rec.records)


# --- static_argument: a new value at each compile ------------------------------------------

def test_a_static_position_new_at_every_call_is_a_note_then_a_warning():
    @functools.partial(jax.jit, static_argnames="pos")
    def decode(tokens, pos):
        return tokens[: pos + 1].sum()

    with otel_jax.testing.record_compiles(decode) as rec:
        for pos in range(7):
            decode(jnp.ones(8), pos=pos)
    assert [r.cause_kind.value for r in rec.records][1:] == ["static_argument"] * 6
    [(count, note), (later, hazard)] = _hazards(rec.records)
    assert (count, note.kind.value, note.path, note.warn) == (3, "static_argument", "pos",
                                                             False)
    assert "(0, 1, 2)" in note.text and "traced argument" in note.hint
    assert (later, hazard.path, hazard.warn) == (5, "pos", True)
    assert "(0, 1, 2, 3, 4)" in hazard.text


def test_a_closure_built_on_each_call_and_passed_static_is_warned_at_the_fifth_compile():
    @functools.partial(jax.jit, static_argnums=1)
    def apply(x, activation):
        return activation(x)

    def make(scale):
        return lambda v: v * scale  # a new function each time, hashed by identity

    with otel_jax.testing.record_compiles(apply) as rec:
        for _ in range(6):
            apply(jnp.ones(3), make(2.0))
    warned = [(c, h.path) for c, h in _hazards(rec.records, "static_argument") if h.warn]
    assert warned == [(5, "activation")]
    [hint] = {h.hint for c, h in _hazards(rec.records, "static_argument") if c == 5}
    assert "pass that same function" in hint and "__eq__" not in hint


class _Policy:  # hashed by identity: each one made is a new static
    def __init__(self, names):
        self.names = names


def test_an_object_built_each_step_before_the_call_is_warned_with_its_class_s_fix():
    @functools.partial(jax.jit, static_argnums=1)
    def step(x, policy):
        return x * len(policy.names)

    with otel_jax.testing.record_compiles(step) as rec:
        for _ in range(6):
            policy = _Policy(("hidden",))  # built on its own line, then passed by name
            step(jnp.ones(3), policy)
    [(count, hazard)] = [(c, h) for c, h in _hazards(rec.records, "static_argument")
                         if h.warn]
    assert (count, hazard.path) == (5, "policy")
    assert "new object at each of the last 5 compiles" in hazard.text
    assert "give _Policy value-based __eq__ and __hash__" in hazard.hint


def test_a_static_that_cycles_through_a_few_values_is_no_warning():
    @functools.partial(jax.jit, static_argnames=("train", "split"))
    def forward(x, train, split):
        return x.sum() * (0.9 if train else 1.0) + len(split)

    with otel_jax.testing.record_compiles(forward) as rec:
        for _epoch in range(4):
            forward(jnp.ones(3), train=True, split="train")
            for split in ("valid", "test"):
                forward(jnp.ones(3), train=False, split=split)
    assert len(rec.records) == 3  # then every call hits the cache
    assert not [h for _, h in _hazards(rec.records) if h.warn]


# --- the outputs --------------------------------------------------------------------------

def _feed_back(step, n: int = 3):
    params, lr = jnp.ones(3), 0.1
    for _ in range(n):
        params, lr = step(params, lr)


def test_the_span_event_log_line_counter_and_one_warning(telemetry):
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _feed_back(step)
        otel_jax.flush()
        _feed_back(jax.jit(step.__wrapped__))  # the same function again: no second warning
        otel_jax.flush()
    first = telemetry.compiles("test_the_span_event_log_line_counter_and_one_warning."
                               "<locals>.step")[0]
    [event] = [e for e in first.events if e.name == _vocab.EVENT_HAZARD]
    attrs = event.attributes
    assert attrs[_vocab.Attr.HAZARD_KIND] == "weak_type"
    assert attrs[_vocab.Attr.HAZARD_PATH] == "lr"
    assert attrs[_vocab.Attr.HAZARD_LEVEL] == "warning"
    assert attrs[_vocab.Attr.HAZARD] and attrs[_vocab.Attr.HAZARD_HINT]
    lines = [ln for ln in telemetry.log_lines() if ln["event"] == _vocab.EVENT_HAZARD]
    assert lines and lines[0]["level"] == "warning"
    F = _vocab.Field
    assert (lines[0][F.HAZARD_KIND], lines[0][F.PATH], lines[0][F.COUNT]) == (
        "weak_type", "lr", 1)
    assert lines[0][F.SPAN_ID] == format(first.context.span_id, "016x")
    points = telemetry.metric_points(_vocab.Metric.HAZARDS)
    assert {(p.attributes[_vocab.Attr.HAZARD_KIND], p.attributes[_vocab.Attr.HAZARD_LEVEL])
            for p in points} == {("weak_type", "warning")}
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)
            and "weak_type" in str(w.message)]
    assert len(said) == 1
    assert said[0].filename == __file__  # at the user's call line


def test_a_hazard_its_line_on_stderr_says_is_still_a_warning_to_pytest(capsys):
    # The line on stderr says the hazard; the warning is still given to the warnings
    # machinery, so pytest.warns, pytest's capture and the filters see it as ever.
    from conftest import Telemetry

    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    otel_jax.uninstall()
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output="stderr")
    try:
        with pytest.warns(OtelJaxWarning, match=r"step will compile again \(weak_type\)"):
            _feed_back(step)
            otel_jax.flush()
    finally:
        otel_jax.uninstall()
    assert '"event": "jax.compile.hazard"' in capsys.readouterr().err


def _held(monkeypatch):
    """Records left pending until the program's own thread makes them (a loaded machine,
    a program that ends first): the background thread is neither handed them nor woken."""
    from otel_jax._pipeline import _background

    monkeypatch.setattr(ENGINE, "_queue_work", lambda: None)
    monkeypatch.setattr(_background.WORKER, "wake", lambda: None, raising=False)


def test_a_warning_made_at_flush_is_located_at_the_call_line(telemetry, monkeypatch):
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    _held(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params, lr = jnp.ones(3), 0.1
        for _ in range(1):
            params, lr = step(params, lr)  # the call line
        ENGINE.settle()  # the record made here, on this thread, as flush() makes it
    monkeypatch.undo()
    otel_jax.flush()
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(said) == 1 and said[0].filename == __file__
    source = Path(__file__).read_text().splitlines()
    assert source[said[0].lineno - 1].strip().endswith("# the call line")


def test_a_warning_made_after_its_script_returned_is_still_said(telemetry, monkeypatch,
                                                                tmp_path):
    # A script run with runpy (a runner, a launcher) whose records are made once it
    # returned (a loaded machine): no loaded module has its file any more. The warning
    # is said at its line all the same (Python drops one given with module None).
    script = tmp_path / "train_script.py"
    script.write_text("import jax, jax.numpy as jnp\n"
                      "@jax.jit\n"
                      "def step(params, lr):\n"
                      "    return params - lr * params, lr * jnp.float32(0.999)\n"
                      "params, lr = jnp.ones(3), 0.1\n"
                      "for _ in range(1):\n"
                      "    params, lr = step(params, lr)\n")
    _held(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runpy.run_path(str(script), run_name="__main__")
        assert not [m for m in list(sys.modules.values())
                    if getattr(m, "__file__", None) == str(script)]
        ENGINE.settle()  # made here, after the script returned, as flush() makes it
    monkeypatch.undo()
    otel_jax.flush()
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert [(w.filename, w.lineno) for w in said] == [(str(script), 7)]


def test_a_hazard_whose_record_is_made_after_its_recompile_is_still_a_warning(
        telemetry, monkeypatch):
    # decided in compile order, from the compile and those before it: how far behind the
    # records are (a loaded machine) changes when it is said, never what is said
    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    _held(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _feed_back(step, 2)  # the recompile it predicts, before either record is made
        ENGINE.settle()
    monkeypatch.undo()
    otel_jax.flush()
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(said) == 1 and said[0].filename == __file__
    lines = [ln for ln in telemetry.log_lines() if ln["event"] == _vocab.EVENT_HAZARD]
    assert [(ln[_vocab.Field.HAZARD_KIND], ln["level"], ln[_vocab.Field.COUNT])
            for ln in lines] == [("weak_type", "warning", 1)]


def test_hazards_off_says_none(telemetry):
    otel_jax.uninstall()
    otel_jax.install(tracer_provider=telemetry.tracer_provider,
                     meter_provider=telemetry.meter_provider, log_output=telemetry.log,
                     hazards=False)
    assert ENGINE.hazards is False

    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _feed_back(step)
        otel_jax.flush()
    assert all(not s.events for s in telemetry.compiles())
    assert not [ln for ln in telemetry.log_lines() if ln["event"] == _vocab.EVENT_HAZARD]
    assert not telemetry.metric_points(_vocab.Metric.HAZARDS)
    assert not [w for w in caught if issubclass(w.category, OtelJaxWarning)]
    otel_jax.uninstall()
    assert ENGINE.hazards is True  # back to the default


def test_the_analysis_runs_once_per_compile_never_on_a_cache_hit(monkeypatch):
    from otel_jax._explain import _hazards

    calls = []
    real = _hazards.hazards
    monkeypatch.setattr(_hazards, "hazards", lambda *a: calls.append(a[1]) or real(*a))

    @jax.jit
    def step(params, lr):
        return params - lr * params, lr * jnp.float32(0.999)

    with otel_jax.testing.record_compiles(step) as rec:
        _feed_back(step, 20)
    assert len(rec.records) == 2 and calls == [1, 2]


@functools.partial(jax.jit, static_argnums=0)
def _apply_static(fn, x):
    return fn(x)


def _apply_once():
    return _apply_static(lambda v: v + 1, jnp.ones(3))  # a line run once


def test_a_lambda_on_a_calling_line_run_once_is_a_note_and_in_a_loop_a_warning():
    # each run of the line makes a new lambda, hashed by identity: a new compile only
    # where the line runs again (equinox's own tests pass a lambda once per test body)
    with otel_jax.testing.record_compiles(_apply_static) as rec:
        _apply_once()
    [(count, note)] = _hazards(rec.records, "static_argument")
    assert count == 1 and not note.warn and "lambda written on the calling line" in note.text

    @functools.partial(jax.jit, static_argnums=0)
    def looped(fn, x):
        return fn(x)

    with otel_jax.testing.record_compiles(looped) as rec:
        for _ in range(2):
            looped(lambda v: v * 2, jnp.ones(3))
    first = [h for c, h in _hazards(rec.records, "static_argument") if c == 1]
    assert len(rec.records) == 2 and [h.warn for h in first] == [True]
