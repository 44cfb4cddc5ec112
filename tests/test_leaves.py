"""Chunked leaf storage: tuple behaviour, and kept signatures sharing what did not change."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import otel_jax
from otel_jax._capture._leaves import CHUNK, Leaves, differing
from otel_jax._pipeline._engine import ENGINE


def test_leaves_read_like_a_tuple():
    items = tuple(range(3 * CHUNK + 5))
    leaves = Leaves(items)
    assert len(leaves) == len(items) and tuple(leaves) == items
    assert leaves[0] == 0 and leaves[-1] == items[-1] and leaves[CHUNK] == CHUNK
    assert leaves[2:5] == (2, 3, 4)
    assert leaves == items and leaves == Leaves(items) and leaves != Leaves(items[:-1])
    changed = list(items)
    changed[CHUNK + 1] = -1
    assert differing(leaves, Leaves(changed)) == [CHUNK + 1]
    assert differing(leaves, tuple(changed)) == [CHUNK + 1]


def test_of_reuses_equal_chunks_only():
    a = Leaves(tuple(range(10 * CHUNK)))
    changed = list(range(10 * CHUNK))
    changed[3 * CHUNK] = -1
    b = Leaves.of(changed, like=a)
    same = sum(x is y for x, y in zip(a._chunks, b._chunks))
    assert same == 9 and b[3 * CHUNK] == -1 and tuple(b) == tuple(changed)
    assert Leaves.of(tuple(range(10 * CHUNK)), like=a) is a
    assert Leaves.of(tuple(range(5)), like=a) == tuple(range(5))  # another length: no reuse


def test_mapped_maps_only_chunks_that_changed():
    source = Leaves(tuple(range(4 * CHUNK)))
    image = source.mapped(str)
    changed = list(range(4 * CHUNK))
    changed[CHUNK + 2] = -7
    new = Leaves.of(changed, like=source)
    seen: list[int] = []

    def text(v: int) -> str:
        seen.append(v)
        return str(v)

    mapped = new.mapped(text, source, image)
    assert tuple(mapped) == tuple(map(str, changed))
    assert seen == changed[CHUNK:2 * CHUNK]  # only the chunk that changed was mapped
    assert sum(x is y for x, y in zip(mapped._chunks, image._chunks)) == 3


def test_kept_signatures_of_one_function_share_unchanged_parts():
    params = {f"p{i:04d}": jnp.zeros((2,)) for i in range(1000)}

    @jax.jit
    def first(params):
        return params["p0000"] + 1

    with otel_jax.testing.record_compiles(first):
        first(params)
        params["p0500"] = jnp.zeros((3,))
        first(params)
    kept = [s for _, s in ENGINE.history._functions[
        otel_jax._function_info(first).key].signatures]
    old, new = kept[-2], kept[-1]
    for part in ("paths", "types", "placements", "avals"):
        a, b = getattr(old, part)._chunks, getattr(new, part)._chunks
        shared = sum(x is y for x, y in zip(a, b))
        expected = len(a) - (part in ("types", "avals"))
        assert shared == expected, part
    assert new.treedef is old.treedef


def test_identity_cache_answers_for_the_same_object_only_and_stays_bounded():
    import gc
    import weakref

    from otel_jax._core._idcache import IdentityCache

    class Key:
        pass

    cache: IdentityCache[str] = IdentityCache(limit=4)
    key = Key()
    assert cache.put(key, "a") == "a" and cache.get(key) == "a"
    assert cache.get(Key()) is None and cache.get(tuple([1, 2])) is None
    # The entry holds its object, so its id cannot pass to another object meanwhile.
    held = weakref.ref(key)
    del key
    gc.collect()
    assert held() is not None and cache.get(held()) == "a"
    for i in range(10):
        cache.put(Key(), str(i))
    assert len(cache._entries) <= 4
