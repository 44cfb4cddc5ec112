"""One difference of one part, worded: a leaf's abstract type, a placement, a static
value (a re-created function, a dataclass-like by its fields, equal reprs of unequal
values), and long texts cut where they part."""

from __future__ import annotations

import re
import types
from typing import Any

from .._capture._jax import _values
from .._capture._reprs import field_names, one_line_repr
from .._capture._signature import Placement
from .._core._text import truncate, type_name
from .._core._vocab import CauseKind
from ._model import AddChange, Change, Detail
from ._same import safe_ne


def passed(keyword: bool) -> str:
    """How an argument was passed, in the words of a change."""
    return "passed by keyword" if keyword else "passed positionally"


def _leaf_kind(old_aval: Any, new_aval: Any) -> CauseKind:
    try:
        if old_aval.dtype != new_aval.dtype:
            return CauseKind.DTYPE
        if old_aval.shape != new_aval.shape:
            return CauseKind.SHAPE
        if getattr(old_aval, "weak_type", False) != getattr(new_aval, "weak_type", False):
            return CauseKind.WEAK_TYPE
    except Exception:
        return CauseKind.SHAPE
    return CauseKind.SHARDING  # same shape and dtype: the type's own sharding differs


def leaf_change(path: str, old_aval: Any, new_aval: Any, before: str, after: str) -> Change:
    """An argument's abstract type changed; a PRNG key of another style or
    implementation is told apart (its fix is not a cast)."""
    kind = _leaf_kind(old_aval, new_aval)
    if kind is CauseKind.DTYPE:
        impl_a, impl_b = _values.prng_key_impl(old_aval), _values.prng_key_impl(new_aval)
        if impl_a is not None and impl_b is not None:
            return Change(path, kind, before, after, Detail.KEY_IMPL)
        if (impl_a is None) != (impl_b is None) and _values.is_raw_key_data(
                old_aval if impl_a is None else new_aval):
            return Change(path, kind, before, after, Detail.KEY_STYLE)
    return Change(path, kind, before, after)


def placement_change(path: str, before: Placement, after: Placement) -> Change:
    """An argument placed otherwise: a sharding when either side is sharded, else a device."""
    kind = (CauseKind.SHARDING if before.sharded or after.sharded
            else CauseKind.DEVICE_PLACEMENT)
    return Change(path, kind, before.text, after.text)


def static_value_change(path: str, x: Any, y: Any, add: AddChange, depth: int = 0) -> None:
    """``path: static X -> static Y`` for one static value of a pytree node; a
    re-created function named as such; a NamedTuple or dataclass by the fields
    that differ (``state.tx.init``)."""
    if type(x) is type(y):
        if isinstance(x, types.FunctionType):
            same = x.__code__ is y.__code__
            add(Change(path, CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(x, name=last_name(path))}",
                       "static new function object, same source" if same else
                       f"static another function ({function_site(y)})",
                       Detail.STATIC_FUNCTION))
            return
        if isinstance(x, types.MethodType) and x.__func__ is y.__func__:
            add(Change(path, CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(x, name=last_name(path))}",
                       f"static new bound method object (bound to another "
                       f"{type_name(y.__self__)} object)", Detail.STATIC_FUNCTION))
            return
        if depth < 2:
            fields = _differing_fields(x, y)
            if fields:
                for name, a, b in fields:
                    static_value_change(f"{path}.{name}", a, b, add, depth + 1)
                return
    x_text, y_text = _where_they_differ(x, y, name=last_name(path))
    detail = Detail.STATIC_FIELD
    if x_text == y_text:  # equal reprs, unequal values: say why
        if type(x) is type(y) and getattr(type(y), "__hash__", None) is object.__hash__:
            x_text = f"{x_text} (a {type_name(x)} compared by identity)"
            y_text = f"new {type_name(y)} instance"
            detail = Detail.IDENTITY_HASHED
        else:
            y_text = f"{y_text} (looks the same but is not == to it)"
            detail = Detail.LOOKS_EQUAL
    add(Change(path, CauseKind.PYTREE_STRUCTURE, f"static {x_text}", f"static {y_text}",
               detail, type_name(y)))


def function_site(fun: Any) -> str:
    """``loss at train.py:12``: where a function is defined, read off its code object."""
    code = fun.__code__
    import os

    return f"{fun.__qualname__} at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def _differing_fields(x: Any, y: Any) -> list[tuple[str, Any, Any]]:
    """``(field, before, after)`` of the fields in which two dataclass-likes differ."""
    names = field_names(x)
    if not names or len(names) > 64:
        return []
    out = []
    try:
        for i, (name, _) in enumerate(names):
            a = x[i] if isinstance(x, tuple) else getattr(x, name)
            b = y[i] if isinstance(y, tuple) else getattr(y, name)
            if safe_ne(a, b):
                out.append((name, a, b))
    except Exception:
        return []
    return out


_CONTEXT = 24  # characters kept before the first difference of two long reprs


def last_name(path: str) -> str:
    """The field, attribute or key a path ends in: ``lr`` for ``cfg.opt.lr``."""
    parts = [p for p in re.split(r"[.\[\]'\"]", path) if p]
    return parts[-1] if parts else path


def _where_they_differ(x: Any, y: Any, limit: int = 120, name: str | None = None,
                       ) -> tuple[str, str]:
    """Two bounded one-line reprs that show where long reprs part, not only their
    common start: ``...'feature_39')`` vs ``...'other')``."""
    return where_texts_differ(one_line_repr(x, 2000, name=name),
                               one_line_repr(y, 2000, name=name), limit)


def where_texts_differ(a: str, b: str, limit: int = 120) -> tuple[str, str]:
    """``a`` and ``b`` cut to ``limit``, around the first character where they part."""
    if len(a) <= limit and len(b) <= limit:
        return a, b
    i = next((k for k, (p, q) in enumerate(zip(a, b)) if p != q), min(len(a), len(b)))
    if i < limit - _CONTEXT:
        return truncate(a, limit), truncate(b, limit)
    start = i - _CONTEXT
    return ("..." + truncate(a[start:], limit - 3), "..." + truncate(b[start:], limit - 3))
