"""The signature a compile saw: everything that is part of JAX's cache key, as plain data.

A signature is built only when a backend compile really happens, from the
references the dispatch-cache miss left (see ``_miss.Miss``). It keeps no
array and no argument value: abstract types, placements, static-argument
reprs and hashes, and a weak reference to the function object.

This module holds the data model only (what the diff, the fingerprint and the
history read); reading a miss is ``_detached``'s, building a signature ``_build``'s.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._core._text import clean_text, safe_repr
from .._core._vocab import CauseKind
from ._jax import _config
from ._static_value import StaticValue

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
    # the transformations and their parameters, outermost first (``grad(argnums=(0, 1))``):
    # a transformed program's, read off the stack, or those a jitted callable is made of
    # (``jax.jit(jax.vmap(f, out_axes=1))``), read from its closures; "" when none or not read
    transformation: str = ""
    # ``jax.clear_caches()`` calls seen before this compile (-1: not watched)
    cache_clears: int = -1
    # transformed only: the number (``Serials``) of the function the transformation was
    # applied to (``jax.grad(jitted)``'s ``jitted``): JAX traces it once per function
    # object and argument types; another one with all else equal is a new function
    program_serial: int = 0
    # transformed only: which of the programs JAX derives from one trace this is
    # ("forward", "backward" of grad; "tangent" of linearize), "" when not known: a program
    # is compared only with earlier programs of its own pass
    program_pass: str = ""
    # The XLA compiler options the backend compile was asked for, ``(name, text)`` sorted:
    # the jit wrapper's and those given to ``Lowered.compile(compiler_options=...)``
    compiler_options: tuple[tuple[str, str], ...] = ()

    @property
    def num_leaves(self) -> int:
        return len(self.types)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``compile_history``: what a person reads."""
        # Paths and names as they may leave the process (a token used as a dict key
        # replaced); the signature keeps them as they are, for later diffs.
        return {
            "arguments": {clean_text(p): {"type": t, "placement": pl.text}
                          for p, t, pl in zip(self.paths, self.types, self.placements)},
            "static_arguments": {clean_text(s.name): s.repr + (" (hashed by identity)"
                                                               if s.identity_hashed else "")
                                 for s in self.statics if s.kind is StaticKind.STATIC_ARGUMENT},
            "pytree_structure": safe_repr(self.treedef, 400),
            "jit_options": {k: v for k, v in self.options if v not in ("()", "None", "False")},
        }


def uncaptured() -> Signature:
    """Stand-in when JAX gave us no miss to read (moved internals)."""
    return Signature(None, 0, (), _config.trace_context_items(), None, (), (), (), (), (),
                     (), captured=False)
