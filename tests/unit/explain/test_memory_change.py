"""``_explain._memory``: a recompile's program that needs more device memory says so beside
its cause, past both thresholds (10 % and 1 MiB), in powers of 1024."""

from __future__ import annotations

from otel_jax._capture._jax._memory import ProgramMemory
from otel_jax._explain._memory import GROWTH_MIN_BYTES, growth
from otel_jax._report._text import human_bytes

MiB, GiB = 1 << 20, 1 << 30


def test_growth_is_said_with_both_sizes():
    before = ProgramMemory(8 * MiB, 8 * MiB, int(1.2 * GiB), 0)
    after = ProgramMemory(16 * MiB, 8 * MiB, int(2.5 * GiB), 0)
    assert growth(before, after) == "temp 1.2 GiB -> 2.5 GiB, arguments 8.0 MiB -> 16.0 MiB"


def test_small_or_relative_noise_is_not_growth():
    # + 512 KiB: over 10 % but under the minimum
    assert growth(ProgramMemory(temp_bytes=MiB), ProgramMemory(temp_bytes=MiB + MiB // 2)) == ""
    # + 64 MiB of 1 GiB: over the minimum but under 10 %
    assert growth(ProgramMemory(temp_bytes=GiB), ProgramMemory(temp_bytes=GiB + 64 * MiB)) == ""
    # exactly at both thresholds: said
    assert growth(ProgramMemory(temp_bytes=10 * MiB),
                  ProgramMemory(temp_bytes=11 * MiB)) == "temp 10.0 MiB -> 11.0 MiB"
    assert GROWTH_MIN_BYTES == MiB


def test_a_program_that_shrank_or_was_not_analysed_says_nothing():
    big, small = ProgramMemory(temp_bytes=GiB), ProgramMemory(temp_bytes=MiB)
    assert growth(big, small) == ""
    assert growth(None, big) == "" and growth(small, None) == ""
    # a size one side does not give is not compared
    assert growth(ProgramMemory(argument_bytes=MiB), ProgramMemory(temp_bytes=GiB)) == ""


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 16 * MiB, int(2.5 * GiB), 1 << 50,
                                     1 << 62)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "16.0 MiB", "2.5 GiB", "1.0 PiB",
        "4096.0 PiB"]
