"""``_capture._jax._patch``: a wrapped module attribute, taken off without clobbering
another's wrapper."""

from __future__ import annotations

from types import SimpleNamespace

from otel_jax._capture._jax._patch import Patch, leading_parameters


def original(x):
    return x + 1


def wrap(fn):
    def wrapper(x):
        return fn(x) * 10

    return wrapper


def test_wrapped_then_restored():
    module = SimpleNamespace(entry=original)
    patch = Patch(module, "entry", wrap)
    assert module.entry(1) == 20 and module.entry.__otel_jax_original__ is original
    patch.remove()
    assert module.entry is original


def test_a_wrapper_put_over_ours_stays():
    module = SimpleNamespace(entry=original)
    patch = Patch(module, "entry", wrap)
    theirs = module.entry = lambda x: 0
    patch.remove()
    assert module.entry is theirs


def test_the_positional_parameters_a_wrapper_can_pass():
    def entry(backend, computation, /, devices, *, options=None):
        pass

    def star(backend, *args):
        pass

    assert leading_parameters(entry) == ("backend", "computation", "devices")
    assert leading_parameters(star) is None
    assert leading_parameters(object()) is None
