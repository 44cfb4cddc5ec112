"""An immutable sequence stored in fixed-size chunks, so that signatures can share them.

A signature keeps one entry per array leaf (path, type, placement, abstract
value). Successive compiles of one function usually differ in a leaf or two:
stored as chunks, a new signature reuses every chunk equal to its
predecessor's, so a kept compile of a 10,000-leaf argument costs a few
kilobytes instead of a megabyte, and comparing two signatures skips shared
chunks by identity.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, compress
from typing import Any, TypeVar, overload

T = TypeVar("T")
U = TypeVar("U")

CHUNK = 64


class Leaves(Sequence[T]):
    """A tuple-like sequence made of ``CHUNK``-long tuples (the last may be shorter)."""

    __slots__ = ("_chunks", "_len")
    _chunks: tuple[tuple[T, ...], ...]
    _len: int

    def __init__(self, items: Iterable[T] = (), like: Leaves[T] | None = None) -> None:
        flat = items if isinstance(items, tuple) else tuple(items)
        n = len(flat)
        chunks = [flat[i:i + CHUNK] for i in range(0, n, CHUNK)]
        if like is not None and like._len == n:
            for i, (mine, theirs) in enumerate(zip(chunks, like._chunks)):
                if mine == theirs:
                    chunks[i] = theirs
        self._chunks = tuple(chunks)
        self._len = n

    @classmethod
    def of(cls, items: Iterable[T], like: Leaves[T] | None = None) -> Leaves[T]:
        """``items`` as leaves sharing every chunk equal to ``like``'s: ``like`` itself
        when all of them are."""
        made: Leaves[T] = cls(items, like)
        if like is not None and made._len == like._len and all(
                mine is theirs for mine, theirs in zip(made._chunks, like._chunks)):
            return like
        return made

    def mapped(self, fn: Callable[[T], U], source: Leaves[T] | None = None,
               image: Leaves[U] | None = None) -> Leaves[U]:
        """``fn`` of each item, chunk by chunk; where a chunk of this sequence is
        ``source``'s chunk at that position (the same object, as sharing leaves it),
        ``image``'s chunk is reused instead: ``image`` is ``source`` already mapped.

        A recompile that changed one leaf of 10,000 then maps one chunk, not all.
        """
        if source is None or image is None or not source._len == self._len == image._len:
            source = image = None
        elif self is source or all(
                mine is theirs for mine, theirs in zip(self._chunks, source._chunks)):
            return image
        chunks: list[tuple[U, ...]] = []
        for c, mine in enumerate(self._chunks):
            if source is not None and image is not None and mine is source._chunks[c]:
                chunks.append(image._chunks[c])
            else:
                chunks.append(tuple(map(fn, mine)))
        out: Leaves[U] = Leaves.__new__(Leaves)
        out._chunks = tuple(chunks)
        out._len = self._len
        return out

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("Leaves index out of range")
        return self._chunks[index // CHUNK][index % CHUNK]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Leaves):
            return self._len == other._len and self._chunks == other._chunks
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def differing(self, other: Leaves[Any]) -> list[int]:
        """Indices where two equally long sequences differ; shared chunks cost nothing."""
        out: list[int] = []
        for c, (mine, theirs) in enumerate(zip(self._chunks, other._chunks)):
            if mine is theirs or mine == theirs:
                continue
            base = c * CHUNK
            out.extend(base + i for i in compress(range(len(mine)),
                                                  map(operator.ne, mine, theirs)))
        return out

    def __repr__(self) -> str:
        return f"Leaves({tuple(self)!r})"


def differing(a: Sequence[Any], b: Sequence[Any]) -> list[int]:
    """Indices where two equally long sequences differ, found at C speed."""
    if isinstance(a, Leaves) and isinstance(b, Leaves):
        return a.differing(b)
    if a == b:
        return []
    return list(compress(range(len(a)), map(operator.ne, a, b)))
