"""``_explain._parts``: one difference of one part, worded."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from otel_jax._capture._signature import Placement
from otel_jax._core._text import type_name
from otel_jax._core._vocab import CauseKind
from otel_jax._explain import _parts
from otel_jax._explain._model import Change, Detail


def aval(shape, dtype=jnp.float32, weak=False):
    return jax.typeof(jnp.asarray(1.0) if weak else jax.ShapeDtypeStruct(shape, dtype))


def test_a_leaf_kind_names_the_first_aspect_that_differs():
    f32_2, i32_3 = aval((2,)), aval((3,), jnp.int32)
    assert _parts._leaf_kind(f32_2, i32_3) is CauseKind.DTYPE  # dtype before shape
    assert _parts._leaf_kind(f32_2, aval((3,))) is CauseKind.SHAPE
    assert _parts._leaf_kind(aval(()), aval((), weak=True)) is CauseKind.WEAK_TYPE
    assert _parts._leaf_kind(f32_2, f32_2) is CauseKind.SHARDING  # the type's own sharding
    assert _parts._leaf_kind(object(), object()) is CauseKind.SHAPE  # unreadable


def test_a_placement_change_is_a_sharding_or_a_device():
    one = Placement("committed cpu:0")
    other = Placement("committed cpu:1")
    sharded = Placement("sharded P('a') over mesh(a=2)", True, ("a",), "a=2")
    assert _parts.placement_change("x", one, other) == Change(
        "x", CauseKind.DEVICE_PLACEMENT, "committed cpu:0", "committed cpu:1")
    assert _parts.placement_change("x", one, sharded).kind is CauseKind.SHARDING


def test_passed():
    assert _parts.passed(True) == "passed by keyword"
    assert _parts.passed(False) == "passed positionally"


def test_last_name_of_a_path():
    assert _parts.last_name("cfg.opt.lr") == "lr"
    assert _parts.last_name("batch['mask']") == "mask"
    assert _parts.last_name("") == ""


def test_long_texts_are_cut_where_they_part():
    a = "Config(" + "x" * 200 + "feature_39')"
    b = "Config(" + "x" * 200 + "other')"
    ca, cb = _parts.where_texts_differ(a, b, 60)
    assert ca.startswith("...") and cb.startswith("...")
    assert "feature_39" in ca and "other" in cb and len(ca) <= 60 and len(cb) <= 60
    assert _parts.where_texts_differ("short", "other") == ("short", "other")


def loss(x):
    return x


def test_a_static_function_re_created_or_another():
    made = [lambda x: x for _ in range(2)]
    found: list[Change] = []
    _parts.static_value_change("tx.init", made[0], made[1], found.append)
    [change] = found
    assert change.after == "static new function object, same source"
    assert change.detail is Detail.STATIC_FUNCTION
    found.clear()
    _parts.static_value_change("tx.init", made[0], loss, found.append)
    assert found[0].after.startswith("static another function (loss at test_parts.py:")


@dataclasses.dataclass(frozen=True)
class Schedule:
    decay: float
    steps: int = 10


def test_a_static_dataclass_by_the_fields_that_differ():
    found: list[Change] = []
    _parts.static_value_change("cfg.schedule", Schedule(0.9), Schedule(0.5), found.append)
    assert found == [Change("cfg.schedule.decay", CauseKind.PYTREE_STRUCTURE, "static 0.9",
                            "static 0.5", Detail.STATIC_FIELD, "float")]


class Opaque:
    def __repr__(self):
        return "Opaque()"


def test_equal_reprs_of_unequal_values_say_why():
    found: list[Change] = []
    _parts.static_value_change("p", Opaque(), Opaque(), found.append)
    name = type_name(Opaque())  # qualified by its module
    assert found == [Change("p", CauseKind.PYTREE_STRUCTURE,
                            f"static Opaque() (a {name} compared by identity)",
                            f"static new {name} instance", Detail.IDENTITY_HASHED, name)]
    found.clear()
    nan = functools.partial(float, "nan")
    _parts.static_value_change("eps", nan(), nan(), found.append)
    assert found == [Change("eps", CauseKind.PYTREE_STRUCTURE, "static nan",
                            "static nan (looks the same but is not == to it)",
                            Detail.LOOKS_EQUAL, "float")]
