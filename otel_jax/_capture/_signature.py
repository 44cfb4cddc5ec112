"""The signature a compile saw: everything that is part of JAX's cache key, as plain data.

A signature is built only when a backend compile really happens, from the
references the dispatch-cache miss left (see ``_jax_hooks.Miss``). It keeps no
array and no argument value: abstract types, placements, static-argument
reprs and hashes, and a weak reference to the function object.
"""

from __future__ import annotations

import enum
import functools
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core._idcache import SERIALS, IdentityCache
from .._core._text import REPR_LIMIT, safe_repr, type_name
from .._core._vocab import CauseKind
from . import _jax_read, _wrappers
from ._leaves import Leaves
from ._reprs import (
    DETAIL_LIMIT,
    MAX_FIELDS,
    PLAIN_TYPES,
    bound_text,
    bound_values,
    identity_fields,
    one_line_repr,
    static_fields,
    static_text,
)
from ._reprs import STATIC_REPRS as STATIC_REPRS  # the one cache of static reprs

if TYPE_CHECKING:
    from ._jax_hooks import Miss

_MAX_CACHED_STRINGS = 8192
TRANSFORMED = "transformed (grad/jvp/vmap outside jit)"


class Placement(NamedTuple):
    """Where an argument lives, as far as it affects compilation (a tuple: compared at C speed)."""

    text: str  # "uncommitted", "committed cpu:0", "sharded P('data') over mesh(data=8)"
    sharded: bool = False
    # sharded over a named mesh only: the spec's entries and the mesh's axes, which
    # tell how far apart two shardings are
    spec: tuple[str, ...] = ()
    mesh: str = ""

    def __str__(self) -> str:
        return self.text


UNCOMMITTED = Placement("uncommitted")


class StaticValue:
    """A static argument's value, held weakly: equal to another unless both values are
    still alive (JAX's cache keeps the values it keys by) and not ``==``.

    Hash and repr alone miss a value whose class hashes by type and prints no fields,
    or whose ``__eq__`` is never true; JAX's cache compares with ``==``, so does this.
    """

    __slots__ = ("ref",)

    def __init__(self, value: Any) -> None:
        self.ref = _value_ref(value)

    def get(self) -> Any | None:
        """The value, while something else (JAX's cache) keeps it alive."""
        return self.ref() if self.ref is not None else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StaticValue):
            return NotImplemented
        a, b = self.get(), other.get()
        if a is None or b is None or a is b:
            return True  # unknown, or the same object: hash and repr decide
        try:
            return bool(a == b)
        except Exception:  # an __eq__ that raises or returns an array: unknown
            return True

    def __hash__(self) -> int:
        return 0  # equal hashes for all: the dataclass's hash stays consistent with ==


def _value_ref(value: Any, depth: int = 0) -> Callable[[], Any] | None:
    """A way back to ``value`` that keeps nothing of the user's alive: a weak reference;
    built-in scalars as they are; a tuple (an optax ``GradientTransformation``), which
    cannot be weakly referenced, rebuilt from references to its items."""
    if type(value) in PLAIN_TYPES:
        return functools.partial(_same, value)
    try:
        return weakref.ref(value)
    except TypeError:
        pass
    if isinstance(value, tuple) and depth < 2 and len(value) <= 16:
        items = [item for v in value if (item := _value_ref(v, depth + 1)) is not None]
        if len(items) == len(value):
            return functools.partial(_rebuilt, type(value), items)
    return None


def _same(value: Any) -> Any:
    return value


def _rebuilt(kind: type, items: list[Callable[[], Any]]) -> Any | None:
    values = [item() for item in items]
    if any(v is None for v in values):
        return None  # an item is gone: the value is unknown
    make = getattr(kind, "_make", None)  # a NamedTuple
    try:
        return make(values) if make is not None else kind(values)
    except Exception:  # a tuple subclass built otherwise
        return None


#: The named config values of JAX's tracing cache key, as ``(name, value)`` pairs.
TraceContext = tuple[tuple[str, Any], ...]


class StaticKind(enum.Enum):
    """What an entry among a signature's statics stands for; the diff words each kind
    apart. The values are the texts a signature's fingerprint hashes: never renamed."""

    #: a static argument of the call (``static_argnums``/``static_argnames``, a wrapper
    #: library's static leaf), compared by hash and ``==``
    STATIC_ARGUMENT = CauseKind.STATIC_ARGUMENT.value
    #: not an argument but part of the arguments' structure: a treedef a wrapper passes
    #: as a static value, a static attribute of a library's graph node, a whole structure
    PYTREE_STRUCTURE = CauseKind.PYTREE_STRUCTURE.value
    #: a node of a library's argument graph (an nnx sub-module): its type and item count
    GRAPH_NODE = "graph_node"


@dataclass(frozen=True, slots=True)
class StaticArg:
    """A static argument as JAX's cache compares it: by hash and equality."""

    name: str
    type: str
    repr: str
    hash: int | None
    identity_hashed: bool
    obj_id: int = field(default=0, compare=False)  # identity-hashed only
    # pytree_structure: not an argument but the shape of the argument trees,
    # which a wrapper library passes as a static value.
    kind: StaticKind = StaticKind.STATIC_ARGUMENT
    # pytree_structure only: the treedef itself (no array in it), walked by the diff
    tree: Any = field(default=None, compare=False)
    # passed by keyword rather than positionally: JAX keys the two apart
    keyword: bool = False
    # a dataclass-like value (dataclass, flax.linen Module, NamedTuple, attrs
    # class): ``(field path, one-line bounded repr)`` of the fields its equality
    # compares, nested ones dotted, for a diff field by field
    fields: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # pytree_structure only: a library's whole structure, walked only when
    # nothing more precise differs
    fallback: bool = False
    # the text up to DETAIL_LIMIT when ``repr`` was cut: where two long texts part
    detail: str = field(default="", compare=False)
    # the value, held weakly: compared with == while both are alive (last, so that
    # cheaper fields decide first); for identity-hashed ones, which object it was
    value: StaticValue | None = None
    # a type JAX keeps one object per distinct value of (a Mesh): a new object is a
    # new value, not an identity-hashing accident
    interned: bool = field(default=False, compare=False)
    # ``(field path, object number, function site, type)`` of the fields of a
    # dataclass-like value that compare by identity (functions): equal texts, yet
    # another object
    field_ids: tuple[tuple[str, int, str, str], ...] = field(default=(), compare=False)

    def same_object_as(self, other: StaticArg) -> bool | None:
        """For identity-hashed statics: were both the same object? ``None`` if unknown.

        By their numbers, taken while each value was alive (``Serials``; the id for a value
        that cannot be weakly referenced), never by whether the values are alive now: a
        record made after its jit call may find both gone."""
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
    context: TraceContext
    treedef: Any
    avals: Sequence[Any]
    top_names: tuple[str, ...]  # names of the positional args in ``treedef``
    paths: Sequence[str]
    types: Sequence[str]
    placements: Sequence[Placement]
    statics: tuple[StaticArg, ...]
    captured: bool = True  # False: built without a miss (fallback)
    # "" for a call of the jitted function; TRANSFORMED for its computation
    # evaluated under grad/vmap/jvp outside jit (a different program).
    transform: str = ""
    program: str = ""  # transformed only: "2 inputs, 1 output"
    # What the function object carries besides its code: ``(name, text)`` of
    # functools.partial arguments and closure cells, bounded, arrays as types.
    bound: tuple[tuple[str, str], ...] = ()
    tree_hash: int | None = None  # the treedef's hash, taken once (see ``trees_equal``)
    # The function object's number (``Serials``), taken while it was alive: compared
    # when the record is made after the call, when both objects may be gone.
    function_serial: int = 0
    bound_method: bool = False  # the function is a bound method (``jax.jit(obj.method)``)
    # The ``**kwargs`` parameter's name and the parameters a keyword fills by name: a
    # keyword argument that ``**kwargs`` collects is named ``kwargs['k']``.
    var_keyword: str = ""
    keywords: frozenset[str] = frozenset()
    # transformed only: the transformations and their parameters, outermost first
    # (``grad(argnums=(0, 1))``); "" when not read
    transformation: str = ""
    # ``jax.clear_caches()`` calls seen before this compile (-1: not watched)
    cache_clears: int = -1
    # transformed only: the number (``Serials``) of the function the transformation was
    # applied to (``jax.grad(jitted)``'s ``jitted``): JAX traces it once per function
    # object and argument types; another one with all else equal is a new function
    program_serial: int = 0

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
                                 for s in self.statics if s.kind is StaticKind.STATIC_ARGUMENT},
            "pytree_structure": safe_repr(self.treedef, 400),
            "jit_options": {k: v for k, v in self.options if v not in ("()", "None", "False")},
        }


def _object_number(value: Any) -> int:
    """What tells identity-hashed values apart after the call: a serial, else the id."""
    return SERIALS.of(value) or id(value)


def _weak(obj: Any) -> Any:
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


# The text of each abstract value: JAX arrays keep theirs (``Array.aval``), so most
# lookups hit by identity, without hashing the value in Python; an equal value met
# as a new object is found by equality and remembered under its own identity.
_type_strings: dict[Any, str] = {}
_type_strings_by_id: IdentityCache[str] = IdentityCache(_MAX_CACHED_STRINGS)
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
    committed = _jax_read.is_committed(value)
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
    return _remember(_placements, key, result) if key is not None else result


def _placements_of(flat: Sequence[Any]) -> tuple[Placement, ...]:
    """The placement of every argument; per-leaf work only for committed arrays.

    Uncommitted arrays (the default device, where JAX may move them) are by far
    the most common leaves and all read the same: their flags are read at C
    speed, and committed arrays that share a sharding object are read once.
    """
    committed = _jax_read.committed_flags(flat)
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


def _static_arg(name: str, value: Any, kind: StaticKind = StaticKind.STATIC_ARGUMENT,
                keyword: bool = False) -> StaticArg:
    t = type(value)
    identity = getattr(t, "__hash__", None) is object.__hash__
    try:
        h: int | None = hash(value)
    except Exception:
        h = None
    long = static_text(name, value, h, identity, DETAIL_LIMIT)
    text = long if len(long) <= REPR_LIMIT else static_text(name, value, h, identity)
    return StaticArg(
        name=name, type=type_name(value), repr=text,
        detail=long if long != text else "",
        hash=h, identity_hashed=identity,
        obj_id=_object_number(value) if identity else 0,
        kind=kind,
        tree=value if kind is StaticKind.PYTREE_STRUCTURE else None,
        keyword=keyword,
        fields=_readable_fields(value, identity) if kind is StaticKind.STATIC_ARGUMENT else (),
        field_ids=identity_fields(value, SERIALS.of)
        if kind is StaticKind.STATIC_ARGUMENT and not identity else (),
        value=StaticValue(value) if identity or kind is StaticKind.STATIC_ARGUMENT else None,
        interned=identity and _jax_read.interned_by_jax(value),
    )


def _readable_fields(value: Any, identity: bool) -> tuple[tuple[str, str], ...]:
    """What can be compared of a static value without running its code: a dataclass-like
    value's fields, a Mesh's axes and devices, and for an object hashed by identity its
    instance attributes (plain values by repr, anything else by type)."""
    found = static_fields(value) or _jax_read.mesh_fields(value)
    if found or not identity:
        return found or ()
    try:
        state = object.__getattribute__(value, "__dict__")
    except Exception:  # slots, or no attributes: compared by identity alone
        return ()
    if type(state) is not dict:
        return ()
    return tuple((str(k), bound_text(v, str(k)))
                 for k, v in list(state.items())[:MAX_FIELDS] if isinstance(k, str))


#: The name of the program an ``exported.call`` runs, among that compile's statics.
EXPORTED_PROGRAM = "<exported program>"


def _node_arg(path: str, node_type: str, description: str) -> StaticArg:
    """A node of a library's argument graph (an nnx sub-module): its type, its item count."""
    return StaticArg(name=path, type=node_type, repr=description, hash=hash(description),
                     identity_hashed=False, kind=StaticKind.GRAPH_NODE)


def _attribute_arg(path: str, value: Any) -> StaticArg:
    """A static attribute of a library's graph node (``model.dropout.deterministic``)."""
    identity = getattr(type(value), "__hash__", None) is object.__hash__
    try:
        h: int | None = hash(value)
    except Exception:
        h = None
    return StaticArg(name=path, type=type_name(value),
                     repr=f"static {one_line_repr(value, name=path.rpartition('.')[2])}",
                     hash=h, identity_hashed=identity,
                     obj_id=_object_number(value) if identity else 0,
                     kind=StaticKind.PYTREE_STRUCTURE,
                     value=StaticValue(value))


_MAX_CACHED_GRAPHS = 256
# Graph read-backs are cached by the GraphDef they come from (``_wrappers``):
# the same Graph object again means the same nodes and attributes.
_graph_args_cache: IdentityCache[tuple[StaticArg, ...]] = IdentityCache(_MAX_CACHED_GRAPHS)


def _graph_args(graph: _wrappers.Graph) -> tuple[StaticArg, ...]:
    """The statics entries of one graph node argument: its nodes, then its attributes."""
    cached = _graph_args_cache.get(graph)
    if cached is None:
        cached = _graph_args_cache.put(graph, tuple(
            _node_arg(*node) for node in graph.nodes) + tuple(
            _attribute_arg(path, value) for path, value in graph.statics))
    return cached


def _fallback_arg(name: str, tree: Any) -> StaticArg:
    """A library's whole argument structure, compared (by ``==``, at diff time) only
    when nothing else differs: no hash or repr of a large structure per compile."""
    return StaticArg(name=name, type="structure", repr="", hash=None, identity_hashed=False,
                     kind=StaticKind.PYTREE_STRUCTURE, tree=tree, fallback=True)


def from_miss(miss: Miss, stands_for: Any | None = None,
              like: Signature | None = None, context: TraceContext | None = None,
              placements: Sequence[Placement] | None = None) -> Signature:
    """The signature of the compile that ``miss`` led to.

    ``stands_for``: the user's function that the jitted library function wraps
    (``jax.pmap``'s), whose identity is compared instead of the wrapper's.
    ``like``: the function's latest earlier signature; leaves whose abstract values
    it already described are not described again (a recompile of a large argument
    that changed one leaf reads one chunk of leaves, not all of them).
    ``context`` and ``placements``: the trace context (thread-local configuration) and
    the arguments' placements as they were at the compile; by default, read now.
    """
    parameters = _jax_read.call_parameters(miss.jit_info, len(miss.args))
    layout = _wrappers.layout_for(miss, parameters.positional)
    exported = _jax_read.exported_program(miss.fun) if miss.fun is not None else None
    read = _read(miss, stands_for, parameters, context, placements, exported,
                 detached=False)
    return _built(read, like, layout, exported)


def detach(miss: Miss, stands_for: Any | None = None) -> Detached | None:
    """What :func:`from_detached` needs of ``miss`` to make its signature later, read now
    into plain data and weak references: nothing of the call's or of JAX's (the jitted
    function, its jit options and parameters, a ``HashablePartial`` JAX jits per
    primitive) outlives the call through it. JAX's caches hold functions and their
    parameters weakly; one kept alive until the record is made would turn a later
    compile JAX would have made into a cache hit.

    The costly part (texts of abstract values, of static values that hold nothing but
    scalars) is left to :func:`from_detached`. ``None``: a call a wrapper library lays
    out or an exported program, read whole with :func:`from_miss` instead."""
    parameters = _jax_read.call_parameters(miss.jit_info, len(miss.args))
    if miss.fun is not None and _jax_read.exported_program(miss.fun) is not None:
        return None
    # A single primitive JAX applies (most eager ops) is no library's wrapper.
    if (_jax_read.primitive_params(miss.fun) is None
            and _wrappers.layout_for(miss, parameters.positional) is not None):
        return None
    return _read(miss, stands_for, parameters, None, None, None, detached=True)


def from_detached(detached: Detached, like: Signature | None = None) -> Signature:
    """The signature :func:`from_miss` would have read from the miss ``detached`` was
    read from (``like`` as there)."""
    return _built(detached, like)


class _Pending(NamedTuple):
    """A static value whose ``StaticArg`` is made when the signature is built."""

    name: str
    value: Any
    keyword: bool = False


@dataclass(frozen=True, slots=True)
class Detached:
    """What a signature is built from, read off a dispatch miss (see :func:`detach`).

    Read by :func:`detach`, it holds plain data and weak references only: abstract
    values and the argument tree (values, compared by value), texts, numbers, and
    static values that are scalars or tuples of them (``_inert``); every other static
    value is a ``StaticArg`` already."""

    avals: tuple[Any, ...]
    in_tree: Any
    arg_names: tuple[str, ...] | None  # JAX's leaf paths, when it kept them
    out_count: int
    op_count: int
    placements: tuple[Placement, ...]
    context: TraceContext
    top_names: tuple[str, ...]
    statics: tuple[StaticArg | _Pending, ...]  # the call's static arguments
    params: tuple[StaticArg | _Pending, ...]  # an eager primitive's parameters
    options: tuple[tuple[str, str], ...]
    function_ref: Any
    function_id: int
    function_serial: int
    bound_method: bool
    bound: tuple[tuple[str, str], ...]
    transformed: bool
    transformation: str  # the transformations the program was traced under, as text
    cache_clears: int  # ``jax.clear_caches()`` calls seen before the miss
    program_serial: int  # transformed only: the traced program's number
    var_keyword: str  # the ``**kwargs`` parameter's name, if any
    keywords: frozenset[str]  # parameters a keyword argument can fill by name


def _inert(value: Any, depth: int = 0) -> bool:
    """Whether holding ``value`` holds nothing else and its text cannot change: a
    built-in scalar, an enum member or a NumPy dtype (kept alive by their classes
    anyway), a tuple or frozenset of those."""
    kind = type(value)
    if kind in PLAIN_TYPES or isinstance(value, enum.Enum):
        return True
    numpy = sys.modules.get("numpy")  # not imported: no value is one of its types
    if numpy is not None and isinstance(value, (numpy.dtype, numpy.generic)):
        return True
    if isinstance(value, (tuple, frozenset)) and depth < 3 and len(value) <= 64:
        return all(_inert(v, depth + 1) for v in value)
    return False


def _static_entry(name: str, value: Any, keyword: bool, detached: bool,
                  ) -> StaticArg | _Pending:
    if detached and not _inert(value):
        return _static_arg(name, value, keyword=keyword)
    return _Pending(name, value, keyword)


def _static(entry: StaticArg | _Pending) -> StaticArg:
    if isinstance(entry, StaticArg):
        return entry
    return _static_arg(entry.name, entry.value, keyword=entry.keyword)


def _read(miss: Miss, stands_for: Any | None, parameters: _jax_read.CallParameters,
          context: TraceContext | None, placements: Sequence[Placement] | None,
          exported: Any | None, detached: bool) -> Detached:
    """What the signature of ``miss`` is built from (``detached``: holding nothing of the
    call's or JAX's, see :func:`detach`)."""
    names = parameters.positional
    inputs = _jax_read.miss_inputs(miss)
    flat, n = inputs.flat, len(inputs.avals)
    if placements is None or len(placements) != n:
        placements = _placements_of(flat) if len(flat) == n else (UNCOMMITTED,) * n
    statics = tuple(_static_entry(name, v, name in miss.kwargs, detached)
                    for name, v in _jax_read.static_arguments(miss, names))
    primitive = _jax_read.primitive_params(miss.fun)
    params = () if primitive is None else tuple(
        _static_entry(EXPORTED_PROGRAM if v is exported else f"params.{k}", v, False, detached)
        for k, v in sorted(primitive.items()))
    # One function object per primitive parameters, and one jaxpr per argument
    # types under a transformation: neither identity says anything more.
    by_identity = primitive is None and not miss.transformed
    identity = miss.fun if stands_for is None else stands_for
    return Detached(
        avals=inputs.avals, in_tree=inputs.in_tree, arg_names=inputs.arg_names,
        out_count=inputs.out_count, op_count=inputs.op_count,
        placements=tuple(placements),
        context=_jax_read.trace_context_items() if context is None else context,
        top_names=tuple(names[i] for i in _jax_read.dynamic_positions(miss)),
        statics=statics, params=params,
        # A library's internal jit wrapper derives its options (pmap's
        # in_shardings) from the call: they are not the user's to change.
        options=_options(miss.jit_info) if stands_for is None else (),
        function_ref=_weak(identity) if by_identity else None,
        function_id=id(identity) if by_identity else 0,
        function_serial=SERIALS.of(identity) if by_identity else 0,
        bound_method=by_identity and getattr(identity, "__self__", None) is not None
        and hasattr(identity, "__func__"),
        bound=bound_values(identity) if by_identity else (),
        transformed=miss.transformed,
        transformation=miss.transformation,
        cache_clears=miss.cache_clears,
        program_serial=int(getattr(miss.fun, "program", 0) or 0) if miss.transformed else 0,
        # A library's own jit wrapper (pmap's) takes **kwargs for the user's parameters.
        var_keyword=parameters.var_keyword if stands_for is None else "",
        keywords=parameters.keywords,
    )


def _built(read: Detached, like: Signature | None, layout: _wrappers.Layout | None = None,
           exported: Any | None = None) -> Signature:
    """The signature ``read`` describes; ``layout``, ``exported``: see :func:`from_miss`."""
    earlier = like if like is not None and like.captured else None
    leaf_avals = Leaves.of(read.avals, like=_leaves(earlier, "avals"))
    avals: Sequence[Any] = leaf_avals
    types: Sequence[str] = leaf_avals.mapped(
        aval_text, _leaves(earlier, "avals"), _leaves(earlier, "types"))
    placements: Sequence[Placement] = read.placements
    top_names = read.top_names
    statics = [_static(s) for s in read.statics]
    treedef, tree_hash = _reuse_tree(read.in_tree, earlier)
    # Read as JAX gave them, never inferred from an equal tree: trees compare dict
    # keys with == ({1: x} and {1.0: x} are equal), and a transformed program's
    # tree and names are stand-ins for the leaves its jaxpr names.
    paths: Sequence[str] = read.arg_names or tuple(f"leaf[{i}]" for i in range(len(types)))
    if exported is not None and layout is None:
        # ``exported.call(...)`` binds the flat leaves: named by the tree it was exported with
        paths = _jax_read.exported_leaf_paths(exported, len(types)) or paths
    if layout is not None:
        treedef, top_names, paths, avals, types, placements = _as_user_paths(
            layout, treedef, top_names, tuple(paths), tuple(avals), tuple(types),
            tuple(placements))
        treedef, tree_hash = _reuse_tree(treedef, earlier)
        own = [_static_arg(n, v) for n, v in layout.statics]
        statics = statics + own if layout.keeps_statics else own
        statics.extend(_static_arg(name, tree, kind=StaticKind.PYTREE_STRUCTURE)
                       for name, tree in layout.structure)
        for graph in layout.graphs:
            statics.extend(_graph_args(graph))
        statics.extend(_fallback_arg(name, tree) for name, tree in layout.fallback)
    statics.extend(_static(s) for s in read.params)
    # Every part equal to the earlier signature's is that part itself: kept
    # signatures of one function cost only what changed, and the diff skips
    # shared parts by identity.
    return Signature(
        function_ref=read.function_ref,
        function_id=read.function_id,
        function_serial=read.function_serial,
        bound_method=read.bound_method,
        options=_reuse(read.options, earlier, "options"),
        context=_reuse(read.context, earlier, "context"),
        treedef=treedef,
        tree_hash=tree_hash,
        avals=_as_leaves(avals, earlier, "avals"),
        top_names=_reuse(top_names, earlier, "top_names"),
        paths=_as_leaves(paths, earlier, "paths"),
        types=_as_leaves(types, earlier, "types"),
        placements=_as_leaves(placements, earlier, "placements"),
        statics=_reuse_statics(tuple(statics), earlier),
        transform=TRANSFORMED if read.transformed else "",
        program=_program(len(avals), read.out_count, read.op_count)
        if read.transformed else "",
        transformation=read.transformation,
        cache_clears=read.cache_clears,
        program_serial=read.program_serial,
        bound=read.bound,
        var_keyword=read.var_keyword,
        keywords=_reuse(read.keywords, earlier, "keywords"),
    )


def _leaves(signature: Signature | None, part: str) -> Leaves[Any] | None:
    value = getattr(signature, part, None)
    return value if isinstance(value, Leaves) else None


def _as_leaves(items: Sequence[Any], earlier: Signature | None, part: str) -> Leaves[Any]:
    """``items`` as chunked leaves, sharing every chunk equal to ``earlier``'s."""
    if isinstance(items, Leaves):
        return items
    return Leaves.of(items, like=_leaves(earlier, part))


def _reuse(value: Any, earlier: Signature | None, part: str) -> Any:
    """``earlier``'s ``part`` when it equals ``value``, else ``value``."""
    if earlier is None:
        return value
    theirs = getattr(earlier, part)
    return theirs if value is theirs or _equal(value, theirs) else value


def _reuse_tree(treedef: Any, earlier: Signature | None) -> tuple[Any, int | None]:
    """``earlier``'s treedef and hash when it is the same structure (``trees_equal``),
    else ``treedef`` and its hash."""
    if earlier is not None and treedef is earlier.treedef:
        return treedef, earlier.tree_hash
    tree_hash = _jax_read.tree_hash(treedef)
    if earlier is not None:
        try:
            same = _jax_read.trees_equal(treedef, earlier.treedef, tree_hash,
                                         earlier.tree_hash)
        except Exception:  # a node JAX cannot compare: keep both
            same = False
        if same:
            return earlier.treedef, earlier.tree_hash
    return treedef, tree_hash


def _reuse_statics(statics: tuple[StaticArg, ...], earlier: Signature | None,
                   ) -> tuple[StaticArg, ...]:
    """``earlier``'s statics when they are the same in every respect the diff reads.

    ``StaticArg`` equality leaves out the structures a wrapper passes (``tree``) and
    the fields of dataclass-likes: two entries equal by it may still tell two
    compiles apart. Structures are compared by identity only (a library's
    structure can be large; comparing it on every compile is the diff's job).
    """
    theirs = earlier.statics if earlier is not None else None
    if theirs is None or theirs is statics or len(theirs) != len(statics):
        return statics
    for mine, old in zip(statics, theirs):
        if (mine.tree is not old.tree or mine.fields != old.fields
                or mine.field_ids != old.field_ids or not _equal(mine, old)):
            return statics
    return theirs


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
    keyed: dict[str, Any] = {renamed[i]: 0 for i in order}
    for name, value in layout.empty:  # no leaves, so no order to keep
        keyed.setdefault(name, value)
    user_tree = tree_util.tree_structure(((), keyed))
    return (user_tree, (), tuple(renamed[i] for i in order), tuple(avals[i] for i in order),
            tuple(types[i] for i in order), tuple(placements[i] for i in order))


def _program(inputs: int, outputs: int, operations: int) -> str:
    return (f"{inputs} input{'s' * (inputs != 1)}, "
            f"{outputs} output{'s' * (outputs != 1)}, "
            f"{operations} operation{'s' * (operations != 1)}")


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a config value with a broken __eq__: keep both
        return False


def uncaptured() -> Signature:
    """Stand-in when JAX gave us no miss to read (moved internals)."""
    return Signature(None, 0, (), _jax_read.trace_context_items(), None, (), (), (), (), (),
                     (), captured=False)
