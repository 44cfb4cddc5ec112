"""``_explain._same``: when two parts of two signatures are the same."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from otel_jax._explain import _same

from ..signatures import build, static


class Hostile:
    def __eq__(self, other):
        raise RuntimeError("no comparing me")

    def __ne__(self, other):
        raise RuntimeError("no comparing me")

    __hash__ = object.__hash__

    def __repr__(self):
        return "Hostile()"


def test_safe_ne_never_raises():
    h = Hostile()
    assert _same.safe_ne(h, h) is False  # the same object
    assert _same.safe_ne(h, Hostile()) is False  # equal reprs: taken as equal
    assert _same.safe_ne(1, 2) and not _same.safe_ne(1, 1)


def add(x, y):
    return x + y


def test_same_function_is_the_same_object():
    assert _same.same_function(build(fun=add), build(fun=add))
    assert not _same.same_function(build(fun=add), build(fun=lambda x, y: x + y))


@dataclasses.dataclass(frozen=True)
class Config:
    lr: float


class ByIdentity:
    pass


def test_a_static_changed_by_value_by_keyword_or_by_type():
    assert not _same.static_changed(static("n", 2), static("n", 2))
    assert _same.static_changed(static("n", 2), static("n", 3))
    assert _same.static_changed(static("n", 2), static("n", 2.0))  # another type
    assert _same.static_changed(static("n", 2), static("n", 2, keyword=True))
    assert not _same.static_value_changed(static("n", 2), static("n", 2, keyword=True))
    assert _same.static_changed(static("c", Config(0.1)), static("c", Config(0.2)))


def test_an_identity_hashed_static_is_the_same_only_as_itself():
    one = ByIdentity()
    assert not _same.static_value_changed(static("o", one), static("o", one))
    assert _same.static_value_changed(static("o", one), static("o", ByIdentity()))


def test_treedef_equal_tells_structures_apart():
    x = jnp.ones(2)
    assert _same.treedef_equal(build({"a": x}), build({"a": x}))
    assert not _same.treedef_equal(build({"a": x}), build({"a": x, "b": x}))
