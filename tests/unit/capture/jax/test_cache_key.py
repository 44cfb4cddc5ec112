"""``_capture._jax._cache_key``: the persistent cache's key part by part (the parts of a
real compile are checked in tests/test_persistent_cache_restarts.py)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from otel_jax._capture._jax import _cache_key


def test_the_xla_flags_in_the_key_as_jax_reads_them(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_b=1 --xla_a=2")
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_c=3")
    monkeypatch.setattr(sys, "argv", ["train.py", "--xla_d=4", "--mine_e=5", "--other"])
    jax_module = SimpleNamespace(get_flag_prefixes=lambda: ["--mine"],
                                 xla_flags_to_exclude_from_cache_key=["--xla_b"])
    assert _cache_key.xla_flags_in_key(jax_module) == [
        "--mine_e=5", "--xla_a=2", "--xla_d=4", "--xla_tpu_c=3"]


def test_the_parts_in_jax_s_order_and_the_compression_part():
    assert _cache_key.CACHE_KEY_PARTS[0] == "computation"
    assert len(set(_cache_key.CACHE_KEY_PARTS)) == 8
    assert _cache_key._compression(SimpleNamespace(zstandard=None)) == "zlib"
    assert _cache_key._compression(SimpleNamespace(zstandard=object())) == "zstandard"
