"""Building a signature: from a dispatch-cache miss at once, or from its detached read.

Its own module: where a wrapper library's layout, an exported program and the
function's earlier signature shape the result, and where every part equal to the
earlier signature's is shared with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core._text import safe_repr
from . import _wrappers
from ._arg_texts import aval_text
from ._detached import Detached, read_miss, resolved
from ._jax import _compile_entry, _eager, _jit_info, _traced
from ._leaves import Leaves
from ._signature import (
    TRANSFORMED,
    Placement,
    Signature,
    StaticArg,
    StaticKind,
    TraceContext,
)
from ._statics import fallback_arg, graph_args, static_arg

if TYPE_CHECKING:
    from ._jax._compile_entry import CompileInputs
    from ._jax._miss import Miss


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
    parameters = _jit_info.call_parameters(miss.jit_info, len(miss.args))
    layout = _wrappers.layout_for(miss, parameters.positional)
    exported = _eager.exported_program(miss.fun) if miss.fun is not None else None
    read = read_miss(miss, stands_for, parameters, context, placements, exported,
                     detached=False)
    return _built(read, like, layout, exported)


def from_detached(detached: Detached, like: Signature | None = None) -> Signature:
    """The signature :func:`from_miss` would have read from the miss ``detached`` was
    read from (``like`` as there)."""
    return _built(detached, like)


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
    statics = [resolved(s) for s in read.statics]
    treedef, tree_hash = _reuse_tree(read.in_tree, earlier)
    # Read as JAX gave them, never inferred from an equal tree: trees compare dict
    # keys with == ({1: x} and {1.0: x} are equal), and a transformed program's
    # tree and names are stand-ins for the leaves its jaxpr names.
    paths: Sequence[str] = read.arg_names or tuple(f"leaf[{i}]" for i in range(len(types)))
    if exported is not None and layout is None:
        # ``exported.call(...)`` binds the flat leaves: named by the tree it was exported with
        paths = _eager.exported_leaf_paths(exported, len(types)) or paths
    if layout is not None:
        treedef, top_names, paths, avals, types, placements = _as_user_paths(
            layout, treedef, top_names, tuple(paths), tuple(avals), tuple(types),
            tuple(placements))
        treedef, tree_hash = _reuse_tree(treedef, earlier)
        own = [static_arg(n, v) for n, v in layout.statics]
        statics = statics + own if layout.keeps_statics else own
        statics.extend(static_arg(name, tree, kind=StaticKind.PYTREE_STRUCTURE)
                       for name, tree in layout.structure)
        for graph in layout.graphs:
            statics.extend(graph_args(graph))
        statics.extend(fallback_arg(name, tree) for name, tree in layout.fallback)
    statics.extend(resolved(s) for s in read.params)
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
        program_pass=read.program_pass,
        bound=read.bound,
        var_keyword=read.var_keyword,
        keywords=_reuse(read.keywords, earlier, "keywords"),
    )


def with_compiler_options(signature: Signature, inputs: CompileInputs) -> Signature:
    """``signature`` with the compiler options its backend compile was asked for (those
    given to ``Lowered.compile`` reach the compile only, not the trace it compiles)."""
    options = _compile_entry.compiler_options(inputs)
    if not options:
        return signature
    texts = tuple((k, safe_repr(v, _OPTION_REPR)) for k, v in options)
    return dataclasses.replace(signature, compiler_options=texts)


_OPTION_REPR = 200  # characters of one compiler option's value


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
    tree_hash = _traced.tree_hash(treedef)
    if earlier is not None:
        try:
            same = _traced.trees_equal(treedef, earlier.treedef, tree_hash,
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
