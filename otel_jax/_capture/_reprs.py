"""The text of the values a signature keeps, never more than a bounded line each.

One-line bounded reprs, the fields of dataclass-like values, what a function binds
(partial arguments, closure cells), and the repr of each distinct static value taken
at most once (JAX never calls it; a slow one is not taken again). Arrays are named
by their type, never their values.
"""

from __future__ import annotations

import functools
import threading
import time
import types
import weakref
from collections.abc import Iterator
from typing import Any

from .._core import _scrub
from .._core._text import REPR_LIMIT, emitted, raw_repr, safe_repr, truncate, type_name

_REPR_SCAN = 2000  # characters of a repr read before it is made one line and cut
MAX_FIELDS = 32  # fields kept per static value, nested ones included
_FIELD_DEPTH = 2  # dataclass-like fields of dataclass-like fields, and no deeper
_FIELD_REPR = 80


def one_line_repr(value: Any, limit: int = REPR_LIMIT, name: str | None = None) -> str:
    """A bounded repr on one line (flax.linen Modules print theirs over many lines)."""
    text = safe_repr(value, _REPR_SCAN, name=name)
    if "\n" in text:
        text = " ".join(text.split())
    return truncate(text, limit)


def field_names(value: Any) -> list[tuple[str, bool]] | None:
    """``(name, shown in repr)`` of the fields a dataclass-like value compares, or ``None``."""
    if isinstance(value, type):
        return None
    t = type(value)
    if isinstance(getattr(t, "__dataclass_fields__", None), dict):
        import dataclasses

        return [(f.name, bool(f.repr)) for f in dataclasses.fields(value) if f.compare]
    if isinstance(value, tuple):
        names = getattr(t, "_fields", None)
        if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
            return [(n, True) for n in names]
        return None
    attrs = getattr(t, "__attrs_attrs__", None)
    if attrs is not None:
        return [(a.name, a.repr is not False) for a in attrs if getattr(a, "eq", True)]
    return None


def static_fields(value: Any) -> tuple[tuple[str, str], ...]:
    """``(path, repr)`` of a dataclass-like value's fields, nested ones dotted; ``()`` if none.

    Bounded: ``MAX_FIELDS`` fields, ``_FIELD_DEPTH`` levels, one-line reprs of
    ``_FIELD_REPR`` characters; a field hidden from the type's own repr shows
    its type only.
    """
    out: list[tuple[str, str]] = []
    try:
        for path, fname, v, shown in _leaf_fields(value):
            out.append((path, one_line_repr(v, _FIELD_REPR, name=fname) if shown
                        else f"<{type_name(v)}>"))
    except Exception:  # a value whose fields cannot be read: diffed whole
        return ()
    return tuple(out)


def _leaf_fields(value: Any) -> Iterator[tuple[str, str, Any, bool]]:
    """``(path, name, value, shown in the type's repr)`` of each field of a dataclass-like
    value that is not itself one, nested ones dotted: at most ``MAX_FIELDS`` of them,
    ``_FIELD_DEPTH`` levels deep. A field that cannot be read is left out."""
    count = 0

    def visit(obj: Any, prefix: str, depth: int) -> Iterator[tuple[str, str, Any, bool]]:
        nonlocal count
        names = field_names(obj)
        if names is None:
            return
        by_index = isinstance(obj, tuple)
        for i, (fname, shown) in enumerate(names):
            if count >= MAX_FIELDS:
                return
            try:
                v = obj[i] if by_index else getattr(obj, fname)
            except Exception:
                continue
            path = f"{prefix}{fname}"
            if depth < _FIELD_DEPTH and field_names(v):
                yield from visit(v, path + ".", depth + 1)
            else:
                count += 1
                yield path, fname, v, shown

    yield from visit(value, "", 1)


def identity_fields(value: Any, number: Any) -> tuple[tuple[str, int, str, str], ...]:
    """``(path, number, site, type)`` of each field of a dataclass-like value (paths as
    :func:`static_fields` gives them) whose value compares by identity: a function (an
    optax ``GradientTransformation``'s ``init`` and ``update``) or an object of a type
    without ``__eq__``/``__hash__``. Two values with equal field texts are still unequal
    when one of these is another object; ``number`` (``SERIALS.of``) tells them apart
    after both are gone, ``site`` names a function's definition (``""`` otherwise)."""
    out: list[tuple[str, int, str, str]] = []
    try:
        for path, _, v, _ in _leaf_fields(value):
            if getattr(type(v), "__hash__", None) is object.__hash__ and not isinstance(
                    v, type):
                out.append((path, number(v) or id(v), _site(v), type_name(v)))
    except Exception:  # fields that cannot be read: compared whole
        return ()
    return tuple(out)


def _site(value: Any) -> str:
    """``init_fn at transform.py:12`` for a plain function, ``""`` for anything else."""
    code = getattr(value, "__code__", None) if type(value) is types.FunctionType else None
    if code is None:
        return ""
    import os

    return (f"{getattr(value, '__qualname__', '?')} at "
            f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}")


_MAX_BOUND = 16  # partial arguments, closure cells and their fields read per function
_BOUND_REPR = 60
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_SHORT_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
                 "int32": "i32", "int64": "i64", "int16": "i16", "int8": "i8",
                 "uint32": "u32", "uint64": "u64", "uint16": "u16", "uint8": "u8",
                 "bool": "bool", "complex64": "c64", "complex128": "c128"}


def bound_text(value: Any, name: str | None = None) -> str:
    """A bound value as text without running user code: plain scalars, strings and
    small tuples of them by repr; an array by its type (``f32[3]``), never its
    values; a function by its name; anything else by its type."""
    t = type(value)
    if t in _PLAIN:
        return safe_repr(value, _BOUND_REPR, name=name)
    if t is tuple and len(value) <= 8 and all(type(v) in _PLAIN for v in value):
        return safe_repr(value, _BOUND_REPR, name=name)
    if t is types.FunctionType:
        return f"<function {getattr(value, '__qualname__', '?')}>"
    module = getattr(t, "__module__", "") or ""
    if module.startswith(("jax", "numpy")) and hasattr(value, "shape") and hasattr(
            value, "dtype"):
        try:
            dtype = str(value.dtype)
            dims = ",".join(str(int(d)) for d in value.shape)
            return f"{_SHORT_DTYPES.get(dtype, dtype)}[{dims}]"
        except Exception:
            pass
    return f"<{type_name(value)}>"


def _bound_fields(value: Any) -> list[tuple[str, Any]] | None:
    """Fields of a dataclass or NamedTuple instance, read without running user code
    (no ``__getattr__``, no properties), or ``None`` for any other value."""
    t = type(value)
    fields = getattr(t, "__dataclass_fields__", None)
    try:
        if isinstance(fields, dict) and not isinstance(value, type):
            state = object.__getattribute__(value, "__dict__")
            return [(name, state[name]) for name in fields if name in state]
        names = getattr(t, "_fields", None)
        if isinstance(value, tuple) and isinstance(names, tuple) and len(names) == len(value):
            return [(n, tuple.__getitem__(value, i)) for i, n in enumerate(names)]
    except Exception:  # slots, no __dict__: its type name only
        return None
    return None


#: ``(path, function)`` of the closures a function binds, looked into after the rest.
_Functions = list[tuple[str, Any]]


def _bind(out: list[tuple[str, str]], name: str, value: Any, functions: _Functions) -> None:
    fields = _bound_fields(value)
    for path, v in [(f"{name}.{f}", v) for f, v in fields] if fields else [(name, value)]:
        out.append((path, bound_text(v, path.rpartition(".")[2])))
        if type(v) is types.FunctionType and v.__closure__ and len(functions) < _MAX_BOUND:
            functions.append((path, v))


#: Closures looked into below a bound function, how deep, and the most values they add:
#: four levels reach a rate in optax's adamw (itself a chain) inside a chain
#: (``opt.update.update_fns[1].update_fns[2].tx.update.step_size``).
_NESTED_DEPTH = 4
_MAX_NESTED = 12
_NUMBERS = frozenset({type(None), bool, int, float})


def _functions_in(path: str, value: Any, depth: int = 0) -> _Functions:
    """The closures ``value`` holds: itself, a small tuple's or list's items, a
    NamedTuple's or dataclass's fields (an optax ``GradientTransformation``)."""
    if type(value) is types.FunctionType:
        return [(path, value)] if value.__closure__ else []
    if depth > 1:
        return []
    fields = _bound_fields(value)
    if fields:
        return [f for name, v in fields for f in _functions_in(f"{path}.{name}", v, depth + 1)]
    if type(value) in (tuple, list) and len(value) <= 8:
        return [f for i, v in enumerate(value)
                for f in _functions_in(f"{path}[{i}]", v, depth + 1)]
    return []


def _array_like(value: Any) -> bool:
    module = getattr(type(value), "__module__", "") or ""
    return module.startswith(("jax", "numpy")) and hasattr(value, "shape") \
        and hasattr(value, "dtype")


def _bind_attributes(out: list[tuple[str, str]], owner: Any) -> None:
    """``self.<name>`` of each instance attribute of ``owner`` that is a plain value or
    an array (its type): the values a method reads off its object; an object of any other
    type is left out (its text, its type's name, tells no two objects apart)."""
    try:
        state = object.__getattribute__(owner, "__dict__")
    except Exception:  # slots, or no instance dict
        return
    if not isinstance(state, dict):
        return
    for name, value in list(state.items())[:4 * _MAX_BOUND]:
        if len(out) >= _MAX_BOUND:
            break
        text = bound_text(value, name)
        if isinstance(name, str) and not text.startswith("<"):
            out.append((f"self.{name}", text))


def bound_values(fun: Any) -> tuple[tuple[str, str], ...]:
    """``(name, text)`` of what ``fun`` binds: functools.partial arguments (named
    after the parameters they fill) and keywords, then the closure cells of the
    function inside; a dataclass or NamedTuple field by field."""
    out: list[tuple[str, str]] = []
    functions: _Functions = []
    partials: list[Any] = []
    target = fun
    while isinstance(target, functools.partial) and len(partials) < 4:
        partials.append(target)
        target = target.func
    code = getattr(target, "__code__", None) if type(target) is types.FunctionType else None
    params = code.co_varnames[:code.co_argcount] if code is not None else ()
    offset = 0
    for p in reversed(partials):  # innermost first: its arguments come first
        for i, v in enumerate(p.args):
            j = offset + i
            _bind(out, params[j] if j < len(params) else f"args[{j}]", v, functions)
        offset += len(p.args)
        for k, v in p.keywords.items():
            _bind(out, str(k), v, functions)
    if code is None and not partials and not isinstance(target, type):
        # A jitted callable object (a dataclass with __call__): its fields are what
        # it binds, read without running its code.
        for field_name, v in _bound_fields(target) or ():
            out.append((f"self.{field_name}", bound_text(v, field_name)))
    if isinstance(target, types.MethodType) and not partials:
        # A bound method (``jax.jit(self._step)``): a new object's method is a new
        # function, and what differs is the object's state. Its instance attributes,
        # read from its ``__dict__`` without running its code (no properties).
        _bind_attributes(out, target.__self__)
    cells = getattr(target, "__closure__", None) if code is not None else None
    if cells and code is not None:
        for var, cell in zip(code.co_freevars, cells):
            if len(out) >= _MAX_BOUND:
                break
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a variable assigned later)
                continue
            _bind(out, var, contents, functions)
    del out[_MAX_BOUND:]
    _bind_nested(out, functions)
    return tuple(out)


def _bind_nested(out: list[tuple[str, str]], level: _Functions) -> None:
    """The plain values held in the closures of the functions ``out`` names (an optax
    optimizer's ``update``, closing over ``step_size``), breadth first, a few levels deep,
    after everything else: what differs between two objects of one source, each a
    closure over another value (``opt.update.update_fns[1].step_size: -0.001 ->
    -0.003``)."""
    for _ in range(_NESTED_DEPTH):
        deeper: list[tuple[str, Any]] = []
        for name, fn in level:
            code = fn.__code__
            for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
                if len(out) >= _MAX_BOUND + _MAX_NESTED:
                    return
                try:
                    contents = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                path = f"{name}.{var}"
                if type(contents) in _NUMBERS:  # their repr is short and runs no user code
                    out.append((path, repr(contents)))
                elif type(contents) in _PLAIN or _array_like(contents):
                    out.append((path, bound_text(contents, var)))
                else:
                    deeper += _functions_in(path, contents)
        level = deeper
        if not level:
            return


#: A repr slower than this marks its type slow: later values of that type are
#: not repr'd at all (their text names the type and a digest of their hash).
SLOW_REPR_S = 0.05
_MAX_REMEMBERED_REPRS = 2048
#: Built-in scalar types: their repr is cheap, taken every time, never remembered.
PLAIN_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})
#: The raw repr kept per value: far more than any emitted text shows.
_RAW_REPR_KEPT = 4 * REPR_LIMIT + 512


class _StaticReprs:
    """The repr of each distinct static value, taken at most once.

    JAX never calls a static argument's ``__repr__``; otel_jax needs its text
    for causes and ``compile_history``. A value seen again (the same object,
    or one equal to it with the same hash, as JAX's cache compares them)
    reuses the text taken the first time. Values are held by weak reference
    only: nothing here keeps a user's object alive. A type whose repr was
    slow once (``SLOW_REPR_S``) is not repr'd again.
    """

    def __init__(self) -> None:
        self._texts: dict[tuple[type, int], list[tuple[Any, str]]] = {}
        self._count = 0
        self._slow: dict[type, float] = {}
        self._lock = threading.RLock()

    def text(self, value: Any, h: int | None, identity: bool) -> str:
        t = type(value)
        if t in PLAIN_TYPES:
            return raw_repr(value)
        key = None if h is None else (t, id(value) if identity else h)
        if key is not None:
            found = self._lookup(key, value, identity)
            if found is not None:
                return found
        slow = self._slow.get(t)
        if slow is not None:
            return (f"<{type_name(value)}: repr not taken, it took {slow:.2f} s; "
                    f"#{_scrub.digest(str(h))}>")
        started = time.perf_counter()
        text = raw_repr(value)[:_RAW_REPR_KEPT]
        took = time.perf_counter() - started
        if took > SLOW_REPR_S and t.__module__ != "builtins":
            with self._lock:
                if len(self._slow) > 1024:
                    self._slow.clear()
                self._slow[t] = took
        if key is not None:
            self._remember(key, value, text)
        return text

    def _lookup(self, key: tuple[type, int], value: Any, identity: bool) -> str | None:
        for ref, text in tuple(self._texts.get(key, ())):
            other = ref()
            if other is value:
                return text
            if other is not None and not identity:
                try:
                    if bool(other == value):
                        return text
                except Exception:  # a hostile __eq__: take the repr again
                    pass
        return None

    def _remember(self, key: tuple[type, int], value: Any, text: str) -> None:
        try:
            ref = weakref.ref(value)
        except TypeError:  # not weakly referenceable: never held, repr'd each time
            return
        with self._lock:
            if self._count >= _MAX_REMEMBERED_REPRS:
                self._texts.clear()
                self._count = 0
            entries = [(r, s) for r, s in self._texts.get(key, ()) if r() is not None]
            entries.append((ref, text))
            self._texts[key] = entries[-8:]
            self._count += 1

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
            self._slow.clear()
            self._count = 0


STATIC_REPRS = _StaticReprs()


#: A static text cut to REPR_LIMIT is also kept this long, so that two values whose
#: texts part after the cut can be shown where they part.
DETAIL_LIMIT = 4 * REPR_LIMIT


def static_text(name: str, value: Any, h: int | None, identity: bool,
                 limit: int = REPR_LIMIT) -> str:
    """The emitted text of a static value: scrubbed, bounded, its repr taken at most once."""
    rules = _scrub.active()
    label = type_name(value)
    if rules is not None and rules.hide_values:
        # No value is shown: the digest of the hash tells values apart without a repr.
        return emitted(f"hash {h}" if h is not None else raw_repr(value), limit, name,
                       label)
    text = STATIC_REPRS.text(value, h, identity)
    if "\n" in text:  # flax.linen Modules print theirs over many lines
        text = " ".join(text.split())
    return emitted(text, limit, name, label)
