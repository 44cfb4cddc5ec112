"""``_capture._source``: where a compiled callable object lives, read once per class."""

from __future__ import annotations

import gc
import importlib.util
import inspect
import linecache
import os
import weakref

import pytest

from otel_jax._capture import _source
from otel_jax._capture._source import FunctionInfo, function_info


@pytest.fixture
def base(tmp_path):
    """A module of another file whose class defines the ``__call__`` subclasses inherit
    (as a Keras layer or a library's equinox module does)."""
    path = tmp_path / "fake_layers.py"
    path.write_text("class Layer:\n    def __call__(self, x):\n        return x\n")
    spec = importlib.util.spec_from_file_location("fake_layers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_inherited_call_is_named_by_its_class_and_read_once(base, monkeypatch):
    class Double(base.Layer):
        def call(self, x):
            return 2 * x

    class Bare(base.Layer):  # no method of its own
        pass

    first = [function_info(Double()), function_info(Bare())]
    assert _source.find_user_callable(Double()) is not None
    prefix = ("test_an_inherited_call_is_named_by_its_class_and_read_once.<locals>.")
    assert first == [
        FunctionInfo(prefix + "Double.__call__", __file__, inspect.getsourcelines(Double)[1]),
        FunctionInfo(prefix + "Bare.__call__", __file__, inspect.getsourcelines(Bare)[1])]

    # Every later compile of these classes (on the compiling thread) reads no source
    # and resolves no path again.
    read: list[str] = []

    def counting(real, name):
        def wrapper(*args, **kwargs):
            read.append(name)
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(linecache, "getline", counting(linecache.getline, "getline"))
    monkeypatch.setattr(linecache, "getlines", counting(linecache.getlines, "getlines"))
    monkeypatch.setattr(os.path, "realpath", counting(os.path.realpath, "realpath"))
    assert [function_info(Double()), function_info(Bare())] == first
    assert _source.find_user_callable(Double()) is not None
    assert read == []


def test_what_is_kept_of_a_class_does_not_keep_it_alive(base):
    def make():
        class Local(base.Layer):
            def call(self, x):
                return x

        function_info(Local())
        return weakref.ref(Local)

    gone = make()
    gc.collect()
    assert gone() is None
