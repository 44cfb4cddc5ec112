"""``_capture._fingerprint``: a compile's signature as a digest every process agrees on."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from otel_jax._capture import _fingerprint, _signature
from otel_jax._capture._signature import StaticKind
from otel_jax._capture._source import FunctionInfo

from ..signatures import build, static

INFO = FunctionInfo("train_step", "/home/a/train.py", 12)
X = jax.ShapeDtypeStruct((8, 4), jnp.float32)


def of(sig, info=INFO):
    return _fingerprint.of_signature(info, sig)


def test_equal_signatures_built_apart_have_one_fingerprint():
    a, b = of(build({"x": X}, statics=[static("n", 2)])), of(build({"x": X},
                                                                   statics=[static("n", 2)]))
    assert a == b and len(a) == _fingerprint.DIGITS


def test_each_part_of_the_signature_changes_it():
    base = of(build({"x": X}, 1.0, statics=[static("n", 2)]))
    others = [
        build({"x": jax.ShapeDtypeStruct((8, 5), jnp.float32)}, 1.0, statics=[static("n", 2)]),
        build({"y": X}, 1.0, statics=[static("n", 2)]),
        build({"x": X}, jnp.float32(1.0), statics=[static("n", 2)]),
        build({"x": X}, 1.0, statics=[static("n", 3)]),
        build({"x": X}, 1.0, statics=[static("n", 2)], options=(("donate_argnums", "(0,)"),)),
        build({"x": X}, 1.0, statics=[static("n", 2)], context=(("jax_enable_x64", True),)),
    ]
    found = [of(s) for s in others]
    assert base not in found and len(set(found)) == len(found)


def test_the_kind_of_a_static_entry_is_part_of_it():
    value = static("n", 2)
    structure = _signature.StaticArg(name="n", type=value.type, repr=value.repr,
                                     hash=value.hash, identity_hashed=False,
                                     kind=StaticKind.PYTREE_STRUCTURE)
    assert of(build(X, statics=[value])) != of(build(X, statics=[structure]))


class ByIdentity:
    pass


def test_an_identity_hashed_static_is_known_by_its_type():
    # a new object in every process: what two processes can agree on is its type
    assert of(build(X, statics=[static("o", ByIdentity())])) == of(
        build(X, statics=[static("o", ByIdentity())]))


def test_the_function_is_named_without_its_directory():
    assert _fingerprint.function_identity(INFO) == "train_step@train.py"
    moved = FunctionInfo("train_step", "/other/host/train.py", 99)
    assert of(build(X), moved) == of(build(X))
    assert of(build(X), FunctionInfo("eval_step", "/home/a/train.py", 12)) != of(build(X))


def test_a_signature_not_captured_has_no_fingerprint():
    assert of(_signature.uncaptured()) == ""
