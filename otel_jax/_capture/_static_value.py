"""A static argument's value, held weakly, compared with ``==`` while it is alive.

Its own module: the one part of a signature that refers back to a user's value, and
what decides how that value is reached again (weakly, as a scalar, or rebuilt from
its items) without keeping it alive.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from typing import Any

from ._reprs import PLAIN_TYPES


class StaticValue:
    """A static argument's value, held weakly: equal to another unless both values are
    still alive (JAX's cache keeps the values it keys by) and not ``==``.

    Hash and repr alone miss a value whose class hashes by type and prints no fields,
    or whose ``__eq__`` is never true; JAX's cache compares with ``==``, so does this.
    """

    __slots__ = ("ref",)

    def __init__(self, value: Any) -> None:
        self.ref = _value_ref(value)

    def get(self) -> Any | None:
        """The value, while something else (JAX's cache) keeps it alive."""
        return self.ref() if self.ref is not None else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StaticValue):
            return NotImplemented
        a, b = self.get(), other.get()
        if a is None or b is None or a is b:
            return True  # unknown, or the same object: hash and repr decide
        try:
            return bool(a == b)
        except Exception:  # an __eq__ that raises or returns an array: unknown
            return True

    def __hash__(self) -> int:
        return 0  # equal hashes for all: the dataclass's hash stays consistent with ==


def _value_ref(value: Any, depth: int = 0) -> Callable[[], Any] | None:
    """A way back to ``value`` that keeps nothing of the user's alive: a weak reference;
    built-in scalars as they are; a tuple (an optax ``GradientTransformation``), which
    cannot be weakly referenced, rebuilt from references to its items."""
    if type(value) in PLAIN_TYPES or _is_dtype(value):
        # kept as they are: a built-in scalar holds nothing of the user's, and numpy keeps
        # one object per dtype for good (a dtype cannot be weakly referenced)
        return functools.partial(_same, value)
    try:
        return weakref.ref(value)
    except TypeError:
        pass
    if isinstance(value, tuple) and depth < 2 and len(value) <= 16:
        items = [item for v in value if (item := _value_ref(v, depth + 1)) is not None]
        if len(items) == len(value):
            return functools.partial(_rebuilt, type(value), items)
    return None


def _is_dtype(value: Any) -> bool:
    numpy = sys.modules.get("numpy")  # not loaded: the value is no dtype
    return numpy is not None and isinstance(value, numpy.dtype)


def _same(value: Any) -> Any:
    return value


def _rebuilt(kind: type, items: list[Callable[[], Any]]) -> Any | None:
    values = [item() for item in items]
    if any(v is None for v in values):
        return None  # an item is gone: the value is unknown
    make = getattr(kind, "_make", None)  # a NamedTuple
    try:
        return make(values) if make is not None else kind(values)
    except Exception:  # a tuple subclass built otherwise
        return None
