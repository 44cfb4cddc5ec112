"""``_capture._jax._persistent_cache``: the persistent cache as JAX's config sets it."""

from __future__ import annotations

import os

import jax
import pytest

from otel_jax._capture._jax import _persistent_cache
from otel_jax._core._vocab import NotWrittenReason


@pytest.fixture
def min_compile_time():
    name = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, name)
    jax.config.update(name, 5.0)
    yield
    jax.config.update(name, before)


def test_why_an_entry_was_not_written(min_compile_time):
    skip = _persistent_cache.persistent_cache_skip_reason
    assert skip(10.0, 1) is NotWrittenReason.NOT_PROCESS_0
    assert skip(1.0, 0) is NotWrittenReason.COMPILE_TIME_BELOW_MINIMUM
    assert skip(10.0, 0) is NotWrittenReason.OTHER


def test_the_cache_is_off_without_a_directory():
    if jax.config.jax_compilation_cache_dir:
        pytest.skip("a persistent cache is configured in this process")
    assert _persistent_cache.persistent_cache_dir() is None
    assert not _persistent_cache.persistent_cache_enabled()


def test_a_local_path_through_jax_s_file_system_layer():
    pytest.importorskip("etils.epath")
    assert os.fspath(_persistent_cache.cache_path("/tmp/x")) == "/tmp/x"
