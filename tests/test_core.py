"""Spans, counts, install/uninstall and fail-open behaviour, with real JAX."""

from __future__ import annotations

import functools
import json
import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import pytest
from jax._src import monitoring, pjit
from opentelemetry import trace

import otel_jax
from otel_jax._capture import _build
from otel_jax._capture._jax import _miss_path
from otel_jax._pipeline._engine import ENGINE
from conftest import diff_of, needs_devices

HERE = __file__


def test_no_recompile_when_nothing_changes(telemetry):
    @jax.jit
    def step(w, x):
        return w - 0.1 * x

    w = jnp.ones(8)
    for _ in range(100):
        w = step(w, jnp.ones(8))
    assert len(telemetry.compiles("test_no_recompile_when_nothing_changes.<locals>.step")) == 1


def test_span_attributes_and_parent(telemetry):
    @jax.jit
    def train_step(x):
        return x * 2

    with telemetry.tracer.start_as_current_span("train_step") as parent:
        train_step(jnp.ones(3)); line = __import__("inspect").currentframe().f_lineno
    span = telemetry.last("test_span_attributes_and_parent.<locals>.train_step")
    assert span.name == "jax.compile test_span_attributes_and_parent.<locals>.train_step"
    assert span.kind == trace.SpanKind.INTERNAL
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id
    a = span.attributes
    assert a["code.file.path"] == HERE
    assert isinstance(a["code.line.number"], int) and a["code.line.number"] > 0
    assert a["jax.compile.callsite"] == f"{HERE}:{line}"
    assert a["jax.compile.count"] == 1 and a["jax.compile.is_recompile"] is False
    device = jax.devices()[0]  # "cpu" here, "tpu" and "TPU v5 lite" on a TPU v5e
    assert a["jax.device.platform"] == device.platform
    assert a["jax.device.kind"] == device.device_kind
    assert a["jax.device.count"] == 1 and a["jax.process.index"] == 0
    for key in ("jax.compile.trace_s", "jax.compile.lower_s", "jax.compile.backend_compile_s"):
        assert a[key] > 0
    assert "jax.persistent_cache.hit" not in a  # the persistent cache is not enabled


def test_phase_child_spans(telemetry):
    @jax.jit
    def phases(x):
        return jnp.sin(x)

    phases(jnp.ones(3))
    compile_span = telemetry.last("test_phase_child_spans.<locals>.phases")
    children = [s for s in telemetry.exporter.get_finished_spans()
                if s.parent is not None and s.parent.span_id == compile_span.context.span_id]
    assert [c.name for c in children] == ["jax.trace", "jax.lower", "jax.backend_compile"]
    for child in children:
        assert compile_span.start_time <= child.start_time <= child.end_time
        assert child.end_time <= compile_span.end_time
    assert children[0].end_time <= children[1].start_time <= children[2].start_time


def test_compile_without_retrace_has_no_trace_phase(telemetry):
    devices = needs_devices(2)

    @jax.jit
    def inc(x):
        return x + 1

    inc(jax.device_put(jnp.ones(3), devices[0]))
    inc(jax.device_put(jnp.ones(3), devices[1]))  # same jaxpr, new placement
    span = telemetry.last("test_compile_without_retrace_has_no_trace_phase.<locals>.inc")
    assert "jax.compile.backend_compile_s" in span.attributes
    assert span.attributes["jax.compile.count"] == 2


def test_model_call_method_named(telemetry):
    class Model:
        def __call__(self, x):
            return x @ x.T

    jax.jit(Model())(jnp.ones((2, 3)))
    span = telemetry.compiles()[-1]
    assert span.attributes["code.function.name"].endswith("Model.__call__")


def test_eager_op_compiles_are_marked(telemetry):
    x = jnp.ones((7, 13))
    jnp.sin(x) * 3.5  # eager op-by-op: compiles single primitives
    eager = [s for s in telemetry.spans() if s.attributes["jax.compile.eager_op"]]
    assert {"sin", "multiply"} <= {s.attributes["code.function.name"] for s in eager}
    assert telemetry.compiles() == []  # no user function compiled


@pytest.mark.parametrize("eager_op_spans", [None, "always"], ids=["default", "always"])
def test_eager_op_compiles_outside_any_span_start_no_trace(eager_op_spans):
    # Outside any span each eager op compile would be a trace of its own: by default it
    # makes none (it is counted and logged at DEBUG), inside the application's span it is
    # a child span, and eager_op_spans="always" makes a root span of it too.
    from conftest import Telemetry

    otel_jax.uninstall()
    t = Telemetry()
    options = {} if eager_op_spans is None else {"eager_op_spans": eager_op_spans}
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log, log_level="debug", **options)
    try:
        x = jnp.ones((3, 17 if eager_op_spans is None else 19, 2))  # not compiled before
        jnp.cos(x)  # outside any span
        with t.tracer.start_as_current_span("user-span"):
            jnp.tan(x)

        @jax.jit
        def user_fn(v):
            return v + 1

        user_fn(x)  # a user function outside any span: a root span, as ever
        lines = t.log_lines()
        points = t.metric_points("jax.compilations")
    finally:
        otel_jax.uninstall()
    eager = {s.attributes["code.function.name"]: s for s in t.spans()
             if s.attributes["jax.compile.eager_op"]}
    user_span = next(s for s in t.exporter.get_finished_spans() if s.name == "user-span")
    assert eager["tan"].parent.span_id == user_span.context.span_id
    if eager_op_spans is None:
        assert "cos" not in eager
    else:
        assert eager["cos"].parent is None
    (user_compile,) = [s for s in t.spans() if s.attributes["code.function.name"].endswith(
        "user_fn")]
    assert user_compile.parent is None
    cos_line = next(ln for ln in lines if ln["function"] == "cos")
    assert cos_line["level"] == "debug" and cos_line["eager_op"] is True
    assert (cos_line.get("trace_id") is None) == (eager_op_spans is None)
    assert any(p.attributes.get("code.function.name") == "cos"
               and p.attributes.get("jax.compile.eager_op") is True for p in points)


def test_eager_op_spans_option_is_checked():
    otel_jax.uninstall()
    with pytest.raises(ValueError, match="eager_op_spans"):
        otel_jax.install(eager_op_spans="sometimes")  # type: ignore[arg-type]
    assert otel_jax.installation() is None


def test_log_line_per_compile_with_trace_ids(telemetry):
    @jax.jit
    def logged(x):
        return x - 1

    logged(jnp.ones(2))
    logged(jnp.ones(3))
    spans = telemetry.compiles("test_log_line_per_compile_with_trace_ids.<locals>.logged")
    lines = [ln for ln in telemetry.log_lines() if ln["function"].endswith("logged")]
    assert len(lines) == 2
    assert [ln["event"] for ln in lines] == ["jax.compile", "jax.compile"]
    for span, line in zip(spans, lines):
        assert line["trace_id"] == trace.format_trace_id(span.context.trace_id)
        assert line["span_id"] == trace.format_span_id(span.context.span_id)
        assert line["level"] == "info"
    assert lines[1]["cause_kind"] == "shape"
    assert lines[1]["diff"] == [{"path": "x", "kind": "shape", "before": "f32[2]",
                                 "after": "f32[3]"}]
    assert lines[1]["count"] == 2 and lines[1]["is_recompile"] is True
    assert lines[1]["compile_s"] > 0 and "hint" in lines[1]


def test_metrics(telemetry):
    @jax.jit
    def measured(x):
        return x * x

    measured(jnp.ones(2))
    measured(jnp.ones(3))
    name = "test_metrics.<locals>.measured"
    collected = telemetry.collect_metrics()
    points = [p for p in collected["jax.compilations"]
              if p.attributes["code.function.name"] == name]
    by_kind = {p.attributes["jax.compile.cause.kind"]: p for p in points}
    assert by_kind["first_compile"].value == 1
    assert by_kind["first_compile"].attributes["jax.compile.is_recompile"] is False
    assert by_kind["shape"].value == 1
    assert by_kind["shape"].attributes["jax.compile.is_recompile"] is True
    durations = [p for p in collected["jax.compile.duration"]
                 if p.attributes["code.function.name"] == name]
    assert sum(p.count for p in durations) == 2
    assert durations[0].explicit_bounds[0] == 0.001 and durations[0].explicit_bounds[-1] == 600
    # Exemplars link the duration histogram to the compile spans.
    exemplar_traces = {e.trace_id for p in durations for e in p.exemplars}
    assert exemplar_traces & {s.context.trace_id for s in telemetry.compiles(name)}


def test_recompile_storm_warns_once(telemetry):
    @jax.jit
    def stormy(x):
        return x + 1

    for n in range(1, 13):
        stormy(jnp.ones(n))
    warnings_ = [ln for ln in telemetry.log_lines() if ln["event"] == "jax.recompile_storm"]
    assert len(warnings_) == 1
    w = warnings_[0]
    assert w["level"] == "warning"
    assert w["function"] == "test_recompile_storm_warns_once.<locals>.stormy"
    assert w["recompiles"] == 8 and w["causes"] == {"shape": 8}
    lines = telemetry.log_lines()
    at = lines.index(w)  # right after the compile that crossed the threshold
    assert lines[at - 1]["event"] == "jax.compile" and lines[at - 1]["count"] == 9
    assert len(telemetry.compiles("test_recompile_storm_warns_once.<locals>.stormy")) == 12


def test_install_is_idempotent_and_uninstall_restores_jax():
    otel_jax.uninstall()
    found = _miss_path.pjit_module()
    assert found is not None, "this JAX version's miss path is not recognised"
    entry, scope = found.trace, found.scope
    original_infer, original_run = getattr(pjit, entry), getattr(pjit, scope)
    original_impl = pjit._pjit_call_impl_python
    listeners_before = (list(monitoring._event_time_span_listeners),
                        list(monitoring._event_listeners))
    handle = otel_jax.install(log_output=None)
    try:
        assert otel_jax.install(log_output=None) is handle
        assert getattr(pjit, entry) is not original_infer
        assert _miss_path.pjit_patched()
    finally:
        otel_jax.uninstall()
    assert getattr(pjit, entry) is original_infer
    assert getattr(pjit, scope) is original_run
    assert pjit._pjit_call_impl_python is original_impl
    assert (list(monitoring._event_time_span_listeners),
            list(monitoring._event_listeners)) == listeners_before
    assert not _miss_path.pjit_patched()
    assert otel_jax.installation() is None
    otel_jax.uninstall()  # a second uninstall is a no-op


def test_jax_explain_cache_misses_still_names_the_users_call(telemetry, caplog):
    """JAX's own explainer names the user's line as the miss, not otel_jax's wrapper."""
    @jax.jit
    def f(x):
        return x * 2

    f(jnp.ones(3))
    with jax.explain_cache_misses(True), caplog.at_level("WARNING"):
        line = sys._getframe().f_lineno + 1
        f(jnp.ones(4))
    misses = [r.getMessage() for r in caplog.records if "CACHE MISS" in r.getMessage()]
    assert misses, "JAX explained no cache miss"
    assert all(f"{__file__}:{line}" in m for m in misses), misses
    assert not any("otel_jax" in m for m in misses), misses


def test_no_work_after_uninstall():
    otel_jax.uninstall()
    before = len(ENGINE.history.entries_by_name("test_no_work_after_uninstall.<locals>.g"))

    @jax.jit
    def g(x):
        return x

    g(jnp.ones(3))
    assert len(ENGINE.history.entries_by_name(
        "test_no_work_after_uninstall.<locals>.g")) == before == 0


@pytest.mark.injects_errors
def test_exception_in_signature_capture_does_not_reach_user(telemetry, monkeypatch):
    def broken(miss):
        raise RuntimeError("injected")

    monkeypatch.setattr(_build, "from_miss", broken)

    @jax.jit
    def safe(x):
        return x * 3

    with pytest.warns(otel_jax.OtelJaxWarning, match="signature capture"):
        assert float(safe(jnp.float32(2.0))) == 6.0
        assert safe(jnp.ones(2)).tolist() == [3.0, 3.0]
    spans = telemetry.compiles("test_exception_in_signature_capture_does_not_reach_user"
                               ".<locals>.safe")
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                      "unknown"]


@pytest.mark.injects_errors
def test_exception_in_the_trace_only_read_does_not_reach_user(telemetry, monkeypatch):
    from otel_jax._pipeline import _assemble

    def broken(*args):
        raise RuntimeError("injected")

    monkeypatch.setattr(_assemble, "traced", broken)

    @jax.jit
    def ahead(x):
        return x * 3

    with pytest.warns(otel_jax.OtelJaxWarning, match="trace-only listener"):
        compiled = ahead.lower(jnp.ones(2)).compile()
    assert compiled(jnp.ones(2)).tolist() == [3.0, 3.0]
    assert len(telemetry.spans("jax.compile ahead")) == 1  # still counted, by JAX's name


@pytest.mark.injects_errors
def test_exception_in_a_sink_does_not_reach_user(telemetry, monkeypatch):
    class BrokenSink:
        def compile(self, record, link):
            raise ValueError("sink down")

        def storm(self, storm):
            pass

        def divergence(self, divergence):
            pass

    broken_sink = BrokenSink()
    ENGINE.add_emitter(broken_sink)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            @jax.jit
            def f(x):
                return x + 2

            assert f(jnp.ones(2)).tolist() == [3.0, 3.0]
            f(jnp.ones(3))
    finally:
        ENGINE.remove_emitter(broken_sink)
    ours = [w for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)]
    assert len(ours) == 1 and "sink down" in str(ours[0].message)
    assert len(telemetry.compiles("test_exception_in_a_sink_does_not_reach_user"
                                  ".<locals>.f")) == 2


@pytest.mark.injects_errors
def test_warnings_as_errors_still_fail_open(telemetry, monkeypatch):
    monkeypatch.setattr(_build, "from_miss", lambda miss: 1 / 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @jax.jit
        def f(x):
            return x + 2

        assert f(jnp.ones(2)).tolist() == [3.0, 3.0]


class BrokenStatic:
    """Hashable, but its __eq__ and __repr__ raise."""

    def __hash__(self):
        return 7

    def __eq__(self, other):
        if self is other:
            return True
        raise RuntimeError("no __eq__ for you")

    def __repr__(self):
        raise RuntimeError("no repr either")


def test_static_with_broken_eq_and_repr(telemetry):
    @functools.partial(jax.jit, static_argnums=1)
    def f(x, s):
        return x + 1

    s = BrokenStatic()
    assert f(jnp.ones(2), s).tolist() == [2.0, 2.0]
    assert f(jnp.ones(3), s).tolist() == [2.0, 2.0, 2.0]
    span = telemetry.last("test_static_with_broken_eq_and_repr.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "shape"


def test_two_threads_compiling_at_once(telemetry):
    @jax.jit
    def shared(x):
        return x * 2

    barrier = threading.Barrier(2)
    parents = {}
    errors = []

    def worker(name, sizes):
        try:
            with telemetry.tracer.start_as_current_span(f"worker {name}") as span:
                parents[name] = span.get_span_context().span_id
                barrier.wait()
                for n in sizes:
                    shared(jnp.ones(n))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=("a", range(1, 11))),
               threading.Thread(target=worker, args=("b", range(11, 21)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    spans = telemetry.compiles("test_two_threads_compiling_at_once.<locals>.shared")
    assert len(spans) == 20
    assert sorted(s.attributes["jax.compile.count"] for s in spans) == list(range(1, 21))
    for s in spans:
        shape = s.attributes["jax.compile.cause.diff"]
        n = int(diff_of(s)[0]["after"][4:-1]) if diff_of(s) else None
        if n is not None:
            expected = parents["a"] if n <= 10 else parents["b"]
            assert s.parent.span_id == expected, shape


def test_ten_thousand_leaves_one_changed(telemetry):
    params = {f"layer_{i}": {"w": jnp.zeros((2,)), "b": jnp.zeros(())} for i in range(5000)}

    @jax.jit
    def count(params):
        # Cheap to compile: unused inputs are pruned, the signature keeps all 10,000.
        return params["layer_0"]["b"] + 1

    count(params)
    params["layer_4321"]["w"] = jnp.zeros((3,))
    count(params)
    span = telemetry.last("test_ten_thousand_leaves_one_changed.<locals>.count")
    assert span.attributes["jax.compile.cause.kind"] == "shape"
    assert diff_of(span) == [{"path": "params['layer_4321']['w']", "kind": "shape",
                              "before": "f32[2]", "after": "f32[3]"}]


def test_huge_diff_is_truncated_safely(telemetry):
    @jax.jit
    def f(xs):
        return [x + 1 for x in xs]

    f([jnp.ones(2)] * 3000)
    f([jnp.ones(3)] * 3000)
    span = telemetry.last("test_huge_diff_is_truncated_safely.<locals>.f")
    changes = diff_of(span)  # still valid JSON
    assert len(span.attributes["jax.compile.cause.diff"]) <= 16_384
    assert changes[-1]["kind"] == "truncated"
    assert span.attributes["jax.compile.cause"].endswith("(+2999 more)")


def test_fallback_when_jax_internals_are_missing(monkeypatch):
    otel_jax.uninstall()
    from conftest import Telemetry

    t = Telemetry()
    monkeypatch.setattr(_miss_path, "pjit_module", lambda: None)
    with pytest.warns(otel_jax.OtelJaxWarning, match="_infer_params"):
        otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                         log_output=t.log)
    try:
        assert not _miss_path.pjit_patched()

        @jax.jit
        def fallback(x):
            return x + 1

        fallback(jnp.ones(2))
        fallback(jnp.ones(3))
    finally:
        otel_jax.uninstall()
    spans = [s for s in t.spans() if s.attributes["code.function.name"] == "fallback"]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                      "unknown"]
    assert "not captured" in spans[1].attributes["jax.compile.cause"]
    assert spans[1].attributes["jax.compile.backend_compile_s"] > 0


def test_compile_history(telemetry):
    @jax.jit
    def hist(x, y):
        return x + y

    hist(jnp.ones(2), 1.0)
    hist(jnp.ones(3), 1.0)
    entries = otel_jax.compile_history(hist)
    assert [e.count for e in entries] == [1, 2]
    assert [e.cause_kind for e in entries] == ["first_compile", "shape"]
    assert entries[1].signature["arguments"] == {
        "x": {"type": "f32[3]", "placement": "uncommitted"},
        "y": {"type": "f32[] (weak)", "placement": "uncommitted"}}
    assert entries[1].diff == ({"path": "x", "kind": "shape", "before": "f32[2]",
                                "after": "f32[3]"},)
    text = str(entries[1])
    assert "#2 shape: x: f32[2] -> f32[3]" in text and "y: f32[] (weak)" in text
    assert entries[1]["cause_kind"] == "shape"
    assert json.loads(json.dumps(entries[1].as_dict()))["signature"]["arguments"]["x"] == {
        "type": "f32[3]", "placement": "uncommitted"}


def test_add_otel_context_processor(telemetry):
    with telemetry.tracer.start_as_current_span("app") as span:
        event = otel_jax.add_otel_context(None, "info", {"event": "hello"})
    assert event["trace_id"] == trace.format_trace_id(span.get_span_context().trace_id)
    assert event["span_id"] == trace.format_span_id(span.get_span_context().span_id)
    assert otel_jax.add_otel_context(None, "info", {"event": "x"}) == {"event": "x"}


def test_compiles_inside_lowering_keep_their_own_signature(telemetry):
    # Lowering threefry runs nested jitted jnp calls; the outer compile must
    # still be matched with its own miss (not reported as "not captured").
    key = jax.random.PRNGKey(11)
    jax.random.split(key, 3)
    jax.random.split(key, 5)
    spans = telemetry.spans()
    assert spans
    assert all("not captured" not in s.attributes["jax.compile.cause"] for s in spans)
    assert all(s.attributes["jax.compile.eager_op"] for s in spans)  # JAX's own functions
    assert all("code.file.path" in s.attributes for s in spans)


def test_user_jit_calling_random_inside(telemetry):
    @jax.jit
    def noisy(key, x):
        return x + jax.random.normal(key, x.shape)

    noisy(jax.random.PRNGKey(0), jnp.ones(3))
    noisy(jax.random.PRNGKey(0), jnp.ones(4))
    span = telemetry.last("test_user_jit_calling_random_inside.<locals>.noisy")
    assert span.attributes["jax.compile.cause.kind"] == "shape"
    assert diff_of(span)[0]["path"] == "x"


def test_eager_primitive_recompile_names_its_parameters(telemetry):
    # Shapes no other test uses: JAX's eager-op cache lives as long as the process.
    jnp.zeros((3, 17)) + jnp.ones(17)  # broadcast_in_dim to (3, 17)
    jnp.zeros((4, 17)) + jnp.ones(17)  # ... to (4, 17): a new primitive function object
    spans = [s for s in telemetry.spans()
             if s.attributes["code.function.name"] == "broadcast_in_dim"
             and s.attributes["jax.compile.is_recompile"]]
    assert spans
    assert all(s.attributes["jax.compile.cause.kind"] != "function_identity" for s in spans)
    changes = [c for s in spans for c in diff_of(s)]
    assert any(c["path"] == "params.shape" and c["after"] == "(4, 17)" for c in changes)


def test_wrapper_library_function_is_named_by_the_users_function():
    from otel_jax._capture._source import find_user_function, function_info, is_library_file

    def user_loss(model, x):
        return x

    # As equinox.filter_jit passes it: the user's function nested in a static tuple,
    # beside JAX's own functions.
    statics = [((jnp.sin,), "treedef"), (((user_loss,), "treedef"),)]
    assert find_user_function(statics) is user_loss
    assert find_user_function([(jnp.sin, jax.nn.relu)]) is None
    assert is_library_file(function_info(jnp.sin).file)
    assert not is_library_file(__file__)


def test_memory_stays_bounded_over_many_compiles(telemetry):
    from otel_jax._pipeline._history import (
        DEFAULT_ENTRIES_PER_FUNCTION,
        DEFAULT_SIGNATURES_PER_FUNCTION,
    )

    @jax.jit
    def many(x):
        return x + 1

    for n in range(1, 101):
        many(jnp.ones(n))
    entries = otel_jax.compile_history(many)
    assert len(entries) == DEFAULT_ENTRIES_PER_FUNCTION  # the latest ones
    assert entries[-1].count == 100
    fh = ENGINE.history._functions[otel_jax._function_info(many).key]
    assert len(fh.signatures) == DEFAULT_SIGNATURES_PER_FUNCTION
    assert telemetry.last("test_memory_stays_bounded_over_many_compiles.<locals>.many"
                          ).attributes["jax.compile.count"] == 100


def test_no_array_values_in_telemetry(telemetry):
    @jax.jit
    def f(x, scale):
        return x * scale

    f(jnp.full((3,), 12345.678), 2.0)
    f(jnp.full((4,), 12345.678), 7.25)

    # Durations, timestamps and ids are numbers or hex that may contain any
    # digits by chance; an array or scalar value could only leak as text.
    def strings(value):
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
            except ValueError:
                yield value
                return
            if isinstance(decoded, str):
                yield decoded
            else:
                yield from strings(decoded)
        elif isinstance(value, dict):
            for k, v in value.items():
                if k not in ("timestamp", "trace_id", "span_id"):
                    yield from strings(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from strings(v)

    otel_jax.flush()
    records = [json.loads(line) for line in telemetry.log.getvalue().splitlines()]
    records += [dict(s.attributes) for s in telemetry.spans()]
    texts = list(strings(records))
    assert any("f32[4]" in t for t in texts)  # the telemetry we search is there
    leaked = [t for t in texts if "12345" in t or "7.25" in t or "2.0" in t]
    assert leaked == []


def test_library_method_bound_to_a_users_class_is_named_by_the_class(
        telemetry, library_module):
    from otel_jax._capture import _source

    # A stand-in for flax.linen.Module, in a file treated as library code.
    fake_nn = library_module(
        "fake_nn", "class Module:\n    def apply(self, x):\n        return x * self.scale()\n")

    class MLP(fake_nn.Module):
        def scale(self):
            return 2.0

    class_line = MLP.scale.__code__.co_firstlineno - 1
    info = _source.owner_info(MLP().apply)
    assert info.qualname.endswith("MLP.apply") and info.file == HERE
    assert info.line == class_line

    jax.jit(MLP().apply)(jnp.ones(2))  # as jax.jit(model.apply) with flax
    span = telemetry.compiles()[-1]
    assert span.name.endswith("MLP.apply")
    assert span.attributes["code.file.path"] == HERE


def test_a_trace_without_compile_is_not_taken_for_a_later_compile(telemetry):
    import time

    @jax.jit
    def traced_first(x):
        return x * 5

    traced_first.trace(jnp.ones(3))  # traces, no compile
    time.sleep(0.2)
    before = time.time_ns()
    traced_first(jnp.ones(3))  # compiles, reusing that trace
    after = time.time_ns()
    span = telemetry.last("test_a_trace_without_compile_is_not_taken_for_a_later_compile"
                          ".<locals>.traced_first")
    assert span.start_time >= before
    # Within the call's own window, whatever the machine's load: a compile that took the
    # earlier trace's time would reach back past the 0.2 s sleep.
    assert span.attributes["jax.compile.duration_s"] <= (after - before) / 1e9


def test_ahead_of_time_compiles_count_and_explain_as_the_function_s_own(telemetry):
    @jax.jit
    def f(x):
        return jnp.sin(x) * 2

    f.lower(jnp.ones(3)).compile()
    lowered = f.lower(jnp.ones(4))
    jax.jit(lambda x: x - 1).lower(jnp.ones(2))  # another function's trace between
    lowered.compile()
    f(jnp.ones(6))
    spans = telemetry.compiles(
        "test_ahead_of_time_compiles_count_and_explain_as_the_function_s_own.<locals>.f")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "shape", "shape"]
    assert [diff_of(s)[0]["after"] for s in spans[1:]] == ["f32[4]", "f32[6]"]
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    aot = [c.name for c in telemetry.exporter.get_finished_spans()
           if c.parent is not None and c.parent.span_id == spans[1].context.span_id]
    assert sorted(aot) == ["jax.backend_compile", "jax.lower", "jax.trace"]


def test_several_lowerings_pending_are_named_but_never_given_another_s_signature(telemetry):
    @jax.jit
    def f(x):
        return jnp.cos(x) * 2

    f(jnp.ones(3))
    lowered = [f.lower(jnp.ones(n)) for n in (4, 5)]  # which one compiles first is unknown
    for each in reversed(lowered):
        each.compile()
    jax.jit(lambda x: x + 1).lower(jnp.ones(2))  # another function's trace, never compiled
    spans = telemetry.compiles(
        "test_several_lowerings_pending_are_named_but_never_given_another_s_signature"
        ".<locals>.f")
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "unknown", "unknown"]
    assert all("f32[4]" not in s.attributes["jax.compile.cause"] for s in spans)


@pytest.mark.injects_errors
def test_a_failing_history_still_reports_the_compile(telemetry, monkeypatch):
    from otel_jax._pipeline._history import History

    def broken(self, info):
        raise RuntimeError("history down")

    monkeypatch.setattr(History, "begin", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @jax.jit
        def f(x):
            return x + 1

        assert f(jnp.ones(2)).tolist() == [2.0, 2.0]
        assert otel_jax.flush()  # the record is made after the call: its warning with it
    [span] = telemetry.compiles("test_a_failing_history_still_reports_the_compile.<locals>.f")
    assert span.attributes["jax.compile.cause.kind"] == "unknown"
    assert "unavailable" in span.attributes["jax.compile.cause"]
    assert any(line.get("function", "").endswith("<locals>.f")
               for line in telemetry.log_lines() if line.get("event") == "jax.compile")
    ours = [w for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)]
    assert len(ours) == 1 and "history down" in str(ours[0].message)
