"""``_capture._jax._compile_entry``: what a backend compile was asked to compile, kept for
its event; the compile itself always runs untouched."""

from __future__ import annotations

from otel_jax._capture._jax import _compile_entry


def test_the_inputs_are_kept_once_for_the_compile_s_event():
    calls = []
    wrapped = _compile_entry.wrap_compile_or_get_cached(
        lambda *a, **k: calls.append((a, k)) or "executable")
    assert wrapped("backend", "module", "devices", compile_options="options",
                   host_callbacks=[1, 2]) == "executable"
    assert calls == [(("backend", "module", "devices"),
                      {"compile_options": "options", "host_callbacks": [1, 2]})]
    assert _compile_entry.take_compile_inputs() == _compile_entry.CompileInputs(
        "module", "devices", "options", "backend", 2)
    assert _compile_entry.take_compile_inputs() is None  # forgotten once taken


def test_arguments_that_moved_leave_no_inputs_and_still_compile():
    wrapped = _compile_entry.wrap_compile_or_get_cached(lambda *a, **k: "executable")
    assert wrapped("backend", "module") == "executable"
    assert _compile_entry.take_compile_inputs() is None
