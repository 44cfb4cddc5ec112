"""Recompiles named before they happen: the hazards a compile shows, each said once.

One entry point, :func:`hazards`, run where the cause is worded (``_assemble``: on the
background thread by default), from what the compile left: its signature, its outputs'
abstract values and tree, the function's earlier signatures and cause, the user's call
line. A hazard's kind is the cause kind of the recompile it predicts, so that the two read
alike in every sink; its ``warn`` says whether it is precise enough to be a warning, or a
note (an INFO log line and a span event, no warning).

- ``weak_type``: a weakly typed input leaf (a Python scalar) that the function returns
  strongly typed, same shape and dtype, where the call's own line assigns that output back
  to the very name it passed (``state = step(state)``, ``params, loss, lr = step(params,
  batch, lr)``), which nothing else in the loop around the call sets: the next call
  compiles again. A note where no loop of the call's own scope runs it again (its caller
  may pass a new scalar each time). Said at the first compile.
- ``static_argument``: a static argument whose type hashes and compares by identity
  (``object.__hash__``: every new object compiles again); a warning for a user's class the
  calling line makes anew (``f(x, Config(2))``), a note where it passes a name (the same
  object may come each time: a static ``self``) or a function made per call (a lambda). A
  dtype passed as a static is a note: its equal spellings (``jnp.bfloat16``, ``x.dtype``,
  ``"bfloat16"``) hash differently. Said at the first compile.
- ``function_identity``: a function defined in a loop body, and called there (a
  warning; called elsewhere, or reading a name the loop binds, so maybe meant to differ
  per pass: a note): each new function object compiles again. Said at the
  first compile.
- ``shape``: an input dimension that took a new value at each of the last compiles
  (data-dependent lengths), not already bucketed (powers of two, multiples of a step of 8
  or more: a warm-up over buckets, which then hit the cache). Said at the compile where
  the pattern first shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._capture._jax._outputs import Outputs, aval_facts
from .._capture._signature import Signature, StaticArg, StaticKind
from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_source
from ._model import Diff

#: The most hazards one compile names (the first found): a sink's event list stays short.
MAX_HAZARDS = 8
#: Compiles in a row whose input dimension took a new value each time: a shape hazard.
SHAPE_RUN = 3
_TEXT_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Hazard:
    """A recompile this compile shows is coming: where, what will happen, the fix."""

    kind: CauseKind  # the cause kind of the recompile it predicts
    path: str  # the argument path (``lr``, ``state['lr']``), the static's name, or ""
    text: str  # what will happen, in one line
    hint: str  # the fix
    warn: bool = True  # precise enough for a warning; ``False``: a note (INFO)

    @property
    def level(self) -> str:
        return "warning" if self.warn else "info"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "path": self.path, "text": self.text,
                "hint": self.hint, "level": self.level}


def hazards(info: FunctionInfo, count: int, signature: Signature, outputs: Outputs | None,
            earlier: Sequence[tuple[int, Signature]], cause_kind: CauseKind, diff: Diff,
            callsite: str | None) -> tuple[Hazard, ...]:
    """The hazards compile ``count`` of ``info`` shows (``earlier``: the function's kept
    ``(count, signature)`` pairs before it, oldest first). May raise on hostile values:
    the caller runs it under its fail-open guard."""
    if not signature.captured or signature.transform:
        return ()
    found: list[Hazard] = []
    if count == 1:
        found += _weak_type_fed_back(signature, outputs, callsite)
        found += _identity_statics(signature, callsite)
        found += _made_again(info, callsite)
    elif cause_kind is CauseKind.SHAPE:
        found += _new_lengths(count, signature, earlier, diff)
    return tuple(found[:MAX_HAZARDS])


# --- weak_type: a Python scalar that comes back as an array -------------------------------

def _children(tree: Any) -> list[Any]:
    from jax import tree_util

    return list(tree_util.treedef_children(tree))


def _is_tuple(tree: Any) -> bool:
    """Whether ``tree`` is a plain tuple or list at its top (not a NamedTuple: a state)."""
    from jax import tree_util

    # Unflattened with stand-ins: the tree JAX made for the outputs may not compare equal
    # to one built here from its children, though it is the same structure.
    rebuilt = tree_util.tree_unflatten(tree, [None] * tree.num_leaves)
    return type(rebuilt) in (tuple, list)


def _top_name(path: str) -> str:
    cut = min((i for i in (path.find("["), path.find(".")) if i >= 0), default=len(path))
    return path[:cut]


def _inputs(signature: Signature) -> dict[str, tuple[Any, int]] | None:
    """Each top-level argument's tree and first leaf's index, by the parameter's name."""
    children = _children(signature.treedef)
    if len(children) != 2:  # not (args, kwargs): a wrapper library's own layout
        return None
    positional, keywords = _children(children[0]), _children(children[1])
    out: dict[str, tuple[Any, int]] = {}
    offset = 0
    paths = signature.paths
    for j, sub in enumerate(positional + keywords):
        leaves = sub.num_leaves
        if leaves and offset < len(paths):
            out[_top_name(paths[offset])] = (sub, offset)
        elif j < len(positional) and j < len(signature.top_names):
            out[signature.top_names[j]] = (sub, offset)
        offset += leaves
    return out


def _positional_names(signature: Signature) -> tuple[str, ...] | None:
    """The parameters the call's positional arguments fill, in order; ``None`` when a
    positional static argument (not in the traced tree) shifts them."""
    if any(s.kind is StaticKind.STATIC_ARGUMENT and not s.keyword for s in signature.statics):
        return None
    return signature.top_names


def _weak_type_fed_back(signature: Signature, outputs: Outputs | None, callsite: str | None,
                        ) -> list[Hazard]:
    if outputs is None or not any(getattr(a, "weak_type", False) for a in signature.avals):
        return []
    fed = _hazard_source.feedback(callsite)
    if fed is None or fed.starred:
        return []
    inputs = _inputs(signature)
    names = _positional_names(signature)
    if not inputs or names is None:
        return []
    by_expression: dict[str, str] = {}  # the call's argument text -> the parameter's name
    for name, text in zip(names, fed.args):
        if text is not None:
            by_expression.setdefault(text, name)
    for name, text in fed.keywords:
        if text is not None:
            by_expression.setdefault(text, name)
    out_children = _children(outputs.tree)
    pairs: list[tuple[str, Any, int, str]] = []  # (parameter, out tree, first out leaf, where)
    if fed.whole is not None:
        if fed.whole in by_expression:
            pairs.append((by_expression[fed.whole], outputs.tree, 0, "the result"))
    elif fed.targets and len(fed.targets) == len(out_children) \
            and _is_tuple(outputs.tree):
        offset = 0
        for i, (target, sub) in enumerate(zip(fed.targets, out_children)):
            if target is not None and target in by_expression:
                pairs.append((by_expression[target], sub, offset, f"output [{i}]"))
            offset += sub.num_leaves
    found: list[Hazard] = []
    for name, out_tree, out_first, where in pairs:
        given = inputs.get(name)
        if given is None or given[0] != out_tree:
            continue  # the name is fed another structure: not the same leaves
        in_tree, in_first = given
        for k in range(in_tree.num_leaves):
            before = aval_facts(signature.avals[in_first + k])
            after = aval_facts(outputs.avals[out_first + k])
            if before is None or after is None or before[:2] != after[:2] \
                    or before[2] == after[2]:
                continue
            path = signature.paths[in_first + k]
            kind = signature.types[in_first + k]
            found.append(Hazard(
                CauseKind.WEAK_TYPE, path,
                truncate(f"{path} goes in {_weakness(before[2], kind)} and comes back "
                         f"{_weakness(after[2])} as {where}, which the calling line assigns "
                         f"back to {name}: " + ("the next call compiles again" if fed.in_loop
                                                else "a call given it back compiles again"),
                         _TEXT_LIMIT),
                "pass it as an array from the first call (jnp.asarray(x, dtype)), so that "
                "what goes in and what comes back are typed alike" if before[2] else
                "keep it an array the function returns as it came (no Python scalar in "
                "its place)", warn=fed.in_loop))
    return found


def _weakness(weak: bool, kind: str = "") -> str:
    if weak:
        return f"weakly typed ({kind}: a Python scalar)" if kind else "weakly typed"
    return f"strongly typed ({kind})" if kind else "strongly typed"


# --- static_argument: hashed by identity, or equal values hashed apart --------------------

#: Types hashed by identity whose objects are made once and passed again (a module-level
#: function, a class): not a hazard unless made per call, which the definition tells.
_LONG_LIVED = frozenset({"function", "builtin_function_or_method", "type", "module",
                         "method", "builtin_method", "PjitFunction"})


def _identity_statics(signature: Signature, callsite: str | None) -> list[Hazard]:
    found: list[Hazard] = []
    for static in signature.statics:
        if static.kind is not StaticKind.STATIC_ARGUMENT:
            continue
        if _dtype_like(static):
            found.append(Hazard(
                CauseKind.STATIC_ARGUMENT, static.name,
                truncate(f"static argument {static.name} is a dtype ({static.repr}): its "
                         "equal spellings (jnp.bfloat16, x.dtype, 'bfloat16') hash "
                         "differently, and a call with another spelling compiles again",
                         _TEXT_LIMIT),
                "pass one spelling each time: jnp.dtype(...) of it before the call",
                warn=False))
        elif static.identity_hashed and not static.interned:
            # the calling line is read only here: most first compiles have no such static
            found += _by_identity(static, _hazard_source.made_in_call(callsite))
    return found


def _by_identity(static: StaticArg, made: frozenset[str] = frozenset()) -> list[Hazard]:
    """``made``: what the calling line calls to make its arguments (class names). A
    warning where the calling line makes a new object of the static's class; else a
    note: the same object passed again (a static ``self``, a module-level config) hits the
    cache, which nothing at the first compile tells apart from a new one each call."""
    short = static.type.rpartition(".")[2]
    if short in _LONG_LIVED or static.type in _LONG_LIVED:
        if "<lambda>" in static.repr or "<locals>" in static.repr:
            return [Hazard(
                CauseKind.STATIC_ARGUMENT, static.name,
                truncate(f"static argument {static.name} is a function made inside another "
                         f"({static.repr}), hashed by identity: each one made anew "
                         "compiles again", _TEXT_LIMIT),
                "define it once (module level) and pass that same function",
                warn=False)]
        return []
    fresh = short in made
    return [Hazard(
        CauseKind.STATIC_ARGUMENT, static.name,
        truncate(f"static argument {static.name} is a {static.type}, hashed and compared "
                 "by identity (object.__hash__): every new object, even an equal one, "
                 "compiles again" + (f", and the calling line makes a new {short} each run"
                                     if fresh else "; the same object passed again hits "
                                     "the cache"), _TEXT_LIMIT),
        f"give {short} value-based __eq__ and __hash__ (a frozen dataclass), or pass the "
        "same object each time", warn=fresh)]


def _dtype_like(static: StaticArg) -> bool:
    """Whether a static value is a dtype by one of its spellings: a dtype object, a scalar
    type (``jnp.bfloat16``, ``np.float32``) or a dtype's canonical name (``"bfloat16"``)."""
    import numpy as np

    kind = static.type
    if kind.startswith(("numpy.dtypes.", "ml_dtypes.")) or kind.endswith("DType"):
        return True  # a dtype object, by its type's name
    value = static.value.get() if static.value is not None else None
    if value is None:
        return False
    if isinstance(value, np.dtype):
        # A dtype object whose type's name says nothing: the name of a dtype's class is
        # numpy's and ml_dtypes' choice, ``numpy.dtype[bfloat16]`` with ml_dtypes 0.6 and
        # ``ml_dtypes.bfloat16`` with 0.7 (a signature keeps a dtype itself: numpy keeps one
        # object per dtype for good).
        return True
    if isinstance(value, type):
        return issubclass(value, np.generic) or isinstance(getattr(value, "dtype", None),
                                                           np.dtype)
    if isinstance(value, str) and value.isidentifier():
        try:
            return bool(np.dtype(value).name == value)
        except Exception:  # not a dtype's name
            return False
    return False


# --- function_identity: a function made again and again ---------------------------------

def _called_within(callsite: str | None, filename: str | None,
                   lines: tuple[int, int]) -> bool:
    """Whether the jit call at ``callsite`` is made in the given lines of ``filename``."""
    where, _, line = (callsite or "").rpartition(":")
    return where == filename and line.isdigit() and lines[0] <= int(line) <= lines[1]


def _made_again(info: FunctionInfo, callsite: str | None) -> list[Hazard]:
    """A function defined in a loop body. One defined in another function's body is not
    said: a factory (``make_step()``) and a test's body run once, and nothing at the first
    compile tells them from a step function; its second compile's cause names it."""
    if "<locals>" not in info.qualname and "<lambda>" not in info.qualname:
        # Neither a lambda nor defined in a function: made once, at import (a file is
        # parsed only for functions that may be made again).
        return []
    where = _hazard_source.definition(info.file, info.line)
    if where is None or where.loop_lines is None:
        return []
    # Called in the loop that makes it: each pass compiles. Called elsewhere (after the
    # loop, or by a library on some passes only): a note. Reading what the loop binds, it
    # may be meant to differ per pass (one program per activation): a note too.
    inside = _called_within(callsite, info.file, where.loop_lines)
    text = (f"{info.qualname} is defined in a loop body (line {info.line}): each pass makes "
            "a new function object, and its jit compiles again")
    if where.reads:
        names = ", ".join(where.reads)
        text += f"; it reads {names}, which the loop binds, so each may be meant to differ"
        hint = (f"if it need not differ per pass, define and jit it once before the loop "
                f"and pass {names} as an argument")
    else:
        hint = "define and jit it once, before the loop"
    return [Hazard(CauseKind.FUNCTION_IDENTITY, "", truncate(text, _TEXT_LIMIT), hint,
                   warn=inside and not where.reads)]


# --- shape: a length that changes at every compile -----------------------------------------

def _shape_at(signature: Signature, path: str, hint: int) -> tuple[int, ...] | None:
    paths = signature.paths
    index = hint if 0 <= hint < len(paths) and paths[hint] == path else -1
    if index < 0:
        try:
            index = list(paths).index(path)
        except ValueError:
            return None
    facts = aval_facts(signature.avals[index])
    return facts[0] if facts is not None else None


def _new_each_time(shapes: Sequence[tuple[int, ...] | None]) -> int | None:
    """The first axis whose size differs at every one of ``shapes`` (same rank), or ``None``."""
    if any(s is None for s in shapes) or len({len(s) for s in shapes if s is not None}) != 1:
        return None
    known = [s for s in shapes if s is not None]
    for axis in range(len(known[0])):
        if len({s[axis] for s in known}) == len(known):
            return axis
    return None


#: The common step at or above which lengths read as bucketed (padded to a multiple).
_BUCKET_STEP = 8


def _bucketed(lengths: Sequence[int]) -> bool:
    """Whether lengths read as already bucketed: each a power of two, or all multiples of
    a common step of at least 8 (128, 384, 640). Data-dependent lengths seldom are."""
    if all(n > 0 and n & (n - 1) == 0 for n in lengths):
        return True
    return math.gcd(*lengths) >= _BUCKET_STEP


def _new_lengths(count: int, signature: Signature, earlier: Sequence[tuple[int, Signature]],
                 diff: Diff) -> list[Hazard]:
    # The compiles just before, in a row: a kept history with gaps says nothing of a run.
    before = [s for c, s in earlier if c >= count - SHAPE_RUN]
    if len(before) < SHAPE_RUN - 1 or [c for c, _ in earlier[-(SHAPE_RUN - 1):]] != list(
            range(count - SHAPE_RUN + 1, count)):
        return []
    found: list[Hazard] = []
    seen: set[str] = set()
    for change in diff.changes[:MAX_HAZARDS]:
        path = change.path
        if change.kind is not CauseKind.SHAPE or path in seen:
            continue
        seen.add(path)
        hint = list(signature.paths).index(path) if path in signature.paths else -1
        run = [_shape_at(s, path, hint) for s in (*before[-(SHAPE_RUN - 1):], signature)]
        axis = _new_each_time(run)
        if axis is None:
            continue
        if len(before) >= SHAPE_RUN:  # already showing at the compile before: said there
            previous = [_shape_at(s, path, hint) for s in before[-SHAPE_RUN:]]
            if _new_each_time(previous) == axis:
                continue
        lengths = [s[axis] for s in run if s is not None]
        if _bucketed(lengths):
            continue  # a warm-up over the user's buckets: they come back as cache hits
        sizes = ", ".join(map(str, lengths))
        found.append(Hazard(
            CauseKind.SHAPE, path,
            truncate(f"{path}: dimension {axis} took a new value at each of the last "
                     f"{SHAPE_RUN} compiles ({sizes}): each new length compiles again",
                     _TEXT_LIMIT),
            "bucket or pad it to a few sizes (the next power of two, a multiple of 128)"))
    return found
