"""Whether two parts of two signatures are the same, as JAX's cache would decide.

Shared by the search for the closest earlier signature and by the diff, so that
both agree on what differs. A broken ``__eq__`` never raises out of here.
"""

from __future__ import annotations

from typing import Any

from .._capture._jax import _traced
from .._capture._signature import Signature, StaticArg
from .._core._text import safe_repr


def safe_ne(a: Any, b: Any) -> bool:
    """``a != b`` that never raises: values that cannot be compared are told apart by repr."""
    if a is b:
        return False
    try:
        return bool(a != b)
    except Exception:  # a config value or mesh with a broken __eq__
        return safe_repr(a) != safe_repr(b)


def plainly_equal(a: Any, b: Any) -> bool:
    """``a == b`` when it says so plainly (a bool), never raising: else not equal (where
    ``safe_ne`` tells values apart, this says only what ``==`` affirms)."""
    try:
        result = a == b
        return result if type(result) is bool else False
    except Exception:  # a broken __eq__: not known to be equal
        return False


def same_function(old: Signature, new: Signature) -> bool:
    """One function object (JAX caches per object): by the numbers taken while each was
    alive (``Serials``), else by id. Never through the weak references, which would hold
    the program's function on otel_jax's thread (``Serials.alive`` says why)."""
    if old.function_serial and new.function_serial:
        return old.function_serial == new.function_serial
    return old.function_id == new.function_id


def transformations_differ(old: Signature, new: Signature) -> bool:
    """Both transformed programs ran under transformations read off the stack, and those
    (or their parameters) differ."""
    return bool(old.transformation and new.transformation
                and old.transformation != new.transformation)


def is_bound_method(sig: Signature) -> bool:
    """The signature's function is a bound method (``jax.jit(obj.method)``)."""
    return sig.bound_method


def static_changed(old: StaticArg, new: StaticArg) -> bool:
    """A static argument JAX's cache tells apart: another value or passed another way."""
    return old.keyword != new.keyword or static_value_changed(old, new)


def static_value_changed(old: StaticArg, new: StaticArg) -> bool:
    """Another value: by type, then by object for identity-hashed ones, else by hash,
    text and ``==`` while both values are alive."""
    if old.type != new.type:
        return True
    if old.identity_hashed or new.identity_hashed:
        same = old.same_object_as(new)
        return not same if same is not None else old.repr != new.repr
    return old.hash != new.hash or old.repr != new.repr or old.value != new.value


def treedef_equal(old: Signature, new: Signature) -> bool:
    """One argument structure, as JAX's cache compares treedefs (see ``trees_equal``)."""
    a, b = old.treedef, new.treedef
    try:
        return _traced.trees_equal(a, b, old.tree_hash, new.tree_hash)
    except Exception:  # a node JAX cannot compare
        return safe_repr(a) == safe_repr(b)
