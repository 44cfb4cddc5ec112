"""``_capture._reprs``: the bounded text of the values a signature keeps."""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax.numpy as jnp

from otel_jax._capture import _reprs


@dataclasses.dataclass(frozen=True)
class Optim:
    lr: float
    name: str = "adam"
    secret: str = dataclasses.field(default="s3cr3t", repr=False)


class Hparams(NamedTuple):
    optim: Optim
    steps: int


def test_static_fields_of_dataclass_likes_nested_and_hidden():
    assert _reprs.static_fields(Hparams(Optim(0.1), 10)) == (
        ("optim.lr", "0.1"), ("optim.name", "'adam'"), ("optim.secret", "<str>"),
        ("steps", "10"))
    assert _reprs.static_fields(3) == ()
    assert _reprs.field_names(Optim(0.1)) == [("lr", True), ("name", True),
                                              ("secret", False)]


def scaled_power(x, k, scale):
    return scale * x ** k


def test_what_a_function_binds():
    assert _reprs.bound_values(functools.partial(scaled_power, k=2, scale=0.5)) == (
        ("k", "2"), ("scale", "0.5"))
    assert _reprs.bound_values(functools.partial(scaled_power, jnp.ones(3))) == (
        ("x", "f32[3]"),)
    n = 4
    assert _reprs.bound_values(lambda x: x * n) == (("n", "4"),)


class Module:
    def __init__(self, lines):
        self.lines = lines

    def __repr__(self):
        return "Module(\n" + "".join(f"  layer{i}=Dense(8),\n" for i in range(self.lines)) + ")"


def test_one_line_repr_is_one_bounded_line():
    assert _reprs.one_line_repr(Module(1)) == "Module( layer0=Dense(8), )"
    text = _reprs.one_line_repr(Module(40), limit=50)
    # cut to about the limit: the note of what was cut may run a character or two over
    assert "\n" not in text and len(text) <= 55 and text.startswith("Module( layer0=")


class SlowRepr:
    calls = 0

    def __hash__(self):
        return 1

    def __eq__(self, other):
        return isinstance(other, SlowRepr)

    def __repr__(self):
        SlowRepr.calls += 1
        return "SlowRepr()"


def test_a_static_repr_is_taken_once_per_distinct_value():
    reprs = _reprs._StaticReprs()
    a, b = SlowRepr(), SlowRepr()  # equal, with the same hash: one value to JAX's cache
    assert reprs.text(a, hash(a), False) == "SlowRepr()"
    assert reprs.text(b, hash(b), False) == "SlowRepr()"
    assert SlowRepr.calls == 1
