"""Each compiled program's device memory, with real JAX: XLA's memory analysis of the program
on the compile span and the JSON line (equal to ``jitted.lower(x).compile().memory_analysis()``
for the same call), its growth beside a recompile's cause, the device's limit where known,
the largest program per function in ``otel-jax report``; absent, never 0, where JAX gives
no analysis."""

from __future__ import annotations

import io
import json

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax._capture._jax import _compile_entry
from otel_jax._pipeline._engine import ENGINE
from otel_jax._report import _aggregate, _text
from otel_jax._report._text import human_bytes

#: The span attribute and the log field of each size, and the stats attribute it equals.
SIZES = (
    ("jax.compile.memory.argument_bytes", "memory_argument_bytes", "argument_size_in_bytes"),
    ("jax.compile.memory.output_bytes", "memory_output_bytes", "output_size_in_bytes"),
    ("jax.compile.memory.temp_bytes", "memory_temp_bytes", "temp_size_in_bytes"),
    ("jax.compile.memory.generated_code_bytes", "memory_generated_code_bytes",
     "generated_code_size_in_bytes"),
)


def device_limit() -> int | None:
    """The default device's memory limit as JAX gives it (``None`` on the CPU)."""
    stats = jax.devices()[0].memory_stats()
    return stats.get("bytes_limit") if stats else None


def lines_of(telemetry, function: str) -> list[dict]:
    return [line for line in telemetry.log_lines()
            if line["event"] == "jax.compile" and line["function"] == function]


def test_the_span_and_line_carry_what_memory_analysis_gives(telemetry):
    @jax.jit
    def outer(x):
        # temporaries on every XLA version (an outer product into a matmul fuses on some)
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]

    name = "test_the_span_and_line_carry_what_memory_analysis_gives.<locals>.outer"
    x = jnp.ones(512)
    outer(x)
    span = telemetry.last(name)
    [line] = lines_of(telemetry, name)
    expected = outer.lower(x).compile().memory_analysis()  # the same program, from JAX
    for attribute, field, stat in SIZES:
        assert span.attributes[attribute] == getattr(expected, stat), attribute
        assert line[field] == getattr(expected, stat), field
    if jax.devices()[0].platform == "cpu":  # a real analysis, read (a TPU fuses it: 0)
        assert span.attributes["jax.compile.memory.temp_bytes"] > 0
    limit = device_limit()
    if limit is None:  # the CPU: unknown, so absent
        assert "jax.device.memory_limit_bytes" not in span.attributes
        assert "device_memory_limit_bytes" not in line
    else:
        assert span.attributes["jax.device.memory_limit_bytes"] == limit
        assert line["device_memory_limit_bytes"] == limit
    assert "jax.compile.memory.change" not in span.attributes  # a first compile
    assert "memory_change" not in line


def test_a_recompile_that_needs_more_memory_says_so_beside_its_cause(telemetry):
    @jax.jit
    def outer(x):
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]

    name = "test_a_recompile_that_needs_more_memory_says_so_beside_its_cause.<locals>.outer"
    small, large = jnp.ones(256), jnp.ones(2048)
    outer(small)
    outer(large)
    outer(jnp.ones(128))  # a smaller program: nothing to say
    spans = telemetry.compiles(name)
    lines = lines_of(telemetry, name)
    assert [s.attributes["jax.compile.count"] for s in spans] == [1, 2, 3]
    before = outer.lower(small).compile().memory_analysis().temp_size_in_bytes
    after = outer.lower(large).compile().memory_analysis().temp_size_in_bytes
    if after < before + (1 << 20):  # XLA there fused it (a TPU's temp can be 0)
        pytest.skip(f"{jax.devices()[0].platform}: this program's temporaries do not grow "
                    f"({before} -> {after} bytes)")
    change = f"temp {human_bytes(before)} -> {human_bytes(after)}"
    grown = spans[1].attributes
    assert grown["jax.compile.cause"] == "x: f32[256] -> f32[2048]"  # the cause as it was
    assert grown["jax.compile.memory.change"] == change
    assert lines[1]["cause"] == "x: f32[256] -> f32[2048]"
    assert lines[1]["memory_change"] == change
    assert "jax.compile.memory.change" not in spans[2].attributes
    assert "memory_change" not in lines[2]

    # The report of these lines: the largest program of the function is the second.
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO("".join(json.dumps(line) + "\n"
                                         for line in lines).encode()))
    [row] = report.rows()
    largest = row["largest_program"]
    assert largest["count"] == 2 and largest["temp_bytes"] == after
    table = _text.render_table([row])
    assert f"largest program #2: {human_bytes(largest['total_bytes'])} (temp " \
           f"{human_bytes(after)}," in table
    assert f"      memory: {change} (#2)" in table.splitlines()  # beside its cause


class Unimplemented:
    """An executable of a backend that implements no memory analysis (JAX raises
    ``UNIMPLEMENTED`` there)."""

    def get_compiled_memory_stats(self):
        raise RuntimeError("UNIMPLEMENTED: GetCompiledMemoryStats is not supported")


def test_no_analysis_leaves_the_sizes_absent_never_zero(telemetry, monkeypatch):
    real = _compile_entry.take_executable
    monkeypatch.setattr(_compile_entry, "take_executable",
                        lambda: real() and Unimplemented())
    errors = ENGINE.internal_errors

    @jax.jit
    def outer(x):
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]

    name = "test_no_analysis_leaves_the_sizes_absent_never_zero.<locals>.outer"
    assert outer(jnp.ones(4)).shape == (4,)
    outer(jnp.ones(1024))
    otel_jax.flush()
    spans = telemetry.compiles(name)
    lines = lines_of(telemetry, name)
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                      "shape"]
    for span, line in zip(spans, lines):
        assert not [k for k in span.attributes if k.startswith("jax.compile.memory.")]
        assert not [k for k in line if k.startswith("memory_")]
    assert ENGINE.internal_errors == errors  # a backend without it is no error of ours
    report = _aggregate.Report()
    report.feed_lines(io.BytesIO("".join(json.dumps(line) + "\n"
                                         for line in lines).encode()))
    assert report.rows()[0]["largest_program"] is None


def test_a_known_device_limit_is_on_the_span_and_line(telemetry, monkeypatch):
    """Where the device gives its limit (TPU, GPU: ``memory_stats()["bytes_limit"]``), the
    compile carries it; here the CPU's unknown limit is given as a TPU v5e's."""
    from otel_jax._capture._jax import _memory

    asked = []
    monkeypatch.setattr(_memory, "memory_limit",
                        lambda device: asked.append(device) or 16_909_336_064)

    @jax.jit
    def plus(x):
        return x + 1

    name = "test_a_known_device_limit_is_on_the_span_and_line.<locals>.plus"
    plus(jnp.ones(3))
    assert telemetry.last(name).attributes["jax.device.memory_limit_bytes"] == 16_909_336_064
    assert lines_of(telemetry, name)[0]["device_memory_limit_bytes"] == 16_909_336_064
    assert asked and asked[-1].platform == jax.devices()[0].platform  # the compile's device


def test_the_executable_is_not_kept_once_its_record_is_made(telemetry, monkeypatch):
    import gc

    from otel_jax._capture._correlate import Correlated
    from otel_jax._pipeline._assemble import Captured, Taken

    seen = []
    real = _compile_entry.take_executable

    def taking():
        executable = real()
        seen.append(executable)
        return executable

    monkeypatch.setattr(_compile_entry, "take_executable", taking)

    @jax.jit
    def outer(x):
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]

    for n in (8, 16, 32):
        outer(jnp.ones(n))
    otel_jax.flush()
    [executable] = [e for e in seen if e is not None][-1:]
    holders = [r for r in gc.get_referrers(executable)
               if isinstance(r, (Taken, Captured, Correlated))]
    assert holders == []  # not in a record waiting to be made, nor in the history
    assert getattr(_compile_entry._tls, "executable", None) is None
    name = "test_the_executable_is_not_kept_once_its_record_is_made.<locals>.outer"
    assert len(telemetry.compiles(name)) == 3
