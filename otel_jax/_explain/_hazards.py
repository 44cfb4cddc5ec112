"""Recompiles named before they happen: the hazards a compile shows, each said once.

One entry point, :func:`hazards`, run where the cause is worded (``_assemble``: on the
background thread by default), from what the compile left: its signature, its outputs'
abstract values and tree, the function's earlier signatures and cause, the user's call
line. A hazard's kind is the cause kind of the recompile it predicts, so that the two read
alike in every sink; its ``warn`` says whether it is precise enough to be a warning, or a
note (an INFO log line and a span event, no warning).

- the fixed-point rule (:mod:`._hazard_fixpoint`): an output the calling code feeds back
  into an input of the same function (the calling line's targets, ``state =
  step(state)``, an attribute or item stored back; a later line of the loop that takes a
  part of the result: :mod:`._hazard_flow`) whose abstract type differs from the input's:
  ``pytree_structure`` (a key gained or lost, ``None`` filled in), ``dtype`` (bfloat16
  parameters updated in float32), ``shape`` (a sequence grown by concatenation) or
  ``weak_type`` (a Python scalar that comes back an array), the most significant kind
  that differs. A warning where a loop runs the call again with it (its own, or a
  helper's caller's), else a note. Into a Python accumulator: :mod:`._hazard_flow`
  (``weak_type``). Said at the first compile.
- ``static_argument``: a static argument whose type hashes and compares by identity
  (``object.__hash__``: every new object compiles again); a warning for a user's class the
  calling line makes anew (``f(x, Config(2))``, a static self in ``Scaler(2).apply(x)``)
  or a lambda written there, a note where it passes a name (the same object may come each
  time: a static ``self``). A dtype passed as a static is a note: its equal spellings
  (``jnp.bfloat16``, ``x.dtype``, ``"bfloat16"``) hash differently. Under
  ``eqx.filter_jit``, a Python scalar held static that comes back an array the calling
  line assigns back. Said at the first compile; a local function passed as a static (as
  equinox passes the user's), only at a second compile that shows it made anew (a note).
  One that took a new value at each of the last compiles in a row (a counter, a
  position, an object built per call): ``_static_runs``, a note, then a warning.
- ``function_identity``: the loop around the call makes the jitted function anew each
  pass: a function defined in a loop body, and called there, or a jit there of a new
  object each time (``jax.jit(model.apply)``, ``jax.jit(partial(loss, ...))``). A warning;
  called elsewhere: a note; reading a name the loop binds, one program per item
  (:mod:`._hazard_sweep`); made under an ``if`` or kept in a container (a cache,
  reused): nothing. Said at the first compile. Made in a function called again, or on
  each pass of an outer loop: :mod:`._hazard_repeat`; a bound method jitted in
  ``__init__`` of an object a loop makes per pass: :mod:`._hazard_object`.
- ``shape``: an input dimension that took a new value at each of the last compiles
  (data-dependent lengths), not already bucketed (powers of two, multiples of a step of 8
  or more: a warm-up over buckets, which then hit the cache): a note after ``SHAPE_RUN``
  compiles in a row (a few fixed lengths, evaluation splits, make such a run, then hit the
  cache), a warning after ``SHAPE_WARN_RUN``. Each said at the compile where it shows.
  The same run for the length of a Python list or tuple argument (a list appended to
  each step and passed whole): ``pytree_structure``, its next length a new structure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._capture._jax._outputs import Outputs, aval_facts
from .._capture._signature import Signature, StaticArg, StaticKind
from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import (
    _hazard_fixpoint,
    _hazard_flow,
    _hazard_object,
    _hazard_repeat,
    _hazard_source,
    _hazard_sweep,
    _static_runs,
)
from . import _hazard_parts as _parts
from ._hazard_parts import Hazard
from ._model import Diff

#: The most hazards one compile names (the first found): a sink's event list stays short.
MAX_HAZARDS = 8
#: Compiles in a row whose input dimension took a new value each time: a shape note.
SHAPE_RUN = 3
#: ... and a shape warning: a few fixed lengths (train, validation and test splits, each
#: evaluated every epoch) also make a short run, which then hits the cache.
SHAPE_WARN_RUN = 5


def hazards(info: FunctionInfo, count: int, signature: Signature, outputs: Outputs | None,
            earlier: Sequence[tuple[int, Signature]], cause_kind: CauseKind, diff: Diff,
            callsite: str | None, caller: str | None = None) -> tuple[Hazard, ...]:
    """The hazards compile ``count`` of ``info`` shows (``earlier``: the function's kept
    ``(count, signature)`` pairs before it, oldest first; ``caller``: the user's line that
    called the function holding ``callsite``, a helper's caller). May raise on hostile
    values: the caller runs it under its fail-open guard."""
    if not signature.captured or signature.transform:
        return ()
    found: list[Hazard] = []
    if count == 1:
        found += _hazard_fixpoint.fed_back(info, signature, outputs, callsite, caller)
        found += _hazard_flow.accumulated(signature, callsite,
                                          info.qualname.rpartition(".")[2])
        found += _identity_statics(signature, callsite, caller)
        found += _made_again(info, callsite) or _hazard_repeat.made_per_run(
            info, count, callsite, caller) or _hazard_object.made_per_object(
            info, signature, callsite, caller)
    elif cause_kind is CauseKind.FUNCTION_IDENTITY and count == 2:
        found += _hazard_repeat.made_per_run(info, count, callsite, caller)
    elif cause_kind is CauseKind.SHAPE:
        found += _new_lengths(count, signature, earlier, diff)
    elif cause_kind is CauseKind.PYTREE_STRUCTURE:
        found += _new_container_lengths(count, signature, earlier, diff)
    elif cause_kind is CauseKind.STATIC_ARGUMENT:
        if count == 2:
            found += _static_functions_made_anew(signature, diff)
        found += _static_runs.new_each_call(count, signature, earlier, diff, callsite,
                                               caller)
    return tuple(found[:MAX_HAZARDS])


# --- static_argument: hashed by identity, or equal values hashed apart --------------------

def _identity_statics(signature: Signature, callsite: str | None,
                      caller: str | None) -> list[Hazard]:
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
                         _parts.TEXT_LIMIT),
                "pass one spelling each time: jnp.dtype(...) of it before the call",
                warn=False))
        elif static.identity_hashed and not static.interned:
            # the calling line is read only here: most first compiles have no such static
            found += _parts.by_identity(static, _hazard_source.made_in_call(callsite),
                                        lambda: _hazard_source.line_runs_again(callsite, caller))
    return found


def _static_functions_made_anew(signature: Signature, diff: Diff) -> list[Hazard]:
    """At a second compile caused by a static function argument: the same definition
    made anew (a local function or lambda, its name unchanged), seen once, may be made
    again: a note, now that the pattern has shown."""
    changed = {c.path for c in diff.changes if c.kind is CauseKind.STATIC_ARGUMENT}
    found: list[Hazard] = []
    for static in signature.statics:
        if static.kind is StaticKind.STATIC_ARGUMENT and static.name in changed and (
                "<lambda>" in static.repr or "<locals>" in static.repr) and (
                static.type.rpartition(".")[2] in _parts.LONG_LIVED):
            found.append(Hazard(
                CauseKind.STATIC_ARGUMENT, static.name,
                truncate(f"static argument {static.name} is a function made inside another "
                         f"({static.repr}), made anew since the last compile: hashed by "
                         "identity, each one made anew compiles again", _parts.TEXT_LIMIT),
                "define it once (module level) and pass that same function", warn=False))
    return found


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
    jitted = _hazard_source.jitted_in_loop(callsite)
    if jitted is not None:
        # The loop around the call jits it anew on each pass, whatever it jits (a bound
        # method, a partial, a lambda): each pass's jit compiles again.
        if jitted.reads:  # one program per item: the sweep rule
            return [_hazard_sweep.per_item(info, jitted.line, jitted.reads,
                                           _hazard_sweep.swept_at(callsite, jitted.reads),
                                           "the loop around its call")]
        text = (f"{info.qualname} is jitted anew on each pass of the loop around its call "
                f"(line {jitted.line}): each pass makes a new jitted function, which "
                "compiles again")
        hint = "jit it once, before the loop, and call that same function"
        return [Hazard(CauseKind.FUNCTION_IDENTITY, "", truncate(text, _parts.TEXT_LIMIT), hint)]
    if "<locals>" not in info.qualname and "<lambda>" not in info.qualname:
        return []
    where = _hazard_source.definition(info.file, info.line)
    if where is None or where.loop_lines is None or not where.each_pass:
        # Made under an ``if`` or kept in a cache: it may be made once and reused.
        return []
    # Called in the loop that makes it: each pass compiles. Called elsewhere (after the
    # loop, or by a library on some passes only): a note. Reading what the loop binds, it
    # may be meant to differ per pass (one program per activation): a note too.
    inside = _called_within(callsite, info.file, where.loop_lines)
    if where.reads:  # one program per item: the sweep rule
        return [_hazard_sweep.per_item(
            info, info.line or 0, where.reads, inside and _hazard_sweep.swept_floats(
                info.file, where.loop_lines[0], where.reads), "the loop it is defined in")]
    text = (f"{info.qualname} is defined in a loop body (line {info.line}): each pass makes "
            "a new function object, and its jit compiles again")
    return [Hazard(CauseKind.FUNCTION_IDENTITY, "", truncate(text, _parts.TEXT_LIMIT),
                   "define and jit it once, before the loop", warn=inside)]


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
    """A note where an input dimension took a new value at each of the last
    ``SHAPE_RUN`` compiles in a row, a warning once it has at each of the last
    ``SHAPE_WARN_RUN``: a few fixed lengths (evaluation splits, each called every epoch)
    make a short run, then only cache hits."""
    row = _static_runs.consecutive(count, earlier, SHAPE_WARN_RUN)
    if len(row) < SHAPE_RUN - 1:
        return []
    found: list[Hazard] = []
    seen: set[str] = set()
    for change in diff.changes[:MAX_HAZARDS]:
        path = change.path
        if change.kind is not CauseKind.SHAPE or path in seen:
            continue
        seen.add(path)
        hint = list(signature.paths).index(path) if path in signature.paths else -1
        shapes = [_shape_at(s, path, hint) for s in (*row, signature)]
        axis = _new_each_time(shapes[-SHAPE_RUN:])
        if axis is None:
            continue
        run = SHAPE_RUN  # how many compiles in a row, ending here, took a new value
        while run < len(shapes) and _new_each_time(shapes[-(run + 1):]) == axis:
            run += 1
        if run not in (SHAPE_RUN, SHAPE_WARN_RUN):
            continue  # said at the compile where the run reached that length
        lengths = [s[axis] for s in shapes[-run:] if s is not None]
        if _bucketed(lengths):
            continue  # a warm-up over the user's buckets: they come back as cache hits
        sizes = ", ".join(map(str, lengths))
        found.append(Hazard(
            CauseKind.SHAPE, path,
            truncate(f"{path}: dimension {axis} took a new value at each of the last "
                     f"{run} compiles ({sizes}): each new length compiles again"
                     + ("" if run >= SHAPE_WARN_RUN else
                        " (a few fixed lengths, each called again, would hit the cache)"),
                     _parts.TEXT_LIMIT),
            "bucket or pad it to a few sizes (the next power of two, a multiple of 128)",
            warn=run >= SHAPE_WARN_RUN))
    return found


# --- pytree_structure: a Python list or tuple passed at a new length each time -----------

def _container_length(signature: Signature, path: str) -> tuple[int, ...] | None:
    """``(length,)`` of the list or tuple at ``path`` among the inputs, or ``None``."""
    node = _parts.node_at(signature, path)
    data = None if node is None or _parts.is_leaf(node) else node.node_data()
    if data is None or data[0] not in (list, tuple):
        return None
    return (len(_parts.tree_children(node)),)


def _new_container_lengths(count: int, signature: Signature,
                           earlier: Sequence[tuple[int, Signature]],
                           diff: Diff) -> list[Hazard]:
    """A Python list or tuple argument whose length took a new value at each of the last
    compiles (a list appended to each step, passed whole): followed as an array's
    dimension is (:func:`_new_lengths`), a note after ``SHAPE_RUN`` compiles in a row, a
    warning after ``SHAPE_WARN_RUN``."""
    row = _static_runs.consecutive(count, earlier, SHAPE_WARN_RUN)
    if len(row) < SHAPE_RUN - 1:
        return []
    found: list[Hazard] = []
    seen: set[str] = set()
    for change in diff.changes[:MAX_HAZARDS]:
        if change.kind is not CauseKind.PYTREE_STRUCTURE:
            continue
        path = change.path
        if _container_length(signature, path) is None:
            # an item added or dropped: the container is the path's parent
            path = path[:path.rfind("[")] if path.endswith("]") and "[" in path else ""
        if not path or path in seen:
            continue
        seen.add(path)
        lengths = [_container_length(s, path) for s in (*row, signature)]
        if _new_each_time(lengths[-SHAPE_RUN:]) is None:
            continue
        run = SHAPE_RUN
        while run < len(lengths) and _new_each_time(lengths[-(run + 1):]) is not None:
            run += 1
        if run not in (SHAPE_RUN, SHAPE_WARN_RUN):
            continue  # said at the compile where the run reached that length
        sizes = [n[0] for n in lengths[-run:] if n is not None]
        if _bucketed(sizes):
            continue
        node = _parts.node_at(signature, path)
        kind = node.node_data()[0].__name__ if node is not None else "list"
        found.append(Hazard(
            CauseKind.PYTREE_STRUCTURE, path,
            truncate(f"{path}: a Python {kind} whose length took a new value at each of the "
                     f"last {run} compiles ({', '.join(map(str, sizes))}): each new length "
                     "is a new pytree structure, which compiles again"
                     + ("" if run >= SHAPE_WARN_RUN else
                        " (a few fixed lengths, each called again, would hit the cache)"),
                     _parts.TEXT_LIMIT),
            f"pass {path} as one array (jnp.stack it, or keep a buffer of a fixed size "
            "written at a position: x.at[i].set(...)), padded to a few lengths, not a "
            f"{kind} that grows", warn=run >= SHAPE_WARN_RUN))
    return found
