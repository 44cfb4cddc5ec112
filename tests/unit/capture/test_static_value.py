"""``_capture._static_value``: a static value, held weakly, compared with ``==``."""

from __future__ import annotations

import gc
from typing import NamedTuple

from otel_jax._capture._static_value import StaticValue


class Config:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and other.n == self.n

    def __hash__(self) -> int:
        return 0


def test_alive_values_compare_with_their_own_eq():
    one, two, also_one = Config(1), Config(2), Config(1)
    assert StaticValue(one) == StaticValue(also_one)
    assert StaticValue(one) != StaticValue(two)
    assert hash(StaticValue(one)) == hash(StaticValue(two))  # equal hashes for all


def test_a_value_that_is_gone_is_unknown_so_equal():
    one, two = Config(1), Config(2)
    held = StaticValue(two)
    del two
    gc.collect()
    assert held.get() is None and StaticValue(one) == held


def test_nothing_of_the_user_s_is_kept_alive():
    value = Config(1)
    held = StaticValue(value)
    assert held.get() is value
    del value
    gc.collect()
    assert held.get() is None


def test_an_eq_that_raises_or_never_holds_is_unknown_or_unequal():
    class Raising(Config):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no")

        __hash__ = Config.__hash__

    class NeverEqual(Config):
        def __eq__(self, other: object) -> bool:
            return False

        __hash__ = Config.__hash__

    a, b = Raising(1), Raising(1)
    assert StaticValue(a) == StaticValue(b)
    c, d = NeverEqual(1), NeverEqual(1)
    assert StaticValue(c) != StaticValue(d)
    assert StaticValue(c) == StaticValue(c)  # the same object: hash and repr decide


class Pair(NamedTuple):
    first: Config
    second: float


def test_scalars_are_held_as_they_are_and_tuples_rebuilt_from_their_items():
    assert StaticValue(3).get() == 3 and StaticValue("adam").get() == "adam"
    first = Config(1)
    pair = StaticValue(Pair(first, 0.5))
    rebuilt = pair.get()
    assert type(rebuilt) is Pair and rebuilt == Pair(first, 0.5)
    assert StaticValue((first, 2)).get() == (first, 2)
    del first, rebuilt
    gc.collect()
    assert pair.get() is None  # an item is gone: the value is unknown


def test_a_value_that_cannot_be_reached_again_is_unknown():
    assert StaticValue([1, 2]).get() is None  # a list: no weak reference, not rebuilt
