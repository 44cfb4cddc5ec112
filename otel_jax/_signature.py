"""The signature a compile saw: everything that is part of JAX's cache key, as plain data.

A signature is built only when a backend compile really happens, from the
references the dispatch-cache miss left (see ``_jax_hooks.Miss``). It keeps no
array and no argument value: abstract types, placements, static-argument
reprs and hashes, and a weak reference to the function object.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _jax_read, _scrub, _wrappers
from ._text import REPR_LIMIT, emitted, raw_repr, safe_repr, type_name

if TYPE_CHECKING:
    from ._jax_hooks import Miss

_MAX_CACHED_STRINGS = 8192
TRANSFORMED = "transformed (grad/jvp/vmap outside jit)"


class Placement(NamedTuple):
    """Where an argument lives, as far as it affects compilation (a tuple: compared at C speed)."""

    text: str  # "uncommitted", "committed cpu:0", "sharded P('data') over mesh(data=8)"
    sharded: bool = False

    def __str__(self) -> str:
        return self.text


UNCOMMITTED = Placement("uncommitted")


@dataclass(frozen=True, slots=True)
class StaticArg:
    """A static argument as JAX's cache compares it: by hash and equality."""

    name: str
    type: str
    repr: str
    hash: int | None
    identity_hashed: bool
    ref: Any = field(default=None, compare=False)  # weakref to the object, or None
    obj_id: int = field(default=0, compare=False)
    # pytree_structure: not an argument but the shape of the argument trees,
    # which a wrapper library passes as a static value.
    kind: str = "static_argument"
    # pytree_structure only: the treedef itself (no array in it), walked by the diff
    tree: Any = field(default=None, compare=False)

    def same_object_as(self, other: StaticArg) -> bool | None:
        """For identity-hashed statics: were both the same object? ``None`` if unknown."""
        if self.ref is not None and other.ref is not None:
            mine = self.ref()
            return mine is not None and mine is other.ref()
        if self.ref is not None and self.ref() is None:
            return False
        return self.obj_id == other.obj_id if self.obj_id and other.obj_id else None


@dataclass(frozen=True, slots=True, eq=False)
class Signature:
    """What one compilation of a function saw.

    ``paths``, ``types`` and ``placements`` are parallel, one entry per array
    leaf of the traced arguments, in JAX's flattening order.
    """

    function_ref: Any  # weakref to the function object, or None
    function_id: int
    options: tuple[tuple[str, str], ...]
    context: tuple[tuple[str, Any], ...]
    treedef: Any
    avals: tuple[Any, ...]
    top_names: tuple[str, ...]  # names of the positional args in ``treedef``
    paths: tuple[str, ...]
    types: tuple[str, ...]
    placements: tuple[Placement, ...]
    statics: tuple[StaticArg, ...]
    captured: bool = True  # False: built without a miss (fallback)
    # "" for a call of the jitted function; TRANSFORMED for its computation
    # evaluated under grad/vmap/jvp outside jit (a different program).
    transform: str = ""
    program: str = ""  # transformed only: "2 inputs, 1 output"

    @property
    def num_leaves(self) -> int:
        return len(self.types)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``compile_history``: what a person reads."""
        return {
            "arguments": {p: {"type": t, "placement": pl.text}
                          for p, t, pl in zip(self.paths, self.types, self.placements)},
            "static_arguments": {s.name: s.repr + (" (hashed by identity)"
                                                   if s.identity_hashed else "")
                                 for s in self.statics if s.kind == "static_argument"},
            "pytree_structure": safe_repr(self.treedef, 400),
            "jit_options": {k: v for k, v in self.options if v not in ("()", "None", "False")},
        }


def _weak(obj: Any) -> Any:
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


_type_strings: dict[Any, str] = {}
_placements: dict[Any, Placement] = {}
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
    try:
        cached = _type_strings.get(aval)
    except TypeError:  # unhashable abstract value
        cached = None
    if cached is not None:
        return cached
    try:
        text = aval.str_short(short_dtypes=True)
    except Exception:
        text = safe_repr(aval)
    if getattr(aval, "weak_type", False):
        text += " (weak)"
    try:
        return _remember(_type_strings, aval, text)
    except TypeError:
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
    committed = _jax_read.is_committed(value)
    key: tuple[Any, bool | None] | None = (sharding, committed)
    try:
        cached = _placements.get(key)
    except TypeError:
        cached, key = None, None
    if cached is not None:
        return cached
    sharded = True
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
            else:
                text = f"sharded {safe_repr(sharding, 80)}"
            if not committed:
                text += " uncommitted"
    except Exception:
        text = f"sharded {safe_repr(sharding, 80)}"
    result = UNCOMMITTED if text == UNCOMMITTED.text else Placement(text, sharded)
    return _remember(_placements, key, result) if key is not None else result


def _options(jit_info: Any) -> tuple[tuple[str, str], ...]:
    options = _jax_read.jit_options(jit_info)
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


#: A repr slower than this marks its type slow: later values of that type are
#: not repr'd at all (their text names the type and a digest of their hash).
SLOW_REPR_S = 0.05
_MAX_REMEMBERED_REPRS = 2048
#: Built-in scalar types: their repr is cheap, taken every time, never remembered.
_PLAIN = frozenset({int, float, bool, complex, str, bytes, type(None)})
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
        self._lock = threading.Lock()

    def text(self, value: Any, h: int | None, identity: bool) -> str:
        t = type(value)
        if t in _PLAIN:
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


def _static_text(name: str, value: Any, h: int | None, identity: bool) -> str:
    """The emitted text of a static value: scrubbed, bounded, its repr taken at most once."""
    rules = _scrub.active()
    label = type_name(value)
    if rules is not None and rules.hide_values:
        # No value is shown: the digest of the hash tells values apart without a repr.
        return emitted(f"hash {h}" if h is not None else raw_repr(value), REPR_LIMIT, name,
                       label)
    return emitted(STATIC_REPRS.text(value, h, identity), REPR_LIMIT, name, label)


def _static_arg(name: str, value: Any, kind: str = "static_argument") -> StaticArg:
    t = type(value)
    identity = getattr(t, "__hash__", None) is object.__hash__
    try:
        h: int | None = hash(value)
    except Exception:
        h = None
    return StaticArg(
        name=name, type=type_name(value), repr=_static_text(name, value, h, identity),
        hash=h, identity_hashed=identity,
        ref=_weak(value) if identity else None,
        obj_id=id(value) if identity else 0,
        kind=kind,
        tree=value if kind == "pytree_structure" else None,
    )


def from_miss(miss: Miss, stands_for: Any | None = None) -> Signature:
    """The signature of the compile that ``miss`` led to.

    ``stands_for``: the user's function that the jitted library function wraps
    (``jax.pmap``'s), whose identity is compared instead of the wrapper's.
    """
    inputs = _jax_read.miss_inputs(miss)
    avals = inputs.avals
    flat = inputs.flat
    types = tuple(aval_text(a) for a in avals)
    placements = tuple(placement(v) for v in flat) if len(flat) == len(types) \
        else (UNCOMMITTED,) * len(types)
    names = _jax_read.parameter_names(miss.jit_info, len(miss.args))
    top_names = tuple(names[i] for i in _jax_read.dynamic_positions(miss))
    paths = inputs.arg_names or tuple(f"leaf[{i}]" for i in range(len(types)))
    statics = [_static_arg(n, v) for n, v in _jax_read.static_arguments(miss)]
    treedef = inputs.in_tree
    layout = _wrappers.layout_for(miss)
    if layout is not None:
        treedef, top_names, paths, avals, types, placements = _as_user_paths(
            layout, treedef, top_names, paths, avals, types, placements)
        statics = [_static_arg(n, v) for n, v in layout.statics]
        statics.extend(_static_arg(name, tree, kind="pytree_structure")
                       for name, tree in layout.structure)
    primitive = _jax_read.primitive_params(miss.fun)
    if primitive is not None:
        statics.extend(_static_arg(f"params.{k}", v) for k, v in sorted(primitive.items()))
    # One function object per primitive parameters, and one jaxpr per argument
    # types under a transformation: neither identity says anything more.
    by_identity = primitive is None and not miss.transformed
    identity = miss.fun if stands_for is None else stands_for
    return Signature(
        function_ref=_weak(identity) if by_identity else None,
        function_id=id(identity) if by_identity else 0,
        # A library's internal jit wrapper derives its options (pmap's
        # in_shardings) from the call: they are not the user's to change.
        options=_options(miss.jit_info) if stands_for is None else (),
        context=_jax_read.trace_context_items(),
        treedef=treedef,
        avals=avals,
        top_names=top_names,
        paths=paths,
        types=types,
        placements=placements,
        statics=tuple(statics),
        transform=TRANSFORMED if miss.transformed else "",
        program=_program(len(avals), inputs.out_count)
        if miss.transformed else "",
    )


def _as_user_paths(layout: _wrappers.Layout, treedef: Any, top_names: tuple[str, ...],
                   paths: tuple[str, ...], avals: tuple[Any, ...], types: tuple[str, ...],
                   placements: tuple[Placement, ...]) -> tuple[Any, ...]:
    """Leaves renamed to the user's paths, as one keyword tree keyed by those paths.

    Keyed by path, a structure diff reads ``batch['mask']: <absent> -> f32[8]``
    instead of walking the library's flat dynamic tuples.
    """
    renamed = tuple(layout.rename(p) for p in paths)
    if len(set(renamed)) != len(renamed):  # not a layout we understood: keep JAX's tree
        return treedef, top_names, renamed, avals, types, placements
    from jax import tree_util

    order = sorted(range(len(renamed)), key=renamed.__getitem__)
    user_tree = tree_util.tree_structure(((), {renamed[i]: 0 for i in order}))
    return (user_tree, (), tuple(renamed[i] for i in order), tuple(avals[i] for i in order),
            tuple(types[i] for i in order), tuple(placements[i] for i in order))


def _program(inputs: int, outputs: int) -> str:
    return (f"{inputs} input{'s' * (inputs != 1)}, "
            f"{outputs} output{'s' * (outputs != 1)}")


def uncaptured() -> Signature:
    """Stand-in when JAX gave us no miss to read (moved internals)."""
    return Signature(None, 0, (), _jax_read.trace_context_items(), None, (), (), (), (), (),
                     (), captured=False)
