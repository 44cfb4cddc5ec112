"""``_capture._jax._reader_gaps``: what this JAX lets the readers read, found by running
them (nothing is missing on a tested JAX)."""

from __future__ import annotations

from types import SimpleNamespace

from otel_jax._capture._jax import _reader_gaps


def test_no_reader_fails_on_a_tested_jax():
    assert _reader_gaps.reader_gaps() == []


def test_the_cache_key_part_hashes_missing_or_failing_are_named():
    assert _reader_gaps._cache_key_gap(SimpleNamespace()) == (
        "no jax._src.cache_key." + ", ".join(_reader_gaps._CACHE_KEY_HASHES))

    def fails(*args):
        raise TypeError("moved")

    broken = SimpleNamespace(**{name: fails for name in _reader_gaps._CACHE_KEY_HASHES})
    assert _reader_gaps._cache_key_gap(broken) == (
        "jax._src.cache_key's part hashes fail (TypeError: moved)")
