"""A bounded cache keyed by object identity, for values derived from immutable objects.

Shared leaf chunks, treedefs, abstract values and graph read-backs are met again as
the same objects: looking them up by ``id`` costs no hashing or comparing in Python,
however large they are. Each entry holds its object, so its id cannot be reused by
another object while the entry lives; when full, the cache is emptied (the next
compiles fill it again with what they share).

Lock-free: a lookup racing a clear only misses, and the value is derived again.

:class:`Serials` numbers objects for good, so that identity can be compared after the
objects are gone.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """``value`` per object, by identity; at most ``limit`` entries."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int) -> None:
        self._entries: dict[int, tuple[Any, V]] = {}
        self._limit = limit

    def get(self, obj: Any) -> V | None:
        found = self._entries.get(id(obj))
        return found[1] if found is not None and found[0] is obj else None

    def put(self, obj: Any, value: V) -> V:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value


class Serials:
    """A number for each object met, never given to another: tells two objects apart, or
    one object met twice, however long after both are gone.

    An ``id`` is reused as soon as its object dies, and a weak reference says nothing once
    its object is gone: a compile explained after its jit call returned (on the
    background thread) may find both the earlier and the new function object dead. The
    serial is taken while the object is alive, in the call. An entry lasts as long as
    its object (a weak reference's callback removes it); an object that cannot be weakly
    referenced gets ``0``, and the caller falls back to its ``id``.

    Lock-free: two threads meeting one new object at once may give it two numbers (it
    then reads as two objects to a diff, never one object as two others).
    """

    __slots__ = ("_entries", "_live", "_next")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], int]] = {}
        self._live: set[int] = set()  # the serials whose objects are alive
        self._next = itertools.count(1)

    def of(self, obj: Any) -> int:
        """The serial of ``obj`` (``0``: it cannot be weakly referenced)."""
        key = id(obj)
        found = self._entries.get(key)
        if found is not None and found[0]() is obj:
            return found[1]
        serial = next(self._next)
        try:
            ref = weakref.ref(obj, functools.partial(self._gone, key, serial))
        except TypeError:
            return 0
        self._entries[key] = (ref, serial)
        self._live.add(serial)
        return serial

    def alive(self, serial: int) -> bool:
        """Whether the object numbered ``serial`` is alive, told without a reference to it:
        one taken on otel_jax's thread, however briefly, would keep the program's function
        alive while its next ``jax.jit`` of an equal one (another bound method of the same
        object) looks in JAX's cache, which finds the earlier entry while its function
        lives: the program would compile less often than without otel_jax."""
        return serial in self._live

    def __len__(self) -> int:
        return len(self._entries)

    def _gone(self, key: int, serial: int, _ref: object) -> None:
        self._live.discard(serial)
        found = self._entries.get(key)
        if found is not None and found[1] == serial:
            del self._entries[key]


#: The process's one numbering of function objects and identity-hashed static values.
SERIALS = Serials()
