"""``_capture._jax._miss_path``: the names jit's miss path really calls, and the miss a
trace-entry wrapper leaves current."""

from __future__ import annotations

from types import SimpleNamespace

from otel_jax._capture._jax import _miss_path


def test_this_jax_s_miss_path_is_found():
    found = _miss_path.pjit_module()
    assert found is not None
    assert found.trace in _miss_path._TRACE_ENTRY_NAMES
    assert found.scope in _miss_path._SCOPE_NAMES
    assert found.trace_inside_scope == (found.scope == "_python_pjit_helper")
    assert _miss_path.transformed_entry(found.module) == "_pjit_call_impl_python"
    assert _miss_path.miss_path_code(found.module).co_name == "cache_miss"


def test_what_is_missing_is_said():
    assert _miss_path.pjit_gap(None) == "no jax._src.pjit"
    assert _miss_path.pjit_gap(SimpleNamespace()).startswith(
        "the jit miss path calls none of _run_python_pjit")


def test_a_trace_at_top_level_leaves_its_miss_current_until_cleared():
    params = SimpleNamespace(in_avals=(), in_tree=None, arg_names=(), consts=())

    def trace_entry(fun, ji, args, kwargs):
        return params, ["flat"]

    wrapped = _miss_path.wrap_infer_params(trace_entry)
    try:
        assert wrapped("f", "ji", (1,), {}) == (params, ["flat"])
        miss = _miss_path.current_miss()
        assert miss is not None and (miss.fun, miss.args, miss.params) == ("f", (1,), params)
        assert miss.args_flat == ["flat"] and not miss.transformed
    finally:
        _miss_path.clear_miss()
    assert _miss_path.current_miss() is None
