"""Facts of argument values that only JAX knows: typed PRNG keys, what makes a ``Mesh`` the
mesh it is, and whether arrays are committed to their devices.

Its own module: these read dtypes, ``jax.sharding.Mesh`` and a private flag of
``ArrayImpl`` (``_committed``), per leaf and fast. Checked on JAX 0.8.0, 0.10.2 and
0.12.0.1 (the oldest, default and newest test venvs). Fallback: any value these cannot
read is not a key (``None``/``False``), not a mesh (``None``), not interned, and of
unknown commitment (``None``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any


def prng_key_impl(aval: Any) -> str | None:
    """The implementation of a typed PRNG key's abstract value (``fry`` for
    ``key<fry>[]``, from ``jax.random.key``), or ``None`` for any other value."""
    dtype = getattr(aval, "dtype", None)
    try:
        import jax
        import jax.numpy as jnp

        if dtype is None or not jnp.issubdtype(dtype, jax.dtypes.prng_key):
            return None
    except Exception:
        return None
    impl = getattr(dtype, "_impl", None)
    name = getattr(impl, "name", None)
    return str(name) if name is not None else str(dtype)


def is_raw_key_data(aval: Any) -> bool:
    """A ``uint32`` array: what a legacy ``jax.random.PRNGKey`` is."""
    try:
        import numpy as np

        return bool(np.dtype(aval.dtype) == np.uint32)
    except Exception:
        return False


_MESH_DEVICES_SHOWN = 16


def mesh_fields(value: Any) -> tuple[tuple[str, str], ...] | None:
    """``(field, text)`` of what makes a ``jax.sharding.Mesh`` the mesh it is: axis
    names, sizes and types, and its devices (ids, in mesh order), read off the mesh
    without running user code; ``None`` for any other value.

    JAX 0.10 keeps one Mesh object per distinct value and hashes it by identity: two
    meshes that are not the same object differ in one of these.
    """
    try:
        from jax.sharding import Mesh

        if not isinstance(value, Mesh):
            return None
        devices = value.devices
        names = tuple(str(n) for n in value.axis_names)
        sizes = tuple(int(n) for n in devices.shape)
        kinds = tuple(str(getattr(t, "name", t)) for t in getattr(value, "axis_types", ()))
        ids = [int(getattr(d, "id", -1)) for d in devices.flat]
    except Exception:
        return None
    shown = ",".join(str(i) for i in ids[:_MESH_DEVICES_SHOWN])
    if len(ids) > _MESH_DEVICES_SHOWN:
        import hashlib

        digest = hashlib.blake2b(repr(ids).encode(), digest_size=4).hexdigest()
        shown += f",... ({len(ids)} devices, #{digest})"
    out = [("axis_names", repr(names)), ("axis_sizes", repr(sizes))]
    if kinds:
        out.append(("axis_types", "(" + ", ".join(kinds) + ("," if len(kinds) == 1 else "")
                    + ")"))
    out.append(("devices", f"ids {shown}"))
    return tuple(out)


def interned_by_jax(value: Any) -> bool:
    """Whether ``value``'s type is one JAX keeps one object per distinct value of, so
    that a new object is a new value (a ``Mesh`` on JAX versions that hash it by
    identity)."""
    try:
        from jax.sharding import Mesh
    except Exception:
        return False
    return isinstance(value, Mesh) and type(value).__hash__ is object.__hash__


def is_committed(arr: Any) -> bool | None:
    return getattr(arr, "_committed", None)


_committed_of = operator.attrgetter("_committed")


def committed_flags(values: Sequence[Any]) -> list[bool] | None:
    """Whether each array is committed to its devices, read at C speed; ``None`` when a
    value is not a ``jax.Array`` (a NumPy array, a host scalar)."""
    if not values:
        return []
    # jaxlib's ArrayImpl keeps the flag behind a property: calling its getter
    # directly skips the attribute lookup per leaf (half the time on 10,000
    # leaves); a value of any other type makes the getter raise TypeError.
    getter = getattr(getattr(type(values[0]), "_committed", None), "fget", None)
    if getter is not None:
        try:
            return list(map(getter, values))
        except Exception:
            pass
    try:
        return list(map(_committed_of, values))
    except AttributeError:
        return None
