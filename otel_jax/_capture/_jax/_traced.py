"""A miss's traced inputs, read off JAX's ``PjitParams`` (abstract values, leaves, JAX's leaf
names, the argument tree), and how JAX's argument trees compare.

Its own module: ``PjitParams`` fields, the pytree registry's dataclass fields and treedef
equality are JAX's private behaviour. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the
oldest, default and newest test venvs); jaxlib 0.10 compares dataclass nodes without their
type, so ``trees_equal`` also compares the hashes. Fallback: leaf names JAX did not keep
are ``None`` (otel_jax names leaves itself); a dataclass's static fields not found are
read by position; a tree without a hash has ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ._miss import Miss


class MissInputs(NamedTuple):
    """The traced inputs of a miss, read off JAX's ``PjitParams`` (or a transformed call's)."""

    avals: tuple[Any, ...]  # abstract values, one per array leaf
    flat: Sequence[Any]  # the leaves JAX will pass (constants left out)
    arg_names: tuple[str, ...] | None  # JAX's leaf paths, when it kept them
    in_tree: Any  # the ``(args, kwargs)`` treedef of the traced leaves
    out_count: int  # outputs of a transformed program (0 for a plain call)
    op_count: int  # operations of a transformed program (0 for a plain call)


def dataclass_meta_fields(node_type: Any) -> tuple[str, ...] | None:
    """The static field names ``jax.tree_util.register_dataclass`` was given for
    ``node_type`` (``meta_fields=[...]``), or ``None``.

    JAX keeps them only in the closure of the flatten function it registers
    (``jax._src.tree_util._registry``); when that moves, fields read by position.
    """
    try:
        from jax._src import tree_util

        flatten = tree_util._registry[node_type].to_iter
        cells = dict(zip(flatten.__code__.co_freevars, flatten.__closure__ or ()))
        names = cells["meta_fields"].cell_contents
    except Exception:
        return None
    if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
        return names
    return None


def tree_hash(tree: Any) -> int | None:
    """A treedef's hash (a walk of the whole tree), or ``None`` when a node has none."""
    try:
        return hash(tree)
    except Exception:
        return None


def trees_equal(a: Any, b: Any, hash_a: int | None, hash_b: int | None) -> bool:
    """Whether two treedefs are one argument structure, as JAX's cache tells them apart.

    jaxlib 0.10's ``PyTreeDef.__eq__`` leaves out the type of a dataclass node
    (``register_dataclass``, ``flax.struct``): two classes with the same fields compare
    equal, while their hashes, which JAX's cache also compares, differ (jaxlib 0.8
    compared the types). Equal trees always hash alike, so comparing the hashes
    (``tree_hash``, kept with each signature) too never tells two equal trees apart.
    May raise (a node JAX cannot compare); callers guard.
    """
    return a is b or (bool(a == b) and hash_a == hash_b)


def miss_inputs(miss: Miss) -> MissInputs:
    params = miss.params
    avals = tuple(params.in_avals)
    n_consts = len(params.consts)
    names = params.arg_names
    flat = miss.args_flat
    if not isinstance(flat, (list, tuple)):
        flat = list(flat)
    return MissInputs(
        avals=avals,
        flat=flat[n_consts:] if n_consts else flat,
        arg_names=tuple(names) if names and len(names) == len(avals) else None,
        in_tree=params.in_tree,
        out_count=int(getattr(params, "out_count", 0)),
        op_count=int(getattr(params, "op_count", 0)),
    )
