"""A bounded cache keyed by object identity, for values derived from immutable objects.

Shared leaf chunks, treedefs, abstract values and graph read-backs are met again as
the same objects: looking them up by ``id`` costs no hashing or comparing in Python,
however large they are. Each entry holds its object, so its id cannot be reused by
another object while the entry lives; when full, the cache is emptied (the next
compiles fill it again with what they share).

Lock-free: a lookup racing a clear only misses, and the value is derived again.
"""

from __future__ import annotations

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
