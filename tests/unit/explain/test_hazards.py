"""``_explain/_hazards``: the rules that decide a hazard and its level, on plain inputs."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from otel_jax._capture._statics import static_arg
from otel_jax._explain import _hazard_parts, _hazards


class _Opaque:
    pass


def _module_function(x):
    return x


def test_a_new_value_at_every_compile_on_one_axis():
    assert _hazards._new_each_time([(3, 8), (5, 8), (7, 8)]) == 0
    assert _hazards._new_each_time([(8, 3), (8, 5), (8, 7)]) == 1
    assert _hazards._new_each_time([(3,), (5,), (3,)]) is None  # a length came back
    assert _hazards._new_each_time([(3,), (5, 1), (7,)]) is None  # the rank changed
    assert _hazards._new_each_time([(3,), None, (7,)]) is None


def test_bucketed_sizes():
    assert _hazards._bucketed([64, 128, 256]) and _hazards._bucketed([1, 2, 4])
    assert _hazards._bucketed([128, 384, 640])  # multiples of 128
    assert not _hazards._bucketed([37, 52, 41]) and not _hazards._bucketed([3, 5, 7])
    assert not _hazards._bucketed([2, 3, 4])


def test_statics_by_kind_and_level():
    opaque = static_arg("config", _Opaque())
    [hazard] = _hazard_parts.by_identity(opaque, frozenset({"_Opaque"}))  # made at the call
    assert hazard.warn and hazard.path == "config" and "_Opaque" in hazard.hint
    [note] = _hazard_parts.by_identity(opaque, frozenset({"Other"}))  # passed by name
    assert not note.warn and "same object" in note.text
    assert _hazard_parts.by_identity(static_arg("fn", _module_function)) == []
    # a function made elsewhere (a local function a wrapper library passes as its static,
    # the same object each call): nothing at the first compile
    assert _hazard_parts.by_identity(static_arg("fn", lambda x: x)) == []
    # a lambda written on the calling line: each run of the line makes another, a
    # warning where the line runs again, a note where it is not seen to
    [made] = _hazard_parts.by_identity(static_arg("fn", lambda x: x), frozenset({"<lambda>"}),
                                       lambda: True)
    assert made.warn and "calling line" in made.text
    [once] = _hazard_parts.by_identity(static_arg("fn", lambda x: x), frozenset({"<lambda>"}))
    assert not once.warn and "calling line" in once.text
    for spelling in (jnp.bfloat16, np.float32, jnp.dtype("bfloat16"), np.dtype("float32"),
                     "bfloat16"):
        assert _hazards._dtype_like(static_arg("dtype", spelling)), spelling
    for value in ("mean", "f", 3, _Opaque()):
        assert not _hazards._dtype_like(static_arg("mode", value)), value


def test_a_dtype_is_told_by_its_value_whatever_its_class_is_named():
    # ml_dtypes 0.6 (on a TPU host's JAX 0.10.2) names bfloat16's dtype class
    # ``numpy.dtype[bfloat16]``; 0.7 names it ``ml_dtypes.bfloat16``
    for spelling in (jnp.dtype("bfloat16"), np.dtype("float32")):
        static = dataclasses.replace(static_arg("dtype", spelling),
                                     type=f"numpy.dtype[{spelling.name}]")
        assert _hazards._dtype_like(static), spelling
    assert not _hazards._dtype_like(dataclasses.replace(static_arg("n", 3),
                                                        type="numpy.dtype[int]"))


def test_a_hazard_as_plain_data():
    hazard = _hazards.Hazard(_hazards.CauseKind.SHAPE, "x", "text", "pad", warn=False)
    assert hazard.level == "info"
    assert hazard.as_dict() == {"kind": "shape", "path": "x", "text": "text", "hint": "pad",
                                "level": "info"}


def _parted(a, b):
    from jax import tree_util

    from otel_jax._explain import _hazard_fixpoint

    found: list = []
    _hazard_fixpoint._structure(tree_util.tree_structure(a), tree_util.tree_structure(b),
                                "s", found, [100])
    return [(d.kind.value, d.path, d.before, d.after) for d in found]


def test_where_what_goes_in_and_what_comes_back_part():
    # the input's tree first, the output's second; each named where the next compile's
    # diff names it
    assert _parted({"a": 1, "g": 2}, {"a": 1}) == [
        ("pytree_structure", "s['g']", "a dict with 'g'", "without 'g' (key lost)")]
    assert _parted({"a": 1}, {"a": 1, "m": 2, "v": 3})[0][1:] == (
        "s['m']", "a dict without 'm', 'v'", "with 'm', 'v' (keys gained)")
    assert _parted({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}})[0][1] == "s['a']['c']"
    assert _parted([1, 2], [1, 2, 3])[0][1:] == ("s", "a list of 2", "a list of 3")
    assert _parted((1, None), (1, 2))[0][1:3] == ("s[1]", "None")
    assert _parted((1, 2), [1, 2])[0][2:] == ("a tuple of 2", "a list of 2")
    assert _parted({"a": 1, "b": [1]}, {"a": 1, "b": [1]}) == []
