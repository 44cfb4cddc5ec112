"""The fixed-point rule: what a call returns, fed back into its own next call, must come
back typed as it went in.

A jitted function's next call compiles again when an argument it is given differs, in
its abstract type, from the one this compile saw. Where the calling code feeds an output
back into an input of the same function, that output's abstract type, known from this
compile (the program's output variables and tree), *is* the next call's input type. So
every feedback edge (an output path, the input path it becomes) is compared, leaf by leaf
and node by node, at the first compile:

- *pytree structure*: a dict key gained or lost, a list of another length, ``None``
  filled in, another container type (a NamedTuple returned as a tuple);
- *dtype*: bfloat16 parameters updated with a float32 value and not cast back;
- *shape*: a sequence grown by concatenation;
- *weak type*: a Python scalar (weakly typed) that comes back an array (strongly typed);
- *sharding*, where both are known (an input committed with a ``NamedSharding``; the
  output's placement as the compiled program reports it): parameters placed
  ``P(None, 'model')`` that come back replicated (``out_shardings``, a
  ``with_sharding_constraint``, XLA's propagation). JAX's own equivalence decides
  (``P('data')`` and ``P('data', None)`` are one placement).

The edges are read off the user's source, never the stack: the calling line's own
targets (``state = step(state)``; ``params, loss, lr = step(params, batch, lr)``; an
attribute or item stored back, ``self.ema = update(self.ema, ...)``), and a later line of
the loop that takes a part out of the result (``out = step(...)``, then ``lr =
out["lr"]``: :func:`._hazard_flow.routes`). Under a wrapper library's jit (``nnx.jit``,
``eqx.filter_jit``), whose traced tree is laid out by the wrapper, only weak types (and a
Python scalar held static coming back an array) are compared.

The next compile's cause is the most significant kind among what differs (docs/causes.md:
structure before dtype before shape before weak type before sharding), so the hazards said
are those of that kind: each names its path, both types and the fix that fits. A warning
where a loop runs the call again with what came back; a note where nothing seen does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._capture._arg_texts import aval_text, sharding_of
from .._capture._jax._out_shardings import Memo, compare, device_ids, output_shardings
from .._capture._jax._outputs import Outputs, aval_facts
from .._capture._signature import Placement, Signature, StaticArg, StaticKind
from .._capture._source import FunctionInfo
from .._core._text import safe_repr, truncate
from .._core._vocab import DIFFERENCE_KINDS, CauseKind
from . import _hazard_flow
from . import _hazard_parts as _parts
from . import _hazard_source as _src
from ._hazard_parts import Hazard

#: Structure differences found per edge (the walk stops there): a hazard names the first.
_MAX_DIFFERENCES = 16
#: Nodes walked per edge at most: a large state is walked only until this many.
_MAX_NODES = 4096
_KEYS_SHOWN = 4


@dataclass(frozen=True, slots=True)
class Edge:
    """An output the calling code feeds back into an input of the same function."""

    name: str  # the parameter it is fed back to
    in_tree: Any  # the input's tree (in the signature's) and its first leaf's index
    in_first: int
    out_tree: Any  # the output's part and its first leaf's index among the outputs
    out_first: int
    where: str  # which output: "the result", "output [1]", "['lr'] of the result"
    how: str  # how it reaches the next call: "which the calling line assigns back to lr"
    looped: bool  # a loop runs the call again with it: a warning; else a note


@dataclass(frozen=True, slots=True)
class Difference:
    """One thing the next call sees otherwise than this compile did."""

    kind: CauseKind
    path: str  # the input path, as the next compile's diff names it
    before: str  # what goes in (a type, or a structure in words)
    after: str  # what comes back
    hint: str  # the fix that fits
    # weak_type only: whether the input was the weak one (the wording and fix follow)
    weak_in: bool = False
    in_type: str = ""


# --- the edges ---------------------------------------------------------------------------

def _is_tuple(tree: Any) -> bool:
    """Whether ``tree`` is a plain tuple or list at its top (not a NamedTuple: a state)."""
    from jax import tree_util

    # Unflattened with stand-ins: the tree JAX made for the outputs may not compare equal
    # to one built here from its children, though it is the same structure.
    rebuilt = tree_util.tree_unflatten(tree, [None] * tree.num_leaves)
    return type(rebuilt) in (tuple, list)


def _by_expression(names: Sequence[str], fed: _src.Feedback) -> dict[str, str]:
    """The call's argument texts -> the parameters they fill."""
    out: dict[str, str] = {}
    for name, text in (*zip(names, fed.args), *fed.keywords):
        if text is not None:
            out.setdefault(text, name)
    return out


def _line_edges(signature: Signature, outputs: Outputs, fed: _src.Feedback,
                inputs: dict[str, tuple[Any, int]], by_expression: dict[str, str],
                again: Callable[[str], bool]) -> list[Edge]:
    """The calling line's own targets that are arguments it passed."""
    pairs: list[tuple[str, Any, int, str, str]] = []  # (parameter, tree, first, where, text)
    if fed.whole is not None:
        if fed.whole in by_expression:
            pairs.append((by_expression[fed.whole], outputs.tree, 0, "the result",
                          fed.whole))
    elif fed.targets:
        children = _parts.tree_children(outputs.tree)
        if len(fed.targets) == len(children) and _is_tuple(outputs.tree):
            offset = 0
            for i, (target, sub) in enumerate(zip(fed.targets, children)):
                if target is not None and target in by_expression:
                    pairs.append((by_expression[target], sub, offset, f"output [{i}]",
                                  target))
                offset += sub.num_leaves
    edges: list[Edge] = []
    for name, tree, first, where, text in pairs:
        given = inputs.get(name)
        if given is None:
            continue
        edges.append(Edge(name, given[0], given[1], tree, first, where,
                          f"which the calling line assigns back to {name}", again(text)))
    return edges


def _route_edges(outputs: Outputs, callsite: str | None, inputs: dict[str, tuple[Any, int]],
                 by_expression: dict[str, str]) -> list[Edge]:
    """A later line of the loop that takes a part out of the result and gives it back."""
    edges: list[Edge] = []
    for route in _hazard_flow.routes(callsite):
        name = by_expression.get(route.argument)
        given = inputs.get(name) if name is not None else None
        try:
            part = _hazard_flow.part(outputs, route.access) if given is not None else None
        except Exception:  # a tree that does not tell its nodes: this route says nothing
            part = None
        if given is None or part is None or name is None:
            continue
        out_tree, leaves = part
        edges.append(Edge(name, given[0], given[1], out_tree, leaves[0] if leaves else 0,
                          _hazard_flow.accessed(route.access),
                          f"which the loop gives back to {name} (line {route.line}: "
                          f"{route.source})", True))
    return edges


# --- what differs ------------------------------------------------------------------------

_is_leaf = _parts.is_leaf


def _node_words(tree: Any, node: tuple[Any, Any] | None) -> str:
    """A node in a few words: ``None``, ``a list of 3``, ``a State``, ``a dict``."""
    if _is_leaf(tree):
        return "an array"
    if node is None:
        return "a leaf"
    node_type = node[0]
    if node_type is type(None):
        return "None"
    if node_type in (list, tuple):
        return f"a {node_type.__name__} of {len(_parts.tree_children(tree))}"
    return f"a {getattr(node_type, '__name__', safe_repr(node_type, 40))}"


def _keys(keys: Sequence[Any]) -> str:
    shown = ", ".join(repr(k) for k in list(keys)[:_KEYS_SHOWN])
    return shown + (f" and {len(keys) - _KEYS_SHOWN} more" if len(keys) > _KEYS_SHOWN else "")


def _structure(a: Any, b: Any, path: str, found: list[Difference], budget: list[int],
               out_at: int = -1, out_avals: Sequence[Any] = ()) -> None:
    """Walk the input's tree ``a`` and the output's ``b`` together; say where they part."""
    if len(found) >= _MAX_DIFFERENCES or budget[0] <= 0:
        return
    budget[0] -= 1
    leaf_a, leaf_b = _is_leaf(a), _is_leaf(b)
    if leaf_a and leaf_b:
        return
    na = None if leaf_a else a.node_data()
    nb = None if leaf_b else b.node_data()
    ca = [] if leaf_a else _parts.tree_children(a)
    cb = [] if leaf_b else _parts.tree_children(b)
    if na is not None and nb is not None and na[0] is dict and nb[0] is dict \
            and na[1] is not None and nb[1] is not None and list(na[1]) != list(nb[1]):
        keys_a, keys_b = list(na[1]), list(nb[1])
        gained = [k for k in keys_b if k not in keys_a]
        lost = [k for k in keys_a if k not in keys_b]
        if gained:
            found.append(Difference(
                CauseKind.PYTREE_STRUCTURE, f"{path}[{gained[0]!r}]",
                f"a dict without {_keys(gained)}",
                f"with {_keys(gained)} ({'key' if len(gained) == 1 else 'keys'} gained)",
                f"put {_keys(gained)} in {path or 'it'} from the first call (started at "
                "its zero value: jnp.zeros(shape, dtype)), so that what goes in and what "
                "comes back have one structure"))
        if lost:
            found.append(Difference(
                CauseKind.PYTREE_STRUCTURE, f"{path}[{lost[0]!r}]",
                f"a dict with {_keys(lost)}",
                f"without {_keys(lost)} ({'key' if len(lost) == 1 else 'keys'} lost)",
                f"return every key {path or 'it'} came with ({_keys(lost)} too), so that "
                "what goes in and what comes back have one structure"))
        by_key = dict(zip(keys_b, zip(cb, _offsets(cb, out_at))))
        for key, child in zip(keys_a, ca):
            if key in by_key:
                _structure(child, by_key[key][0], f"{path}[{key!r}]", found, budget,
                           by_key[key][1], out_avals)
        return
    if leaf_a != leaf_b or na is None or nb is None or na[0] is not nb[0] \
            or len(ca) != len(cb) or (na[0] not in (list, tuple) and not _same_data(na, nb)):
        before, after = _node_words(a, na), _node_words(b, nb)
        if leaf_b and 0 <= out_at < len(out_avals):
            after = aval_text(out_avals[out_at])  # the array's own type
        if before == after:  # the same type and size: its static data differs
            before, after = (f"{before} with {safe_repr(na[1] if na else None, 60)}",
                             f"{after} with {safe_repr(nb[1] if nb else None, 60)}")
        if before == "None":
            hint = (f"start {path or 'it'} as an array of its final shape and dtype "
                    "(jnp.zeros(shape, dtype)), not None, so that what goes in and what "
                    "comes back have one structure")
        elif na is not None and nb is not None and na[0] is nb[0] and na[0] in (list, tuple):
            hint = (f"keep {path or 'it'} one length: an array of the final size written "
                    "at a position (x.at[i].set(...)), or padded to a few lengths")
        else:
            hint = (f"return {path or 'it'} as the same container it came in, so that what "
                    "goes in and what comes back have one structure")
        found.append(Difference(CauseKind.PYTREE_STRUCTURE, path, before, after, hint))
        return
    for name, x, y, at in zip(_parts.child_paths(path, na, len(ca)), ca, cb,
                              _offsets(cb, out_at)):
        _structure(x, y, name, found, budget, at, out_avals)


def _offsets(children: Sequence[Any], first: int) -> list[int]:
    """Each child's first leaf's index, from the node's (``-1``: not followed)."""
    out: list[int] = []
    for child in children:
        out.append(first)
        first = first + child.num_leaves if first >= 0 else -1
    return out


def _same_data(na: tuple[Any, Any], nb: tuple[Any, Any]) -> bool:
    try:
        return bool(na[1] == nb[1])
    except Exception:  # static data that does not compare: take it as differing
        return False


class _Placed:
    """Where the program places its outputs, read off its executable once, at the first
    feedback leaf whose input is committed and sharded (none: never read)."""

    def __init__(self, outputs: Outputs) -> None:
        self._outputs = outputs
        self._read = False
        self._shardings: Sequence[Any] | None = None
        self._devices: list[tuple[int, int]] | None = None
        self._memo: Memo = {}

    def difference(self, placement: Placement, path: str, j: int, ndim: int,
                   ) -> Difference | None:
        """A sharding the output ``j`` comes back with that JAX's cache tells apart from
        the input's ``placement``; ``None`` where they are alike or either is unknown."""
        # known only for a committed, sharded placement (``_arg_texts.placement``)
        in_sharding = sharding_of(placement)
        if in_sharding is None:
            return None
        if not self._read:
            self._read = True
            executable = self._outputs.executable
            if executable is not None:
                self._shardings = output_shardings(executable, len(self._outputs.variables))
                self._devices = device_ids(executable) if self._shardings else None
        if self._shardings is None or j >= len(self._shardings):
            return None
        compared = compare(in_sharding, self._shardings[j], ndim, self._devices, self._memo)
        if compared is None or compared[0]:
            return None
        after = (f"sharded {compared[1]} over mesh({placement.mesh})" if placement.mesh
                 else f"sharded {compared[1]}")
        spec = ("P(" + ", ".join(e if e == "None" or e.startswith("(") else repr(e)
                                 for e in placement.spec) + ")") if placement.spec else "spec"
        return Difference(
            CauseKind.SHARDING, path, placement.text, after,
            f"place it as it came in: out_shardings= the input's sharding on jax.jit "
            f"(NamedSharding(mesh, {spec})), or jax.lax.with_sharding_constraint of the "
            "output to it before returning it")


def _leaves(edge: Edge, signature: Signature, outputs: Outputs,
            placed: _Placed | None = None) -> list[Difference]:
    """Leaf by leaf, for an output shaped as the input: dtype, shape, weak type, and
    (typed alike) sharding, where both are known."""
    found: list[Difference] = []
    out_avals = outputs.avals
    placements = signature.placements
    for k in range(edge.in_tree.num_leaves):
        i, j = edge.in_first + k, edge.out_first + k
        if i >= len(signature.avals) or j >= len(out_avals):
            break
        before, after = aval_facts(signature.avals[i]), aval_facts(out_avals[j])
        if before is None or after is None:
            continue
        if before == after:
            if placed is not None and i < len(placements):
                moved = placed.difference(placements[i], signature.paths[i], j,
                                          len(before[0]))
                if moved is not None:
                    found.append(moved)
            continue
        path = signature.paths[i]
        in_type, out_type = signature.types[i], aval_text(out_avals[j])
        if before[1] != after[1]:
            found.append(Difference(
                CauseKind.DTYPE, path, in_type, out_type,
                f"cast it back to what went in before returning it (new.astype({before[1]})"
                ", or x.astype(p.dtype) in a tree map over the parameters)", in_type=in_type))
        elif before[0] != after[0]:
            found.append(Difference(
                CauseKind.SHAPE, path, in_type, out_type,
                "return it at the shape it came in: an array of the final size written at "
                "a position (x.at[i].set(...)), or padded to a few lengths", in_type=in_type))
        else:
            found.append(Difference(
                CauseKind.WEAK_TYPE, path, in_type, out_type,
                "pass it as an array from the first call (jnp.asarray(x, dtype)), so that "
                "what goes in and what comes back are typed alike" if before[2] else
                "keep it an array the function returns as it came (no Python scalar in "
                "its place)", weak_in=before[2], in_type=in_type))
    return found


def differences(edge: Edge, signature: Signature, outputs: Outputs,
                placed: _Placed | None = None) -> list[Difference]:
    """What the next call, given the edge's output, sees otherwise than this compile."""
    if edge.in_tree == edge.out_tree or (_is_leaf(edge.in_tree) and _is_leaf(edge.out_tree)):
        return _leaves(edge, signature, outputs, placed)
    found: list[Difference] = []
    _structure(edge.in_tree, edge.out_tree, edge.name, found, [_MAX_NODES], edge.out_first,
               outputs.avals)
    return found


def _said(edge: Edge, first: Difference, more: int) -> Hazard:
    then = ("the next call compiles again" if edge.looped
            else "a call given it back compiles again")
    others = f" (and {more} more of {edge.name})" if more else ""
    if first.kind is CauseKind.WEAK_TYPE:
        text = (f"{first.path} goes in {_parts.weakness(first.weak_in, first.in_type)} and "
                f"comes back {_parts.weakness(not first.weak_in)}{others} as {edge.where}, "
                f"{edge.how}: {then}")
    elif first.kind is CauseKind.PYTREE_STRUCTURE and first.before.startswith("a dict "):
        text = (f"{first.path.rpartition('[')[0] or edge.name} goes in {first.before} and "
                f"comes back {first.after}{others} as {edge.where}, {edge.how}: {then}")
    else:
        text = (f"{first.path} goes in {first.before} and comes back {first.after}{others} "
                f"as {edge.where}, {edge.how}: {then}")
    return Hazard(first.kind, first.path, truncate(text, _parts.TEXT_LIMIT), first.hint,
                  warn=edge.looped)


def _rank(kind: CauseKind) -> int:
    return DIFFERENCE_KINDS.index(kind) if kind in DIFFERENCE_KINDS else len(DIFFERENCE_KINDS)


def said_of(edges: Sequence[Edge], signature: Signature, outputs: Outputs) -> list[Hazard]:
    """The hazards the edges show: those of the kind the next compile's cause will be
    (the most significant that differs), one per edge, naming its first path."""
    found: list[tuple[Edge, list[Difference]]] = []
    placed = _Placed(outputs)
    for edge in edges:
        try:
            diffs = differences(edge, signature, outputs, placed)
        except Exception:  # a tree whose nodes do not compare: this edge says nothing
            diffs = []
        if diffs:
            found.append((edge, diffs))
    if not found:
        return []
    top = min((d.kind for _, diffs in found for d in diffs), key=_rank)
    hazards: list[Hazard] = []
    for edge, diffs in found:
        ours = [d for d in diffs if d.kind is top]
        if ours:
            hazards.append(_said(edge, ours[0], len(ours) - 1))
    return hazards


# --- the entry point ---------------------------------------------------------------------

def _python_scalars(signature: Signature) -> dict[str, StaticArg]:
    """The statics a wrapper library holds a Python scalar in (``eqx.filter_jit`` keeps
    every non-array static), by the parameter's name."""
    return {s.name: s for s in signature.statics if s.kind is StaticKind.STATIC_ARGUMENT
            and s.type in ("float", "int", "bool", "complex")}


def fed_back(info: FunctionInfo, signature: Signature, outputs: Outputs | None,
             callsite: str | None, caller: str | None = None) -> list[Hazard]:
    """The fixed-point rule at a first compile (see the module's doc)."""
    if outputs is None:
        return []
    fed = _src.feedback(callsite)
    if fed is None or fed.starred:
        return []

    def again(text: str) -> bool:
        """Whether the call is made again given what it fed back to ``text``: in a loop
        of its own, or in a helper whose caller's loop gives the helper back what it
        returned for that parameter (``params, lr = train_one(params, lr)``)."""
        return fed.in_loop or _src.helper_feeds_back(callsite, caller, text)

    inputs = _parts.inputs(signature)
    if inputs is None or not signature.top_names or not outputs.own:
        # a wrapper library's layout (``nnx.jit``, ``eqx.filter_jit``): its leaves keyed
        # by their paths, no positional parameters, or its outputs its own
        return _wrapped_fed_back(info, signature, outputs, fed,
                                 _python_scalars(signature), again)
    names = _parts.positional_names(signature)
    if not inputs or names is None:
        return []
    by_expression = _by_expression(names, fed)
    edges = _line_edges(signature, outputs, fed, inputs, by_expression, again)
    edges += _route_edges(outputs, callsite, inputs, by_expression)
    return said_of(edges, signature, outputs)


def _plain_tuples(tree: Any, arity: int, limit: int = 256) -> list[tuple[list[Any], int]]:
    """The plain tuples (or lists) of ``arity`` children nearest the root of ``tree``,
    each with its first leaf's index: where a wrapper library's outputs hold the user's
    returned tuple (its own state, deeper, may hold tuples too)."""
    found: list[tuple[list[Any], int]] = []
    level = [(tree, 0)]
    seen = 0
    while level and not found and seen < limit:
        deeper = []
        for node, first in level:
            seen += 1
            if _is_leaf(node):
                continue
            children = _parts.tree_children(node)
            if len(children) == arity and _is_tuple(node):
                found.append((children, first))
            offset = first
            for child in children:
                deeper.append((child, offset))
                offset += child.num_leaves
        level = deeper
    return found


def _wrapped_fed_back(info: FunctionInfo, signature: Signature, outputs: Outputs,
                      fed: _src.Feedback, scalars: dict[str, StaticArg],
                      again: Callable[[str], bool]) -> list[Hazard]:
    """Feedback through a wrapper library's jit (``nnx.jit``, ``eqx.filter_jit``), whose
    traced tree is keyed by the user's paths: the call's arguments named by the function's
    own parameters (read off its ``def``), the user's returned tuple found among the
    outputs as the one plain tuple of as many items as the call's targets. Weak types
    only (and a Python scalar the wrapper holds static that comes back an array)."""
    params = _src.parameters(info.file, info.line)
    if params is None or not fed.targets or not scalars and not any(
            getattr(a, "weak_type", False) for a in signature.avals):
        return []
    by_expression = {text: name for name, text in zip(params, fed.args) if text is not None}
    by_expression.update((text, name) for name, text in fed.keywords if text is not None)
    tuples = _plain_tuples(outputs.tree, len(fed.targets))
    if len(tuples) != 1:
        return []  # not one place the returned tuple can be: nothing said
    children, first = tuples[0]
    paths = list(signature.paths)
    found: list[Hazard] = []
    offset = first
    for i, (target, sub) in enumerate(zip(fed.targets, children)):
        at, offset = offset, offset + sub.num_leaves
        name = by_expression.get(target) if target is not None else None
        if name is None or sub.num_leaves != 1 or at >= len(outputs.avals):
            continue
        after = aval_facts(outputs.avals[at])
        if after is None:
            continue
        if name in paths:
            before = aval_facts(signature.avals[paths.index(name)])
            if before is None or before[:2] != after[:2] or not before[2] or after[2]:
                continue
            kind = signature.types[paths.index(name)]
            text = (f"{name} goes in {_parts.weakness(True, kind)} and comes back "
                    f"{_parts.weakness(False)} as output [{i}], which the calling line assigns "
                    f"back to {name}")
            cause, hint = CauseKind.WEAK_TYPE, ("pass it as an array from the first call "
                                                "(jnp.asarray(x, dtype)), so that what goes "
                                                "in and what comes back are typed alike")
        elif name in scalars and not after[0]:
            text = (f"{name} goes in as a Python scalar ({_parts.value_text(scalars[name])}), "
                    "which the "
                    f"wrapper holds static, and comes back an array as output [{i}], which "
                    f"the calling line assigns back to {name}")
            cause, hint = CauseKind.STATIC_ARGUMENT, ("pass it as an array from the first "
                                                      "call (jnp.asarray(x, dtype))")
        else:
            continue
        looped = again(target) if target is not None else False
        found.append(Hazard(cause, name, truncate(
            text + (": the next call compiles again" if looped
                    else ": a call given it back compiles again"), _parts.TEXT_LIMIT),
            hint, warn=looped))
    return found
