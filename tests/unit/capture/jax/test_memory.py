"""``_capture._jax._memory``: XLA's memory analysis of a compiled program, read off the
executable JAX's backend-compile entry returned, and a device's memory limit, read once;
each absent (never 0) where JAX or the backend gives none."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from otel_jax._capture._jax import _compile_entry, _memory
from otel_jax._capture._jax._memory import ProgramMemory


class Stats:
    """Stats shaped like jaxlib's ``CompiledMemoryStats``."""

    def __init__(self, **sizes: object) -> None:
        self.__dict__.update(sizes)


class Executable:
    def __init__(self, result: object = None, error: Exception | None = None) -> None:
        self.result, self.error, self.calls = result, error, 0

    def get_compiled_memory_stats(self) -> object:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.result


def test_the_four_sizes_are_read_off_the_stats():
    stats = Stats(argument_size_in_bytes=8, output_size_in_bytes=4, temp_size_in_bytes=1024,
                  generated_code_size_in_bytes=0, alias_size_in_bytes=99)
    memory = _memory.program_memory(Executable(stats))
    assert memory == ProgramMemory(8, 4, 1024, 0)
    assert memory is not None and memory.total_bytes == 1036


@pytest.mark.parametrize("executable", [
    object(),  # no get_compiled_memory_stats: an executable of another kind
    Executable(error=RuntimeError("UNIMPLEMENTED: GetCompiledMemoryStats")),  # a backend
    Executable(None),  # a method that gives nothing
    Executable(Stats()),  # stats without any size this version names
    Executable(Stats(argument_size_in_bytes=True, temp_size_in_bytes=-1)),  # not sizes
], ids=["no method", "raises", "returns None", "no fields", "not sizes"])
def test_no_analysis_is_none_never_zeros(executable):
    assert _memory.program_memory(executable) is None


def test_a_size_not_given_is_absent_the_others_kept():
    memory = _memory.program_memory(Executable(Stats(temp_size_in_bytes=2048)))
    assert memory == ProgramMemory(temp_bytes=2048)
    assert memory.argument_bytes is None and memory.total_bytes == 2048


def test_the_executable_jax_compiled_gives_what_memory_analysis_gives():
    """Real JAX: the executable the backend-compile entry returns (as ``_compile_entry``
    sees it) is the one ``Compiled.memory_analysis()`` reads."""
    from jax._src import compiler

    @jax.jit
    def outer(x):
        return jnp.cumsum(jnp.outer(x, x), axis=0)[-1]  # temporaries on every XLA

    x = jnp.ones(384)
    original = compiler.compile_or_get_cached
    compiler.compile_or_get_cached = _compile_entry.wrap_compile_or_get_cached(original)
    try:
        outer(x)
    finally:
        compiler.compile_or_get_cached = original
    executable = _compile_entry.take_executable()
    assert _compile_entry.take_executable() is None  # forgotten once taken
    memory = _memory.program_memory(executable)
    expected = outer.lower(x).compile().memory_analysis()
    assert memory == ProgramMemory(expected.argument_size_in_bytes,
                                   expected.output_size_in_bytes,
                                   expected.temp_size_in_bytes,
                                   expected.generated_code_size_in_bytes)
    if jax.devices()[0].platform == "cpu":  # a TPU pads the array and fuses the program
        assert memory.argument_bytes == 384 * 4 and memory.temp_bytes > 0


class Device:
    def __init__(self, stats: object, id: int = 0, platform: str = "tpu") -> None:
        self.stats, self.id, self.platform, self.calls = stats, id, platform, 0
        self.process_index = 0

    def memory_stats(self) -> object:
        self.calls += 1
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


@pytest.fixture(autouse=True)
def _no_kept_limits():
    _memory._limits.clear()
    yield
    _memory._limits.clear()


def test_a_device_limit_is_read_once_per_device():
    device = Device({"bytes_limit": 16_909_336_064, "bytes_in_use": 5})
    assert _memory.memory_limit(device) == 16_909_336_064
    assert _memory.memory_limit(device) == 16_909_336_064
    assert device.calls == 1
    other = Device({"bytes_limit": 1 << 30}, id=1)
    assert _memory.memory_limit(other) == 1 << 30


@pytest.mark.parametrize("stats", [None, {}, {"bytes_limit": 0}, {"bytes_limit": "16G"},
                                   RuntimeError("no allocator")],
                         ids=["None", "no limit", "zero", "not a number", "raises"])
def test_an_unknown_limit_is_none(stats):
    assert _memory.memory_limit(Device(stats)) is None


def test_the_cpu_gives_no_limit():
    if jax.devices()[0].platform != "cpu":
        pytest.skip(f"a {jax.devices()[0].platform} device: its limit is known")
    assert _memory.memory_limit(jax.devices()[0]) is None
