"""``_capture._jax._hooks``: one engine's listeners and patches, on and off together."""

from __future__ import annotations

from otel_jax._capture._jax import _compile_entry, _miss_path
from otel_jax._capture._jax._hooks import Hooks


def ignore(*args, **kwargs):
    pass


def test_installed_whole_on_a_tested_jax_and_taken_off_again():
    from jax._src import compiler, source_info_util, traceback_util

    found = _miss_path.pjit_module()
    assert found is not None
    hooks = Hooks(ignore, ignore)
    hooks.install()
    try:
        assert hooks.captures_signatures and hooks.captures_programs
        assert hooks.unavailable == ()
        ours = [p.wrapper for p in hooks._patches]
        assert getattr(found.module, found.trace) in ours
        assert compiler.compile_or_get_cached in ours
        # the wrappers' frames are hidden from JAX's tracebacks and source locations
        for module in (_miss_path, _compile_entry):
            assert module.__file__ in traceback_util._exclude_paths
            assert module.__file__ in source_info_util._exclude_paths
    finally:
        hooks.uninstall()
    assert getattr(found.module, found.trace) not in ours
    assert compiler.compile_or_get_cached not in ours
    assert not hooks.captures_signatures and hooks.unavailable == ()
