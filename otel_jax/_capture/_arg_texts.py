"""What a signature's per-leaf parts and jit options read as: the texts of abstract
values, the placements of arguments, the texts of jit options.

Its own module: every compile reads these for each leaf, so each is cached per
distinct value (by identity first, then by equality) and the caches live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._core._idcache import IdentityCache
from .._core._text import safe_repr
from ._jax import _jit_info, _values
from ._signature import UNCOMMITTED, Placement

_MAX_CACHED_STRINGS = 8192


# The text of each abstract value: JAX arrays keep theirs (``Array.aval``), so most
# lookups hit by identity, without hashing the value in Python; an equal value met
# as a new object is found by equality and remembered under its own identity.
_type_strings: dict[Any, str] = {}
_type_strings_by_id: IdentityCache[str] = IdentityCache(_MAX_CACHED_STRINGS)
_placements: dict[Any, Placement] = {}
# The sharding each sharded placement was read from, for the fixed-point rule, which
# compares what a compile returns with it (``None``: placements alike read from shardings
# that are not equal, which one an argument had is not known). Filled where a placement
# is made, once per distinct sharding: nothing per compile.
_shardings: dict[Placement, Any] = {}
# Options rendered once per distinct set of option values, not once per
# compile. Keyed by the values (shardings, argnums, flags), never by the jit
# wrapper's PjitInfo: that holds the function's signature and so its default
# argument values, which may be a user's arrays.
_options_text: dict[Any, tuple[tuple[str, str], ...]] = {}


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> Any:
    if len(cache) >= _MAX_CACHED_STRINGS:
        cache.clear()
    cache[key] = value
    return value


def aval_text(aval: Any) -> str:
    """``f32[3]``, ``i32[] (weak)``, ``f32[8@data,4]`` (the sharding is part of the type)."""
    known = _type_strings_by_id.get(aval)
    if known is not None:
        return known
    try:
        cached = _type_strings.get(aval)
    except TypeError:  # unhashable abstract value
        return _aval_text(aval)
    text = cached if cached is not None else _remember(_type_strings, aval, _aval_text(aval))
    # The abstract value is held (shape, dtype, sharding: never array data).
    return _type_strings_by_id.put(aval, str(text))


def _aval_text(aval: Any) -> str:
    try:
        text = str(aval.str_short(short_dtypes=True))
    except Exception:
        text = safe_repr(aval)
    if getattr(aval, "weak_type", False):
        text += " (weak)"
    return text


def _device_text(device: Any) -> str:
    return f"{getattr(device, 'platform', '?')}:{getattr(device, 'id', '?')}"


def placement(value: Any) -> Placement:
    """Where an argument lives, as far as it affects compilation.

    Uncommitted arrays (and host values) may be moved by JAX, so their device
    is not part of the key; committed ones pin the computation to theirs.
    """
    sharding = getattr(value, "sharding", None)
    if sharding is None:
        return UNCOMMITTED
    committed = _values.is_committed(value)
    key: tuple[Any, bool | None] | None = (sharding, committed)
    try:
        cached = _placements.get(key)
    except TypeError:
        cached, key = None, None
    if cached is not None:
        return cached
    sharded = True
    entries: tuple[str, ...] = ()
    axes = ""
    try:
        devices = sharding.device_set
        if len(devices) == 1:
            sharded = False
            text = (f"committed {_device_text(next(iter(devices)))}"
                    if committed else "uncommitted")
        else:
            mesh = getattr(sharding, "mesh", None)
            spec = getattr(sharding, "spec", None)
            if mesh is not None and spec is not None:
                axes = ",".join(f"{n}={s}" for n, s in dict(mesh.shape).items())
                text = f"sharded {spec} over mesh({axes})"
                entries = tuple(str(e) for e in spec)
            else:
                text = f"sharded {safe_repr(sharding, 80)}"
            if not committed:
                text += " uncommitted"
    except Exception:
        text = f"sharded {safe_repr(sharding, 80)}"
        entries, axes = (), ""
    result = (UNCOMMITTED if text == UNCOMMITTED.text
              else Placement(text, sharded, entries, axes))
    if sharded and committed and key is not None:
        _remember_sharding(result, sharding)
    return _remember(_placements, key, result) if key is not None else result


def _remember_sharding(placement: Placement, sharding: Any) -> None:
    known = _shardings.get(placement, sharding)
    try:
        same = known is sharding or bool(known == sharding)
    except Exception:
        same = False
    _remember(_shardings, placement, sharding if same else None)


def sharding_of(placement: Placement) -> Any | None:
    """The sharding a committed, sharded ``placement`` was read from, or ``None``."""
    return _shardings.get(placement)


def placements_of(flat: Sequence[Any]) -> tuple[Placement, ...]:
    """The placement of every argument; per-leaf work only for committed arrays.

    Uncommitted arrays (the default device, where JAX may move them) are by far
    the most common leaves and all read the same: their flags are read at C
    speed, and committed arrays that share a sharding object are read once.
    """
    committed = _values.committed_flags(flat)
    if committed is None:
        return tuple(placement(v) for v in flat)
    if not any(committed):
        return (UNCOMMITTED,) * len(flat)
    seen: dict[int, Placement] = {}
    out: list[Placement] = []
    for value, is_committed in zip(flat, committed):
        if not is_committed:
            out.append(UNCOMMITTED)
            continue
        sharding = getattr(value, "sharding", None)
        known = seen.get(id(sharding))
        if known is None:
            known = seen[id(sharding)] = placement(value)
        out.append(known)
    return tuple(out)


def option_texts(jit_info: Any) -> tuple[tuple[str, str], ...]:
    """The jit options as ``(name, text)`` pairs, rendered once per distinct set of values."""
    options = _jit_info.jit_options(jit_info)
    try:
        cached = _options_text.get(options)
    except Exception:  # an unhashable option value: rendered every time
        options_key = None
        cached = None
    else:
        options_key = options
    if cached is None:
        cached = tuple((k, safe_repr(v, 200)) for k, v in options)
        if options_key is not None:
            _remember(_options_text, options_key, cached)
    return cached
