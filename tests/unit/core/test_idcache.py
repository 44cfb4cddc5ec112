"""Numbers that tell objects apart after they are gone (``Serials``)."""

from __future__ import annotations

import gc

from otel_jax._core._idcache import Serials


class Thing:
    pass


def test_one_object_keeps_its_number_and_another_gets_a_new_one():
    serials = Serials()
    a, b = Thing(), Thing()
    assert serials.of(a) == serials.of(a)
    assert serials.of(a) != serials.of(b)
    assert serials.of(a) > 0 and serials.of(b) > 0


def test_a_number_is_never_given_again_even_where_an_id_is():
    serials = Serials()
    seen: set[int] = set()
    ids: set[int] = set()
    reused = False
    for _ in range(200):
        obj = Thing()
        reused = reused or id(obj) in ids
        ids.add(id(obj))
        number = serials.of(obj)
        assert number not in seen
        seen.add(number)
        del obj
    assert reused  # CPython hands a freed object's id to the next one at once


def test_an_entry_lasts_as_long_as_its_object():
    serials = Serials()
    things = [Thing() for _ in range(50)]
    for t in things:
        serials.of(t)
    assert len(serials) == 50
    del things, t
    gc.collect()
    assert len(serials) == 0


def test_an_object_without_weak_references_gets_zero():
    serials = Serials()
    assert serials.of((1, 2)) == 0
    assert serials.of(object()) == 0


def test_a_serial_says_whether_its_object_lives_without_a_reference_to_it():
    serials = Serials()

    def fun() -> None:
        pass

    number = serials.of(fun)
    assert serials.alive(number)
    del fun
    gc.collect()
    assert not serials.alive(number) and not serials.alive(0)
