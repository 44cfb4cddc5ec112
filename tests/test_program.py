"""Why a compile is slow, with real JAX: each compile's lowered program by the user's source
line, its constants and XLA's cost analysis on the span and the JSON line, and the patterns
that make it large (an unrolled Python loop, a captured table, layers stacked by a
comprehension, a scan fully unrolled, a program that grew) said where true and silent in
their fixed forms; bounded, and absent (never wrong) where the bindings do not walk."""

from __future__ import annotations

import inspect
import json
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from otel_jax._capture._jax import _program_walk
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._explain import _program
from otel_jax._pipeline._engine import ENGINE

pytestmark = pytest.mark.filterwarnings("ignore::otel_jax.OtelJaxWarning")

PASSES = 600


def line_of(fun, text: str) -> str:
    """``file:line`` of the first line of ``fun``'s source holding ``text``."""
    lines, start = inspect.getsourcelines(fun)
    for i, line in enumerate(lines):
        if text in line:
            return f"{inspect.getsourcefile(fun)}:{start + i}"
    raise AssertionError(text)


def fresh(fun):
    """A copy of ``fun``: JAX's caches know the function object, not its code."""
    return types.FunctionType(fun.__code__, fun.__globals__, fun.__name__)


def compile_line(telemetry, function: str) -> dict:
    lines = [line for line in telemetry.log_lines()
             if line["event"] == "jax.compile" and line["function"].endswith(function)]
    return lines[-1]


def kinds(line: dict) -> list[str]:
    return [f["kind"] for f in line.get("program_findings", [])]


def unrolled(x):
    for _ in range(PASSES):
        x = x + 1.0
    return x


def unrolled_fixed(x):
    return lax.fori_loop(0, PASSES, lambda i, x: x + 1.0, x)


def test_an_unrolled_loop_names_its_line_and_the_fix_and_its_fixed_form_is_silent(telemetry):
    jax.jit(fresh(unrolled))(jnp.float32(0))
    jax.jit(fresh(unrolled_fixed))(jnp.float32(0))
    loop = line_of(unrolled, "x = x + 1.0")
    line = compile_line(telemetry, "unrolled")
    assert line["program_ops"] >= 2 * PASSES  # a constant and an add per pass
    top = line["program_top_lines"][0]
    assert top["line"] == loop and top["share"] > 0.95
    [finding] = line["program_findings"]
    assert finding["kind"] == "unrolled_loop" and finding["line"] == loop
    assert f"{PASSES} times" in finding["text"] and "Python loop" in finding["text"]
    assert "lax.fori_loop" in finding["hint"]
    assert finding["level"] == "info"  # 1,200 ops compiled in well under 5 s: a note
    span = telemetry.last("unrolled")
    assert span.attributes["jax.compile.program.ops"] == line["program_ops"]
    assert span.attributes["jax.compile.program.top_lines"].startswith(loop)
    [event] = [e for e in span.events if e.name == "jax.compile.program.finding"]
    assert event.attributes["jax.compile.program.finding.kind"] == "unrolled_loop"
    assert event.attributes["jax.compile.program.finding.line"] == loop

    fixed = compile_line(telemetry, "unrolled_fixed")
    assert fixed["program_ops"] < 100 and "program_findings" not in fixed


def test_a_material_unroll_is_a_warning_at_the_loop_line(telemetry, monkeypatch):
    monkeypatch.setattr(_program, "WARN_OPS", 1_000)

    def loop_here(x):
        for _ in range(PASSES):
            x = x * 1.0001
        return x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.jit(loop_here)(jnp.float32(1))
        telemetry.log_lines()  # the record is made
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)
            and "large program" in str(w.message)]
    assert len(said) == 1
    where = line_of(loop_here, "x = x * 1.0001")
    assert f"{said[0].filename}:{said[0].lineno}" == where
    assert compile_line(telemetry, "loop_here")["program_findings"][0]["level"] == "warning"


TABLE = jnp.asarray(np.arange(512 * 1024, dtype=np.float32).reshape(512, 1024))  # 2 MiB


def embed(ids):
    return TABLE[ids].sum()


def embed_fixed(table, ids):
    return table[ids].sum()


def baked(fun, *args) -> bool:
    """Whether JAX bakes the arrays ``fun`` captures into its program text (to 0.10; JAX
    0.12 passes them to the program as arguments of its own), as JAX's text shows it."""
    return len(jax.jit(fresh(fun)).lower(*args).as_text()) > TABLE.nbytes


def test_a_captured_table_is_named_with_its_bytes_and_passed_as_an_argument_is_not(telemetry):
    ids = jnp.arange(4)
    jax.jit(fresh(embed))(ids)
    jax.jit(fresh(embed_fixed))(TABLE, ids)
    fixed = compile_line(telemetry, "embed_fixed")
    assert fixed["program_constant_bytes"] < 1024 and "program_findings" not in fixed
    assert "program_constants" not in fixed
    line = compile_line(telemetry, "embed")
    if not baked(embed, ids):  # this JAX makes the table an argument: nothing to say
        assert line["program_constant_bytes"] < 1024 and "program_findings" not in line
        return
    assert line["program_constant_bytes"] >= TABLE.nbytes
    [constant] = line["program_constants"]
    assert constant == {"line": line_of(embed, "TABLE[ids]"), "bytes": TABLE.nbytes,
                        "type": "f32[512,1024]"}
    [finding] = line["program_findings"]
    assert finding["kind"] == "captured_constant" and finding["level"] == "warning"
    assert "2.0 MiB" in finding["text"] and "as an argument" in finding["hint"]
    span = telemetry.last("embed")
    assert span.attributes["jax.compile.program.constant_bytes"] >= TABLE.nbytes
    assert "f32[512,1024] 2.0 MiB" in span.attributes["jax.compile.program.constants"]


def layer(w, x):
    return jnp.tanh(x @ w)


def stacked(ws, x):
    for w in [ws[i] for i in range(ws.shape[0])]:
        x = layer(w, x)
    return x


def stacked_scan(ws, x):
    return lax.scan(lambda x, w: (layer(w, x), None), x, ws)[0]


def test_layers_stacked_by_a_comprehension_are_an_unrolled_loop_and_scanned_are_not(
        telemetry, monkeypatch):
    monkeypatch.setattr(_program, "NOTE_OPS", 100)  # 48 small layers compile fast here
    ws, x = jnp.ones((48, 4, 4)), jnp.ones(4)
    jax.jit(stacked)(ws, x)
    jax.jit(stacked_scan)(ws, x)
    line = compile_line(telemetry, "stacked")
    assert kinds(line) == ["unrolled_loop"]
    finding = line["program_findings"][0]
    assert "48 times" in finding["text"] and "stacked parameters" in finding["hint"]
    assert finding["line"] in (line_of(layer, "jnp.tanh"), line_of(stacked, "ws[i]"))
    assert "program_findings" not in compile_line(telemetry, "stacked_scan")


def scan_unrolled(x):
    return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=300, unroll=True)[0]


def scan_rolled(x):
    return lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=300)[0]


def test_a_fully_unrolled_scan_says_to_give_it_a_small_unroll(telemetry, monkeypatch):
    monkeypatch.setattr(_program, "NOTE_OPS", 200)
    jax.jit(scan_unrolled)(jnp.float32(0))
    jax.jit(scan_rolled)(jnp.float32(0))
    line = compile_line(telemetry, "scan_unrolled")
    [finding] = line["program_findings"]
    assert finding["kind"] == "unrolled_loop" and "scan unrolled" in finding["text"]
    assert "unroll=k" in finding["hint"]
    assert "program_findings" not in compile_line(telemetry, "scan_rolled")


def test_a_program_that_grew_says_which_lines_grew(telemetry):
    def passes(x, n):
        for _ in range(n):
            x = x + 1.0
        return x

    f = jax.jit(passes, static_argnums=1)
    f(jnp.float32(0), 100)
    f(jnp.float32(0), 900)
    first, second = [line for line in telemetry.log_lines()
                     if line["event"] == "jax.compile" and line["function"].endswith("passes")]
    assert "program_growth" not in kinds(first)
    assert "program_growth" in kinds(second)
    [growth] = [f for f in second["program_findings"] if f["kind"] == "program_growth"]
    assert f"{first['program_ops']:,} to {second['program_ops']:,}" in growth["text"]
    assert "since compile #1" in growth["text"]
    assert f"{line_of(passes, 'x = x + 1.0').rpartition('/')[2]} +1,600" in growth["text"]


def test_small_programs_and_jax_eager_ops_say_nothing(telemetry):
    jax.jit(lambda x: jnp.sin(x) * 2)(jnp.ones(3))
    jnp.ones(3) + 1  # an eager op: not analysed
    lines = [line for line in telemetry.log_lines() if line["event"] == "jax.compile"]
    user = [line for line in lines if "lambda" in line["function"]]
    assert user and "program_findings" not in user[0] and user[0]["program_ops"] < 20
    assert all("program_ops" not in line for line in lines if line["eager_op"])


def test_xla_cost_analysis_is_read_where_the_backend_gives_it(telemetry):
    def matmul(a, b):
        return a @ b

    a = jnp.ones((64, 64))
    jax.jit(matmul)(a, a)
    line = compile_line(telemetry, "matmul")
    expected = jax.jit(matmul).lower(a, a).compile().cost_analysis()
    if isinstance(expected, list):
        expected = expected[0]
    if not expected or "flops" not in expected:  # a backend that gives none: absent
        assert "program_flops" not in line
    else:
        assert line["program_flops"] == expected["flops"]
        assert line["program_bytes_accessed"] == expected["bytes accessed"]


def test_the_walk_is_bounded_and_then_says_at_least():
    lowered = jax.jit(unrolled).lower(jnp.float32(0)).compiler_ir("stablehlo")
    walk = _program_walk.walk_program(lowered, lambda f: f == __file__, max_ops=100)
    assert walk is not None and walk.ops == 100 and not walk.complete
    facts = _program.facts(walk, None)
    assert facts.ops_text() == "at least 100"
    whole = _program_walk.walk_program(lowered, lambda f: f == __file__)
    assert whole is not None and whole.complete and whole.ops > 2 * PASSES


def test_bindings_that_do_not_walk_leave_the_fields_absent(telemetry, monkeypatch):
    def broken(*args, **kwargs):
        raise AttributeError("no body")

    monkeypatch.setattr(_program_walk, "_walk", broken)
    errors = ENGINE.internal_errors
    jax.jit(fresh(unrolled))(jnp.float32(0))
    line = compile_line(telemetry, "unrolled")
    assert not [k for k in line if k.startswith("program_") and k != "program_fingerprint"]
    assert not [k for k in telemetry.last("unrolled").attributes
                if k.startswith("jax.compile.program.")]
    assert ENGINE.internal_errors == errors  # a JAX it cannot read is no error of ours


def test_locations_read_another_way_keep_the_count_without_lines(telemetry, monkeypatch):
    def moved(loc):
        raise AttributeError("no such location kind")

    monkeypatch.setattr(_program_walk, "_kind", moved)
    jax.jit(fresh(unrolled))(jnp.float32(0))
    line = compile_line(telemetry, "unrolled")
    assert line["program_ops"] >= 2 * PASSES
    assert line["program_top_lines"] == [] and "program_findings" not in line


def test_thresholds_keep_small_programs_silent():
    walk = _program_walk.ProgramWalk(
        ops=500, complete=True, by_line={"a.py:3": 480}, repeats={"a.py:3": (480, 240, "add")},
        in_loops={}, constant_bytes=0, constants=())
    assert _program.findings(_program.facts(walk, None)) == ()
    # the same shape past NOTE_OPS: a note; past WARN_OPS: a warning (by the program alone,
    # whatever its compile took on a busy machine)
    def scaled(ops: int):  # type: ignore[no-untyped-def]
        return _program_walk.ProgramWalk(
            ops=ops, complete=True, by_line={"a.py:3": ops - 20},
            repeats={"a.py:3": (ops - 20, (ops - 20) // 2, "add")}, in_loops={},
            constant_bytes=0, constants=())
    [note] = _program.findings(_program.facts(scaled(_program.NOTE_OPS), None))
    assert note.kind == "unrolled_loop" and not note.warn
    [warning] = _program.findings(_program.facts(scaled(_program.WARN_OPS), None))
    assert warning.kind == "unrolled_loop" and warning.warn


def test_programs_kept_once_each_named_on_the_span_and_line_without_constant_values(
        tmp_path):
    import gzip
    import os

    import otel_jax
    from tests.conftest import Telemetry

    folder = tmp_path / "programs"
    otel_jax.uninstall()
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log, programs=str(folder))
    try:
        f = jax.jit(fresh(embed))
        f(jnp.arange(4))
        f(jnp.arange(6))  # another program
        jax.jit(fresh(embed))(jnp.arange(4))  # the same program again: kept once
        lines = [line for line in t.log_lines() if line["event"] == "jax.compile"
                 and line["function"].endswith("embed")]
    finally:
        otel_jax.uninstall()
    assert len(lines) == 3
    files = [line["program_file"] for line in lines]
    assert files[0] == files[2] != files[1]
    assert sorted(os.listdir(folder)) == sorted({os.path.basename(p) for p in files})
    assert os.path.basename(files[0]) == f"embed-{lines[0]['program_fingerprint']}.mlir.gz"
    text = gzip.decompress((folder / os.path.basename(files[0])).read_bytes()).decode()
    assert "stablehlo" in text and "test_program.py" in text  # with its source locations
    if baked(embed, jnp.arange(4)):  # the table's values: none written
        assert "__elided__" in text
    assert "5.242880e+05" not in text and "5.242870e+05" not in text
    span = [s for s in t.spans() if s.attributes.get("jax.compile.program.file")][0]
    assert span.attributes["jax.compile.program.file"] == files[0]


def test_the_folder_is_bounded_oldest_dropped_first(tmp_path):
    import os
    import time

    from otel_jax._pipeline import _program_store

    for i in range(5):
        _program_store.keep(str(tmp_path), "f", f"{i:016x}", os.urandom(100).hex(),
                            max_bytes=300)
        time.sleep(0.01)
    kept = sorted(os.listdir(tmp_path))
    assert kept[-1] == f"f-{4:016x}.mlir.gz"
    assert sum(os.path.getsize(tmp_path / k) for k in kept) <= 300
    assert len(kept) < 5
    assert _program_store.file_name("A.<locals>.f/x", "ab") == "A._locals_.f_x-ab.mlir.gz"


def test_program_diff_of_two_kept_programs_says_what_grew_locations_stripped(
        tmp_path, capsys):
    import functools

    import otel_jax
    from otel_jax import _cli
    from tests.conftest import Telemetry

    @functools.partial(jax.jit, static_argnums=1)
    def passes(x, n):
        x = jnp.cos(x)
        for _ in range(n):
            x = x * 2.0 + 1.0
        return x.sum()

    folder = tmp_path / "programs"
    otel_jax.uninstall()
    t = Telemetry()
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log, programs=str(folder))
    try:
        passes(jnp.ones(4), 3)
        passes(jnp.ones(4), 5)
        first, second = [line["program_file"] for line in t.log_lines()
                         if line["event"] == "jax.compile"
                         and line["function"].endswith("passes")]
    finally:
        otel_jax.uninstall()
    capsys.readouterr()
    assert _cli.main(["program-diff", first, second]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "  stablehlo.multiply 3 -> 5 (+2)" in lines
    assert "  stablehlo.add 3 -> 5 (+2)" in lines
    assert sum(x.startswith("+") and "stablehlo.multiply" in x for x in lines) == 2
    assert "loc(" not in out and "test_program.py" not in out  # locations stripped
    assert _cli.main(["program-diff", first, first]) == 0
    assert "the programs are the same, locations aside" in capsys.readouterr().out
    assert _cli.main(["program-diff", first, str(tmp_path / "missing.mlir.gz")]) == 2


def test_a_secret_in_a_source_path_never_reaches_a_finding_or_its_warning(
        telemetry, tmp_path, monkeypatch):
    import importlib.util

    secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    folder = tmp_path / secret
    folder.mkdir()
    source = folder / "loop_module.py"
    source.write_text("def looped(x):\n    for _ in range(600):\n        x = x + 1.0\n"
                      "    return x\n")
    spec = importlib.util.spec_from_file_location("loop_module", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(_program, "WARN_OPS", 1_000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.jit(module.looped)(jnp.float32(0))
        line = compile_line(telemetry, "looped")
    said = [str(w.message) for w in caught if "large program" in str(w.message)]
    assert said and line["program_findings"]
    emitted = json.dumps(line) + "".join(said) + json.dumps(
        dict(telemetry.last("looped").attributes))
    assert secret not in emitted
