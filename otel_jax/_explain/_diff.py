"""Why a compile happened: a structured diff against the closest earlier signature.

The diff names every difference (path, kind, before, after); the cause kind is
the most significant of them. Cost depends only on the two signatures being
compared (their leaf count) and on the bounded history of *this* function,
never on how many other functions the process has compiled.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._capture import _jax_read, _wrappers
from .._capture._leaves import differing
from .._capture._signature import (
    EXPORTED_PROGRAM,
    GRAPH_NODE,
    Placement,
    Signature,
    StaticArg,
    aval_text,
    field_names,
    one_line_repr,
)
from .._core._text import safe_repr, truncate, type_name
from .._core._vocab import DIFF_TRUNCATED, DIFFERENCE_KINDS, CauseKind, DiffKey

_RANK = {k: i for i, k in enumerate(DIFFERENCE_KINDS)}
ABSENT = "<absent>"

TRANSFORMATION_PATH = "<transformation>"
MAX_CHANGES = 1000  # kept per compile; the total is always reported
DIFF_JSON_LIMIT = 16_384  # characters of the `jax.compile.cause.diff` attribute


class Detail(enum.Enum):
    """What sort of difference a change is, beyond its kind: the wording of a cause
    and the merging of changes are decided from this, never from the texts."""

    VALUE = "value"  # before -> after
    ADDED = "added"  # absent before
    REMOVED = "removed"  # absent after
    NEW_FUNCTION = "new_function"  # another function object, same source
    BOUND_METHOD = "bound_method"  # another bound method object, same method
    TRANSFORMATION = "transformation"  # called directly vs under grad/vmap/jvp
    OTHER_PROGRAM = "other_program"  # another transformed program of the function
    IDENTITY_HASHED = "identity_hashed"  # a new instance of a type hashed by identity
    LOOKS_EQUAL = "looks_equal"  # equal reprs, unequal values
    RETRACED_BODY = "retraced_body"  # an eager control-flow body traced again
    MOVED = "moved"  # passed positionally vs by keyword
    TRACED_STATIC = "traced_static"  # a traced array vs a static value
    REPLACED = "replaced"  # a graph node became another type of node (or a reference)
    STATIC_FUNCTION = "static_function"  # a static field's function object re-created
    STATIC_FIELD = "static_field"  # a static field of a module/dataclass pytree changed
    BOUND_VALUE = "bound_value"  # what a new partial/closure binds (``subject``: the name)
    INTERNED = "interned"  # another value of a type JAX keeps one object per value of
    FIELD_OF_IDENTITY = "field_of_identity"  # a field of a new identity-hashed instance
    OTHER_EXPORT = "other_export"  # another jax.export program of the function
    KEY_STYLE = "key_style"  # a typed PRNG key vs a legacy uint32 one
    KEY_IMPL = "key_impl"  # typed PRNG keys of two implementations (threefry vs rbg)


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two signatures.

    ``subject`` names what the detail is about when the wording needs it
    (the type of an identity-hashed static value).
    """

    path: str
    kind: CauseKind
    before: str
    after: str
    detail: Detail = Detail.VALUE
    subject: str = ""

    def as_dict(self) -> dict[str, str]:
        return {DiffKey.PATH: self.path, DiffKey.KIND: self.kind.value,
                DiffKey.BEFORE: self.before, DiffKey.AFTER: self.after}

    def __str__(self) -> str:
        return f"{self.path}: {self.before} -> {self.after}"


@dataclass(frozen=True, slots=True)
class Diff:
    """All differences found, capped at ``MAX_CHANGES``; ``total`` counts them all."""

    changes: tuple[Change, ...]
    total: int

    @property
    def kind(self) -> CauseKind:
        if not self.changes:
            return CauseKind.UNKNOWN
        return min((c.kind for c in self.changes), key=lambda k: _RANK.get(k, len(_RANK)))

    def to_json(self, limit: int = DIFF_JSON_LIMIT) -> str:
        """JSON list of changes; past ``limit`` characters, a final entry counts the rest."""
        parts: list[str] = []
        size = 2
        for i, change in enumerate(self.changes):
            item = json.dumps(change.as_dict(), ensure_ascii=False)
            if size + len(item) + 200 > limit:
                rest = self.total - i
                parts.append(_truncated(rest))
                break
            parts.append(item)
            size += len(item) + 2
        else:
            if self.total > len(self.changes):
                parts.append(_truncated(self.total - len(self.changes)))
        return "[" + ", ".join(parts) + "]"


def _truncated(rest: int) -> str:
    return json.dumps({DiffKey.PATH: "", DiffKey.KIND: DIFF_TRUNCATED, DiffKey.BEFORE: "",
                       DiffKey.AFTER: f"{rest} more changes not shown"})


def _added(path: str, kind: CauseKind, after: str) -> Change:
    return Change(path, kind, ABSENT, after, Detail.ADDED)


def _removed(path: str, kind: CauseKind, before: str) -> Change:
    return Change(path, kind, before, ABSENT, Detail.REMOVED)


# --- comparing -----------------------------------------------------------------

def _safe_ne(a: Any, b: Any) -> bool:
    if a is b:
        return False
    try:
        return bool(a != b)
    except Exception:  # a config value or mesh with a broken __eq__
        return safe_repr(a) != safe_repr(b)


def _same_function(old: Signature, new: Signature) -> bool:
    if old.function_ref is not None and new.function_ref is not None:
        previous = old.function_ref()
        return previous is not None and previous is new.function_ref()
    return old.function_id == new.function_id


CALLED_DIRECTLY = "called directly"


def _is_bound_method(sig: Signature) -> bool:
    fun = sig.function_ref() if sig.function_ref is not None else None
    return getattr(fun, "__self__", None) is not None and hasattr(fun, "__func__")


def _static_changed(old: StaticArg, new: StaticArg) -> bool:
    return old.keyword != new.keyword or _static_value_changed(old, new)


def _static_value_changed(old: StaticArg, new: StaticArg) -> bool:
    if old.type != new.type:
        return True
    if old.identity_hashed or new.identity_hashed:
        same = old.same_object_as(new)
        return not same if same is not None else old.repr != new.repr
    return old.hash != new.hash or old.repr != new.repr or old.value != new.value


_OTHER_PROGRAM = 1 << 40  # a transformed computation is never "close" to a plain call
# A distance is ``coarse * _FINE + fine``. Coarse: how many things differ (in
# half units, see below). Fine, to break ties between equally many differences:
# how far apart the differing values are inside (dimensions of a shape, fields
# of a static value, entries of a sharding), each difference counting at least 1.
_FINE = 1 << 12


def distance(old: Signature, new: Signature) -> int:
    """How far apart two signatures are: a cheap measure used to pick the closest one."""
    if old.transform != new.transform:
        return _OTHER_PROGRAM
    if old.program != new.program:
        return _OTHER_PROGRAM // 2  # another program of the same transformation
    # Whole differences, doubled on return. Each part is compared whole first:
    # equal parts (the common case) cost one comparison instead of a walk.
    d = 0
    fine = 0
    if not _same_function(old, new):
        d += 1
        fine += 1 + _bound_distance(old, new)
    if old.options != new.options:
        n = sum(1 for (_, a), (_, b) in zip(old.options, new.options) if a != b)
        d += n
        fine += n
    if _safe_ne(old.context, new.context):
        n = sum(1 for (_, a), (_, b) in zip(old.context, new.context) if _safe_ne(a, b))
        d += n
        fine += n
    if old.statics != new.statics:
        n, f = _static_distance(old, new)
        d += n
        fine += f
    if _treedef_equal(old, new):
        moved = _differing(old.placements, new.placements)
        d += len(moved)
        fine += sum(_placement_distance(old.placements[i], new.placements[i]) for i in moved)
        # Count each differing aspect (dtype, shape, weak type) so that a
        # signature differing in one aspect is closer than one differing in two;
        # inside an aspect, count dimensions (and sharding entries).
        leaves = _differing(old.types, new.types)
        for i in leaves:
            a, b = old.avals[i], new.avals[i]
            d += _aspects(a, b)
            fine += _leaf_distance(a, b)
        # In half units: of two signatures one difference away, the one that
        # differs by a weak type alone is the telling one (f(1) vs f(jnp.int32(1))).
        weak_only = d == 1 and len(leaves) == 1 and _weak_type_only(
            old.avals[leaves[0]], new.avals[leaves[0]])
        return (2 * d - weak_only) * _FINE + min(fine, _FINE - 1)
    old_paths = dict(zip(old.paths, old.types))
    new_paths = dict(zip(new.paths, new.types))
    d += 1 + len(old_paths.keys() ^ new_paths.keys())
    coarse = 2 * (d + sum(1 for p, t in new_paths.items()
                          if p in old_paths and old_paths[p] != t))
    # A path present on one side only has no inside to compare: as far apart as
    # a difference gets, so a signature whose differences can be measured wins a tie.
    return coarse * _FINE + _FINE - 1


#: One difference, as small as a difference gets: no earlier signature can be closer.
_CLOSEST = 2 * _FINE + 1


def _static_distance(old: Signature, new: Signature) -> tuple[int, int]:
    """Static values that differ, and how far apart inside (fields of dataclass-likes)."""
    olds = {(s.kind, s.name): s for s in old.statics}
    d = fine = 0
    for s in new.statics:
        prev = olds.get((s.kind, s.name))
        if prev is None:
            d += 1
            fine += 1
        elif _static_changed(prev, s):
            d += 1
            fine += _fields_distance(prev, s)
    gone = len(olds.keys() - {(s.kind, s.name) for s in new.statics})
    return d + gone, fine + gone


def _fields_distance(old: StaticArg, new: StaticArg) -> int:
    if not (old.fields and new.fields and old.type == new.type):
        return 1
    a, b = dict(old.fields), dict(new.fields)
    n = sum(1 for k, v in b.items() if a.get(k, ABSENT) != v) + len(a.keys() - b.keys())
    return max(1, n)


def _leaf_distance(a: Any, b: Any) -> int:
    """How far apart two abstract values are: dimensions, dtype, weak type, sharding."""
    try:
        n = int(a.dtype != b.dtype) + int(
            getattr(a, "weak_type", False) != getattr(b, "weak_type", False))
        sa, sb = tuple(a.shape), tuple(b.shape)
        if sa != sb:
            n += abs(len(sa) - len(sb)) + sum(1 for x, y in zip(sa, sb) if x != y)
        sha, shb = getattr(a, "sharding", None), getattr(b, "sharding", None)
        if sha is not shb and _safe_ne(sha, shb):
            n += _spec_distance(getattr(sha, "spec", None), getattr(shb, "spec", None))
        return max(1, n)
    except Exception:
        return 1


def _spec_distance(a: Any, b: Any) -> int:
    try:
        ta, tb = tuple(a), tuple(b)
    except Exception:
        return 1
    return max(1, abs(len(ta) - len(tb)) + sum(1 for x, y in zip(ta, tb) if x != y))


_OTHER_MESH = 4  # two shardings over different meshes
_OTHER_KIND_OF_PLACEMENT = 8  # one device vs a sharding: farther than a new spec or mesh


def _placement_distance(a: Placement, b: Placement) -> int:
    """Two shardings over the same mesh, one entry of the spec apart, are closer than two
    entries apart; a sharding is closer to another sharding than to one device."""
    if a.sharded != b.sharded:
        return _OTHER_KIND_OF_PLACEMENT
    if not a.sharded:
        return 1
    if not a.mesh or a.mesh != b.mesh:
        return _OTHER_MESH
    return _spec_distance(a.spec, b.spec)


def _bound_distance(old: Signature, new: Signature) -> int:
    """Bound values (partial arguments, closure cells) that differ between two functions."""
    a, b = old.bound, new.bound
    if a == b:
        return 0
    da, db = dict(a), dict(b)
    return sum(1 for k, v in db.items() if da.get(k, ABSENT) != v) + len(da.keys() - db.keys())


_differing = differing


def _aspects(a: Any, b: Any) -> int:
    try:
        n = (a.dtype != b.dtype) + (a.shape != b.shape) + (
            getattr(a, "weak_type", False) != getattr(b, "weak_type", False))
        return max(1, int(n))
    except Exception:
        return 1


def _weak_type_only(a: Any, b: Any) -> bool:
    try:
        return bool(a.dtype == b.dtype and a.shape == b.shape
                    and getattr(a, "weak_type", False) != getattr(b, "weak_type", False))
    except Exception:
        return False


def _treedef_equal(old: Signature, new: Signature) -> bool:
    a, b = old.treedef, new.treedef
    try:
        return _jax_read.trees_equal(a, b, old.tree_hash, new.tree_hash)
    except Exception:  # a node JAX cannot compare
        return safe_repr(a) == safe_repr(b)


def closest(history: Sequence[Signature], new: Signature) -> tuple[int, Signature] | None:
    """Index and signature in ``history`` with the fewest differences (latest on ties)."""
    best: tuple[int, Signature] | None = None
    best_d = -1
    for i in range(len(history) - 1, -1, -1):
        old = history[i]
        if not old.captured:
            continue
        d = distance(old, new)
        if best is None or d < best_d:
            best, best_d = (i, old), d
            if d == 0:
                return best
            # One smallest difference is as close as a recompile gets: stop
            # measuring there, so that a function recompiling every call
            # measures one signature, not its whole history; only an identical
            # earlier one (a cache eviction) can still be closer.
            if d <= _CLOSEST:
                for j in range(i - 1, -1, -1):
                    if history[j].captured and _identical(history[j], new):
                        return j, history[j]
                return best
    return best


def _identical(old: Signature, new: Signature) -> bool:
    """Every part equal, compared whole (shared parts by identity): cheap when it is not."""
    return (old.transform == new.transform and old.program == new.program
            and old.types == new.types and old.placements == new.placements
            and old.paths == new.paths and _same_function(old, new)
            and old.options == new.options and not _safe_ne(old.context, new.context)
            and old.statics == new.statics and _treedef_equal(old, new))


def diff(old: Signature, new: Signature) -> Diff:
    """Every difference between two signatures of the same function."""
    out: list[Change] = []
    total = 0

    def add(change: Change) -> None:
        nonlocal total
        total += 1
        if len(out) < MAX_CHANGES:
            out.append(change)

    if old.transform != new.transform:
        # Arguments of two different programs (f, and grad's jvp of f) do not
        # line up: the transformation is the whole story.
        add(Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY,
                   old.transform or CALLED_DIRECTLY, new.transform or CALLED_DIRECTLY,
                   Detail.TRANSFORMATION))
        return Diff(tuple(out), total)
    if old.program != new.program:
        add(Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY,
                   f"transformed program ({old.program})",
                   f"another transformed program of the same function ({new.program}): "
                   "grad's forward and backward passes and each vmap are programs of their "
                   "own", Detail.OTHER_PROGRAM))
        return Diff(tuple(out), total)
    if not _same_function(old, new):
        alive = old.function_ref is not None and old.function_ref() is not None
        before = "earlier function object" + ("" if alive else " (garbage-collected)")
        if _is_bound_method(new):
            add(Change("<function>", CauseKind.FUNCTION_IDENTITY, before,
                       "new bound method object, same method", Detail.BOUND_METHOD))
        else:
            add(Change("<function>", CauseKind.FUNCTION_IDENTITY, before,
                       "new function object, same source", Detail.NEW_FUNCTION))
            _bound_changes(old.bound, new.bound, add)
    for (name, a), (_, b) in zip(old.options, new.options):
        if a != b:
            add(Change(f"jit({name})", CauseKind.JIT_OPTIONS, a, b))
    if _safe_ne(old.context, new.context):
        for (name, a), (_, b) in zip(old.context, new.context):
            if _safe_ne(a, b):
                add(Change(name, CauseKind.TRACING_CONTEXT, _config_text(a), _config_text(b)))
    structure: list[Change] = []
    fallback: list[tuple[str, Any, Any]] = []
    _static_changes(old, new, add, structure.append, fallback.append)
    if _treedef_equal(old, new):
        _leaf_changes(old, new, add)
    else:
        _structure_changes(old, new, add)
    # A wrapper library's whole argument structure, passed as a static value,
    # says less than a path that appeared or went: only when nothing else does.
    if structure and not any(c.kind == CauseKind.PYTREE_STRUCTURE for c in out):
        for change in structure:
            add(change)
    if fallback and not out:
        for name, before, after in fallback:
            if _safe_ne(before, after):
                _tree_changes(name, before, after, add)
    merged = _drop_implied(_merge_gone_and_back(_merge_traced_and_static(out)))
    return Diff(tuple(merged), total - (len(out) - len(merged)))


def _live_values(prev: StaticArg, new: StaticArg) -> tuple[Any, Any] | None:
    """Both static values, while JAX's cache still holds them."""
    if prev.value is None or new.value is None:
        return None
    x, y = prev.value.get(), new.value.get()
    return None if x is None or y is None else (x, y)


def _exported_inputs(static: StaticArg) -> str:
    """``(f32[3,2], f32[b,3])``: the argument types an exported program was made for."""
    exported = static.value.get() if static.value is not None else None
    try:
        texts = [aval_text(a) for a in exported.in_avals]  # type: ignore[union-attr]
    except Exception:  # gone, or not readable: the field's text
        return dict(static.fields).get("in_avals", static.repr)
    return truncate("(" + ", ".join(texts) + ")")


def _functions(prev: StaticArg, new: StaticArg) -> tuple[Any, Any] | None:
    """Both static values when both are plain functions still alive."""
    live = _live_values(prev, new)
    if live is None or not all(type(v) is types.FunctionType for v in live):
        return None
    return live


def _graph_change(name: str, prev: StaticArg, new: StaticArg) -> Change:
    """A static attribute of a graph node that changed (``model.n: static 2 -> static 3``)."""
    detail = Detail.STATIC_FIELD
    if prev.repr != new.repr:
        return Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr, new.repr, detail)
    if new.identity_hashed and prev.type == new.type:
        return Change(name, CauseKind.PYTREE_STRUCTURE,
                      f"{prev.repr} (a {prev.type} compared by identity)",
                      f"new {new.type} instance", Detail.IDENTITY_HASHED, new.type)
    return Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr,
                  f"{new.repr} (looks the same but is not == to it or hashes differently)",
                  Detail.LOOKS_EQUAL)


def _merge_gone_and_back(changes: list[Change]) -> list[Change]:
    """A path gone and the same path come back as something else is one change
    (``model.n: static 2 -> f32[]``: a static attribute that became an array)."""
    removed = {c.path: c for c in changes
               if c.detail is Detail.REMOVED and c.kind == CauseKind.PYTREE_STRUCTURE}
    if not removed:
        return changes
    added = {c.path: c for c in changes
             if c.detail is Detail.ADDED and c.kind == CauseKind.PYTREE_STRUCTURE}
    both = removed.keys() & added.keys()
    if not both:
        return changes
    out = []
    for c in changes:
        if c.path not in both:
            out.append(c)
        elif c.detail is Detail.REMOVED:
            # another kind of thing at the same path: what was under either is implied
            out.append(Change(c.path, CauseKind.PYTREE_STRUCTURE, c.before, added[c.path].after,
                              Detail.REPLACED))
    return out


def _drop_implied(changes: list[Change]) -> list[Change]:
    """A path that appeared (or went, or became another node) implies what appeared or
    went under it: ``model.l3`` added says ``model.l3.kernel`` added."""
    ends = [c for c in changes if c.detail in (Detail.ADDED, Detail.REMOVED)]
    replaced = {c.path for c in changes if c.detail is Detail.REPLACED}
    if len(ends) < 2 and not (ends and replaced):
        return changes
    heads = {(c.path, c.detail) for c in ends}

    def implied(c: Change) -> bool:
        path = c.path
        for i in range(len(path) - 1, 0, -1):
            if path[i] in ".[" and ((path[:i], c.detail) in heads or path[:i] in replaced):
                return True
        return False

    drop = {id(c) for c in ends if implied(c)}
    return [c for c in changes if id(c) not in drop] if drop else changes


def _bound_changes(before: tuple[tuple[str, str], ...], after: tuple[tuple[str, str], ...],
                   add: Any) -> None:
    """What a re-created partial or closure binds differently: ``bound k: 2 -> 3``."""
    if before == after:
        return
    old, new = dict(before), dict(after)
    for name, text in after:
        prev = old.get(name, ABSENT)
        if prev != text:
            add(Change(f"<function>.{name}", CauseKind.FUNCTION_IDENTITY, prev, text,
                       Detail.BOUND_VALUE, name))
    for name, text in before:
        if name not in new:
            add(Change(f"<function>.{name}", CauseKind.FUNCTION_IDENTITY, text, ABSENT,
                       Detail.BOUND_VALUE, name))


def _config_text(value: Any) -> str:
    """A config value as a user sets it: ``'strict'``, not ``<NumpyDtypePromotion.STRICT: ...>``."""
    import enum

    if isinstance(value, enum.Enum):
        return safe_repr(value.value)
    return safe_repr(value)


def _static_changes(old: Signature, new: Signature, add: Any, add_structure: Any,
                    add_fallback: Any) -> None:
    # Keyed by kind too: a wrapper's argument ``n`` has a value and a structure.
    olds = {(s.kind, s.name): s for s in old.statics}
    news = {(s.kind, s.name): s for s in new.statics}
    for key, s in news.items():
        name = s.name
        prev = olds.get(key)
        if s.kind == GRAPH_NODE:  # a node of a library's graph (an nnx sub-module)
            if prev is None:
                add(_added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
            elif prev.type != s.type:
                add(Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr, s.repr, Detail.REPLACED))
            elif prev.repr != s.repr:
                add(Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr, s.repr))
            continue
        if s.kind == CauseKind.PYTREE_STRUCTURE:
            if s.fallback:
                if prev is not None:
                    add_fallback((name, prev.tree, s.tree))
            elif s.tree is None:  # a static attribute of a library's graph node (nnx)
                if prev is None:
                    add(_added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
                elif _static_changed(prev, s):
                    live = _live_values(prev, s) if prev.repr == s.repr else None
                    if live is not None:  # read field by field from the values themselves
                        _static_value_change(name, *live, add)
                    else:
                        add(_graph_change(name, prev, s))
            elif prev is None:
                add_structure(_added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
            elif _static_changed(prev, s):
                _tree_changes(name, prev.tree, s.tree, add_structure)
            continue
        if prev is None:
            add(_added(name, CauseKind.STATIC_ARGUMENT, s.repr))
        elif name == EXPORTED_PROGRAM:
            if _static_changed(prev, s):  # exported again: named by its argument types
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           f"exported for {_exported_inputs(prev)}",
                           f"another export, for {_exported_inputs(s)}", Detail.OTHER_EXPORT))
        elif prev.keyword != s.keyword:
            # JAX keys a static argument by how it was passed as well as by its value.
            same = not _static_value_changed(prev, s)
            add(Change(name, CauseKind.STATIC_ARGUMENT,
                       _passed(prev.keyword) + ("" if same else f" ({prev.repr})"),
                       _passed(s.keyword) + ("" if same else f" ({s.repr})"), Detail.MOVED))
        elif _static_changed(prev, s):
            if prev.type == s.type and s.type.endswith("Jaxpr"):
                # An eager scan/cond/while_loop: its body was traced again.
                add(Change(name, CauseKind.STATIC_ARGUMENT, "the earlier traced body",
                           "a newly traced body (a new function object, e.g. a lambda or "
                           "closure defined in the loop, or a body that traced differently)",
                           Detail.RETRACED_BODY))
            elif s.interned and prev.type == s.type:
                # JAX keeps one object per distinct value of this type: another object
                # is another value, named by what differs
                differs: list[Change] = []
                if not _field_changes(name, prev.fields, s.fields, differs.append):
                    differs.append(Change(
                        name, CauseKind.STATIC_ARGUMENT, prev.repr,
                        s.repr if s.repr != prev.repr else
                        f"another {s.type} object (JAX keeps one per distinct value: it "
                        "differs in something its text does not show)"))
                for change in differs:
                    add(Change(change.path, change.kind, change.before, change.after,
                               Detail.INTERNED, s.type))
            elif s.identity_hashed and prev.type == s.type and (
                    funcs := _functions(prev, s)) is not None:
                x, y = funcs
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                           "new function object, same source" if x.__code__ is y.__code__
                           else f"another function ({_function_site(y)})",
                           Detail.STATIC_FUNCTION))
            elif s.identity_hashed and prev.type == s.type:
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           f"{prev.repr} (a {prev.type} hashed by identity)",
                           f"new {s.type} instance (hashed by identity)",
                           Detail.IDENTITY_HASHED, s.type))
                # what else differs, read off both values: the fields that changed
                _field_changes(name, prev.fields, s.fields, lambda c: add(Change(
                    c.path, c.kind, c.before, c.after, Detail.FIELD_OF_IDENTITY)))
            elif prev.type == s.type and _field_changes(name, prev.fields, s.fields, add):
                pass  # a dataclass-like value: one change per field that differs
            elif prev.repr == s.repr and prev.detail and s.detail and prev.detail != s.detail:
                # texts that part after the cut: shown where they part
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           *_where_texts_differ(prev.detail, s.detail, len(s.repr))))
            elif prev.repr == s.repr:
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                           f"{s.repr} (looks the same but is not == to it or hashes "
                           "differently, e.g. a NaN)", Detail.LOOKS_EQUAL))
            else:
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr, s.repr))
    for key in olds.keys() - news.keys():
        gone = olds[key]
        if gone.kind == GRAPH_NODE or (gone.kind == CauseKind.PYTREE_STRUCTURE
                                       and gone.tree is None and not gone.fallback):
            add(_removed(gone.name, CauseKind.PYTREE_STRUCTURE, gone.repr))
        elif gone.kind == CauseKind.PYTREE_STRUCTURE:
            add_structure(_removed(gone.name, CauseKind.PYTREE_STRUCTURE, gone.repr))
        else:
            add(_removed(gone.name, CauseKind.STATIC_ARGUMENT, gone.repr))


def _field_changes(name: str, before: tuple[tuple[str, str], ...],
                   after: tuple[tuple[str, str], ...], add: Any) -> bool:
    """``cfg.lr: 0.1 -> 0.2`` for each field that differs; whether any did."""
    if not (before and after) or before == after:
        return False
    old = dict(before)
    new = dict(after)
    found = False
    for key, text in after:
        prev = old.get(key)
        if prev is None:
            add(_added(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, text))
        elif prev != text:
            add(Change(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, prev, text))
        else:
            continue
        found = True
    for key, text in before:
        if key not in new:
            add(_removed(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, text))
            found = True
    return found


def _passed(keyword: bool) -> str:
    return "passed by keyword" if keyword else "passed positionally"


def _merge_traced_and_static(changes: list[Change]) -> list[Change]:
    """An argument that went from traced array to static value (or back) is one change.

    Wrappers that make every non-array leaf static (``equinox.filter_jit``)
    report ``scale=2.0`` after ``scale=jnp.float32(2)`` as a leaf gone and a
    static value come.
    """
    ends = (Detail.ADDED, Detail.REMOVED)
    leaves = {c.path: c for c in changes if c.kind == CauseKind.PYTREE_STRUCTURE
              and c.detail in ends}
    statics = {c.path: c for c in changes if c.kind == CauseKind.STATIC_ARGUMENT
               and c.detail in ends}
    both = {p for p in leaves.keys() & statics.keys()
            if (leaves[p].detail is Detail.REMOVED) == (statics[p].detail is Detail.ADDED)}
    if not both:
        return changes
    out = []
    for c in changes:
        if c.path not in both:
            out.append(c)
        elif c.kind == CauseKind.STATIC_ARGUMENT:
            leaf = leaves[c.path]
            if c.detail is Detail.ADDED:
                out.append(Change(c.path, CauseKind.STATIC_ARGUMENT, f"{leaf.before} (traced)",
                                  f"{c.after} (static)", Detail.TRACED_STATIC))
            else:
                out.append(Change(c.path, CauseKind.STATIC_ARGUMENT, f"{c.before} (static)",
                                  f"{leaf.after} (traced)", Detail.TRACED_STATIC))
    return out


def _tree_changes(path: str, a: Any, b: Any, add: Any) -> None:
    """Where two argument trees (treedefs a wrapper passed as static) part."""
    if a is None or b is None or not hasattr(a, "node_data") or not hasattr(b, "node_data"):
        add(Change(path, CauseKind.PYTREE_STRUCTURE, safe_repr(a), safe_repr(b)))
        return
    if not _safe_ne(a, b):
        return
    da = None if _is_leaf(a) else a.node_data()
    db = None if _is_leaf(b) else b.node_data()
    if da is None or db is None or da[0] is not db[0] or (
            da[0] is not dict and len(a.children()) != len(b.children())):
        if da is not None and db is not None and _tree_fields_changed(path, a, b, da[0],
                                                                      db[0], add):
            return
        add(Change(path, CauseKind.PYTREE_STRUCTURE, _tree_text(a, da), _tree_text(b, db)))
        return
    if da[0] is dict:
        kb = dict(zip(db[1], b.children()))
        ka = dict(zip(da[1], a.children()))
        for k, child in ka.items():
            if k not in kb:
                add(_removed(f"{path}[{k!r}]", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
            else:
                _tree_changes(f"{path}[{k!r}]", child, kb[k], add)
        for k, child in kb.items():
            if k not in ka:
                add(_added(f"{path}[{k!r}]", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
        return
    if _safe_ne(da[1], db[1]):
        _aux_changes(path, da[0], da[1], db[1], add)
    for name, x, y in zip(_child_names(b, path, db), a.children(), b.children()):
        _tree_changes(name, x, y, add)


def _tree_fields_changed(path: str, a: Any, b: Any, type_a: Any, type_b: Any,
                         add: Any) -> bool:
    """``_fields_changed`` for two bare treedefs (a wrapper's static structure)."""
    if type_a is not type_b and getattr(type_a, "__qualname__", None) != getattr(
            type_b, "__qualname__", type_a):
        return False
    ca, cb = a.children(), b.children()
    fa, fb = _node_fields(type_a, len(ca)), _node_fields(type_b, len(cb))
    if fa is None or fb is None or (fa == fb and type_a is type_b):
        return False
    if fa == fb:
        add(Change(path, CauseKind.PYTREE_STRUCTURE, f"{type_name_of(type_a)} (a class)",
                   f"another class {type_name_of(type_b)} with the same fields (the class "
                   "was defined again: JAX keys a tree by its node classes)"))
    by_field = dict(zip(fb, cb))
    for f, child in zip(fa, ca):
        if f in by_field:
            _tree_changes(f"{path}.{f}", child, by_field[f], add)
        else:
            add(_removed(f"{path}.{f}", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
    for f, child in zip(fb, cb):
        if f not in set(fa):
            add(_added(f"{path}.{f}", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
    return True


def _tree_text(t: Any, data: Any = None) -> str:
    if _is_leaf(t):
        return "leaf"
    data = data or t.node_data()
    node_type = data[0] if data else None
    if node_type is type(None):
        return "None"
    return f"{getattr(node_type, '__name__', 'node')} with {t.num_leaves} leaves"


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


def _leaf_change(path: str, old_aval: Any, new_aval: Any, before: str, after: str) -> Change:
    """An argument's abstract type changed; a PRNG key of another style or
    implementation is told apart (its fix is not a cast)."""
    kind = _leaf_kind(old_aval, new_aval)
    if kind is CauseKind.DTYPE:
        impl_a, impl_b = _jax_read.prng_key_impl(old_aval), _jax_read.prng_key_impl(new_aval)
        if impl_a is not None and impl_b is not None:
            return Change(path, kind, before, after, Detail.KEY_IMPL)
        if (impl_a is None) != (impl_b is None) and _jax_read.is_raw_key_data(
                old_aval if impl_a is None else new_aval):
            return Change(path, kind, before, after, Detail.KEY_STYLE)
    return Change(path, kind, before, after)


def _leaf_changes(old: Signature, new: Signature, add: Any) -> None:
    ot, nt, op, np_ = old.types, new.types, old.placements, new.placements
    changed = sorted({*_differing(ot, nt), *_differing(op, np_)})
    for i in changed:
        if ot[i] != nt[i]:
            add(_leaf_change(new.paths[i], old.avals[i], new.avals[i], ot[i], nt[i]))
        else:
            add(_placement_change(new.paths[i], op[i], np_[i]))


def _placement_change(path: str, before: Placement, after: Placement) -> Change:
    kind = (CauseKind.SHARDING if before.sharded or after.sharded
            else CauseKind.DEVICE_PLACEMENT)
    return Change(path, kind, before.text, after.text)


# --- pytree structure ------------------------------------------------------------

def _is_leaf(t: Any) -> bool:
    return bool(t.num_nodes == 1 and t.num_leaves == 1)


def _summary(t: Any, sig: Signature, offset: int) -> str:
    if _is_leaf(t):
        return sig.types[offset] if offset < len(sig.types) else "leaf"
    data = t.node_data()
    node_type = data[0] if data else None
    if node_type is type(None):
        return "None"
    name = getattr(node_type, "__name__", "node")
    if node_type is dict:
        return truncate(f"dict with keys {list(data[1])}")
    return f"{name} with {t.num_leaves} leaves"


def _child_names(t: Any, path: str, data: Any) -> list[str]:
    node_type, aux = data
    n = len(t.children())
    if node_type is dict and aux is not None:
        return [f"{path}[{k!r}]" for k in aux]
    if node_type is not dict and node_type is not tuple and node_type is not list:
        nnx = _wrappers.nnx_pytree_aux(node_type, aux)
        if nnx is not None and len(nnx[0]) == n:
            return [_wrappers.child_path(path, k) for k in nnx[0]]
        if n == 1 and _wrappers.is_nnx_variable(node_type):
            return [f"{path}.value"]
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n:
        return [f"{path}.{f}" for f in fields]
    data_fields = _data_field_names(node_type, n)
    if data_fields is not None:
        return [f"{path}.{f}" for f in data_fields]
    return [f"{path}[{i}]" for i in range(n)]


def _data_field_names(node_type: Any, n: int) -> list[str] | None:
    """Names of a dataclass pytree's children (flax.struct, equinox Modules,
    register_dataclass): its fields that are not static, when they are ``n``."""
    import dataclasses

    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return None
    try:
        names = [f.name for f in dataclasses.fields(node_type)
                 if not (f.metadata.get("static") or f.metadata.get("pytree_node") is False)]
    except Exception:
        return None
    return names if len(names) == n else None


def _walk(a: Any, b: Any, path: str, oa: int, ob: int, old: Signature, new: Signature,
          add: Any, names_a: list[str] | None = None, names_b: list[str] | None = None) -> None:
    if _is_leaf(a) and _is_leaf(b):
        if oa < len(old.types) and ob < len(new.types):
            if old.types[oa] != new.types[ob]:
                add(_leaf_change(path, old.avals[oa], new.avals[ob], old.types[oa],
                                 new.types[ob]))
            elif old.placements[oa] != new.placements[ob]:
                add(_placement_change(path, old.placements[oa], new.placements[ob]))
        return
    da = None if _is_leaf(a) else a.node_data()
    db = None if _is_leaf(b) else b.node_data()
    keyed = da is not None and db is not None and da[0] is db[0] and (
        da[0] is dict or _wrappers.nnx_pytree_aux(da[0], da[1]) is not None)
    if da is None or db is None or da[0] is not db[0] or (
            not keyed and len(a.children()) != len(b.children())):
        if da is not None and db is not None and _fields_changed(
                a, b, path, oa, ob, da[0], db[0], old, new, add):
            return
        add(Change(path or "<arguments>", CauseKind.PYTREE_STRUCTURE,
                   _summary(a, old, oa), _summary(b, new, ob)))
        return
    if da[0] is not dict and _safe_ne(da[1], db[1]):
        # Same node type and arity, other auxiliary data: the static fields of a
        # dataclass-like node (flax.struct, equinox, register_dataclass) changed.
        _aux_changes(path or "<arguments>", da[0], da[1], db[1], add)
    ca, cb = a.children(), b.children()
    na = names_a or _child_names(a, path, da)
    nb = names_b or _child_names(b, path, db)
    offs_a, offs_b = _offsets(ca, oa), _offsets(cb, ob)
    if keyed:  # children matched by key: a dict's, an nnx Module's attributes
        index_b = {n: i for i, n in enumerate(nb)}
        seen = set()
        for i, n in enumerate(na):
            j = index_b.get(n)
            if j is None:
                add(_removed(n, CauseKind.PYTREE_STRUCTURE, _summary(ca[i], old, offs_a[i])))
            else:
                seen.add(j)
                _walk(ca[i], cb[j], n, offs_a[i], offs_b[j], old, new, add)
        for j, n in enumerate(nb):
            if j not in seen:
                add(_added(n, CauseKind.PYTREE_STRUCTURE, _summary(cb[j], new, offs_b[j])))
        return
    for i, (x, y) in enumerate(zip(ca, cb)):
        _walk(x, y, nb[i], offs_a[i], offs_b[i], old, new, add)


def _node_fields(node_type: Any, n: int) -> list[str] | None:
    """The field name of each of a NamedTuple's or dataclass pytree's ``n`` children."""
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n and all(isinstance(f, str) for f in fields):
        return list(fields)
    return _data_field_names(node_type, n)


def _fields_changed(a: Any, b: Any, path: str, oa: int, ob: int, type_a: Any, type_b: Any,
                    old: Signature, new: Signature, add: Any) -> bool:
    """A node with field names (a NamedTuple, a dataclass pytree) that gained or lost
    fields, or a class of the same name defined again: named field by field.
    ``False`` when the two nodes are not one class's versions (then summarised whole)."""
    if type_a is not type_b and getattr(type_a, "__qualname__", None) != getattr(
            type_b, "__qualname__", type_a):
        return False
    ca, cb = a.children(), b.children()
    fa, fb = _node_fields(type_a, len(ca)), _node_fields(type_b, len(cb))
    if fa is None or fb is None:
        return False
    head = path or "<arguments>"
    if fa == fb:  # the same fields: only the class object differs
        if type_a is type_b:
            return False
        add(Change(head, CauseKind.PYTREE_STRUCTURE, f"{type_name_of(type_a)} (a class)",
                   f"another class {type_name_of(type_b)} with the same fields (the class "
                   "was defined again: JAX keys a tree by its node classes)"))
    offs_a, offs_b = _offsets(ca, oa), _offsets(cb, ob)
    index_b = {f: j for j, f in enumerate(fb)}
    for i, f in enumerate(fa):
        j = index_b.get(f)
        if j is None:
            add(_removed(f"{head}.{f}", CauseKind.PYTREE_STRUCTURE,
                         _summary(ca[i], old, offs_a[i])))
        else:
            _walk(ca[i], cb[j], f"{head}.{f}", offs_a[i], offs_b[j], old, new, add)
    known = set(fa)
    for j, f in enumerate(fb):
        if f not in known:
            add(_added(f"{head}.{f}", CauseKind.PYTREE_STRUCTURE,
                       _summary(cb[j], new, offs_b[j])))
    return True


def type_name_of(node_type: Any) -> str:
    module = getattr(node_type, "__module__", "") or ""
    qual = getattr(node_type, "__qualname__", None) or getattr(node_type, "__name__", "node")
    return str(qual) if module in ("builtins", "__main__", "") else f"{module}.{qual}"


def _static_field_names(node_type: Any, n: int) -> list[str] | None:
    """Names of a dataclass node's static fields, when they account for its aux data."""
    import dataclasses

    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return None
    try:
        fields = dataclasses.fields(node_type)
    except Exception:
        return None
    static = [f.name for f in fields
              if f.metadata.get("static") or f.metadata.get("pytree_node") is False]
    if len(static) == n:
        return static
    registered = _jax_read.dataclass_meta_fields(node_type)  # meta_fields=[...]
    if registered is not None and len(registered) == n:
        return list(registered)
    # equinox keeps one entry per field, a placeholder for the dynamic ones
    return [f.name for f in fields] if len(fields) == n else None


def _aux_changes(path: str, node_type: Any, before: Any, after: Any, add: Any) -> None:
    name = getattr(node_type, "__name__", "node")
    nnx_a = _wrappers.nnx_pytree_aux(node_type, before)
    nnx_b = _wrappers.nnx_pytree_aux(node_type, after) if nnx_a is not None else None
    if nnx_a is not None and nnx_b is not None:
        # An nnx Module as a pytree: its non-array attributes, by name.
        _keyed_static_changes(path, nnx_a[1], nnx_b[1], add)
        return
    if _wrappers.is_graphdef(before) and _wrappers.is_graphdef(after):
        if _graphdef_changes(path, before, after, add):
            return
    if not (isinstance(before, tuple) and isinstance(after, tuple)
            and len(before) == len(after)):
        if isinstance(node_type, type) and issubclass(node_type, functools.partial):
            # jax.tree_util.Partial: its static data is the function it wraps
            _static_value_change(f"{path}.func", before, after, add)
            return
        text_a, text_b = safe_repr(before), safe_repr(after)
        if text_a == text_b:  # the same text, not equal: say why
            _static_value_change(f"{path}.<static data>", before, after, add)
            return
        add(Change(path, CauseKind.PYTREE_STRUCTURE, f"{name} with static data {text_a}",
                   f"{name} with static data {text_b}"))
        return
    names = _static_field_names(node_type, len(after))
    for i, (x, y) in enumerate(zip(before, after)):
        if not _safe_ne(x, y):
            continue
        if (_wrappers.is_graphdef(x) and _wrappers.is_graphdef(y)
                and _graphdef_changes(path, x, y, add)):
            continue  # an nnx graph definition kept as static data: read back
        field = names[i] if names else f"<static {i}>"
        _static_value_change(f"{path}.{field}", x, y, add)


def _static_value_change(path: str, x: Any, y: Any, add: Any, depth: int = 0) -> None:
    """``path: static X -> static Y`` for one static value of a pytree node; a
    re-created function named as such; a NamedTuple or dataclass by the fields
    that differ (``state.tx.init``)."""
    if type(x) is type(y):
        if isinstance(x, types.FunctionType):
            same = x.__code__ is y.__code__
            add(Change(path, CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(x, name=_last_name(path))}",
                       "static new function object, same source" if same else
                       f"static another function ({_function_site(y)})",
                       Detail.STATIC_FUNCTION))
            return
        if isinstance(x, types.MethodType) and x.__func__ is y.__func__:
            add(Change(path, CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(x, name=_last_name(path))}",
                       f"static new bound method object (bound to another "
                       f"{type_name(y.__self__)} object)", Detail.STATIC_FUNCTION))
            return
        if depth < 2:
            fields = _differing_fields(x, y)
            if fields:
                for name, a, b in fields:
                    _static_value_change(f"{path}.{name}", a, b, add, depth + 1)
                return
    x_text, y_text = _where_they_differ(x, y, name=_last_name(path))
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


def _function_site(fun: Any) -> str:
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
            if _safe_ne(a, b):
                out.append((name, a, b))
    except Exception:
        return []
    return out


_CONTEXT = 24  # characters kept before the first difference of two long reprs


def _last_name(path: str) -> str:
    """The field, attribute or key a path ends in: ``lr`` for ``cfg.opt.lr``."""
    parts = [p for p in re.split(r"[.\[\]'\"]", path) if p]
    return parts[-1] if parts else path


def _where_they_differ(x: Any, y: Any, limit: int = 120, name: str | None = None,
                       ) -> tuple[str, str]:
    """Two bounded one-line reprs that show where long reprs part, not only their
    common start: ``...'feature_39')`` vs ``...'other')``."""
    return _where_texts_differ(one_line_repr(x, 2000, name=name),
                               one_line_repr(y, 2000, name=name), limit)


def _where_texts_differ(a: str, b: str, limit: int = 120) -> tuple[str, str]:
    """``a`` and ``b`` cut to ``limit``, around the first character where they part."""
    if len(a) <= limit and len(b) <= limit:
        return a, b
    i = next((k for k, (p, q) in enumerate(zip(a, b)) if p != q), min(len(a), len(b)))
    if i < limit - _CONTEXT:
        return truncate(a, limit), truncate(b, limit)
    start = i - _CONTEXT
    return ("..." + truncate(a[start:], limit - 3), "..." + truncate(b[start:], limit - 3))


def _keyed_static_changes(path: str, before: dict[Any, Any], after: dict[Any, Any],
                          add: Any) -> None:
    """Static attributes by name: changed, added or removed."""
    _keyed_changes(before, after, add, lambda key: _wrappers.child_path(path, key), str)


def _keyed_changes(before: dict[Any, Any], after: dict[Any, Any], add: Any,
                   path_of: Any, name_of: Any) -> None:
    """Static values by key, changed, added or removed; ``path_of(key)`` names where,
    ``name_of(key)`` the name the scrubbing rules see."""
    for key, y in after.items():
        if key not in before:
            add(_added(path_of(key), CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(y, name=name_of(key))}"))
        elif _safe_ne(before[key], y):
            _static_value_change(path_of(key), before[key], y, add)
    for key, x in before.items():
        if key not in after:
            add(_removed(path_of(key), CauseKind.PYTREE_STRUCTURE,
                         f"static {one_line_repr(x, name=name_of(key))}"))


def _graphdef_changes(path: str, before: Any, after: Any, add: Any) -> bool:
    """Two nnx graph definitions of the module at ``path``, read back and compared:
    sub-modules and static attributes by name. ``False`` when either is unreadable."""
    ga = _wrappers.read_graphdef(before, path)
    gb = _wrappers.read_graphdef(after, path)
    if ga is None or gb is None:
        return False
    na = {p: (t, d) for p, t, d in ga.nodes}
    found = False
    for p, t, d in gb.nodes:
        prev = na.get(p)
        if prev is None:
            add(_added(p, CauseKind.PYTREE_STRUCTURE, d))
        elif prev[0] != t:
            add(Change(p, CauseKind.PYTREE_STRUCTURE, prev[1], d, Detail.REPLACED))
        elif prev[1] != d:
            add(Change(p, CauseKind.PYTREE_STRUCTURE, prev[1], d))
        else:
            continue
        found = True
    gone = na.keys() - {p for p, _, _ in gb.nodes}
    for p in sorted(gone):
        add(_removed(p, CauseKind.PYTREE_STRUCTURE, na[p][1]))
    sa, sb = dict(ga.statics), dict(gb.statics)
    counted: list[Change] = []
    _keyed_paths_changes(sa, sb, counted.append)
    for change in counted:
        add(change)
    return found or bool(gone) or bool(counted)


def _keyed_paths_changes(before: dict[str, Any], after: dict[str, Any], add: Any) -> None:
    _keyed_changes(before, after, add, lambda p: p, _last_name)


def _offsets(children: Sequence[Any], start: int) -> list[int]:
    out = []
    for c in children:
        out.append(start)
        start += c.num_leaves
    return out


def _structure_changes(old: Signature, new: Signature, add: Any) -> None:
    """Walk both argument trees together and report where they part."""
    found: list[Change] = []
    positional: set[str] = set()
    try:
        positional = _walk_arguments(old, new, found.append)
    except Exception:
        found = [Change("<arguments>", CauseKind.PYTREE_STRUCTURE,
                        safe_repr(old.treedef, 200), safe_repr(new.treedef, 200))]
    for change in _merge_moved_arguments(found, positional):
        add(change)


def _merge_moved_arguments(changes: list[Change], positional_before: set[str],
                           ) -> list[Change]:
    """``x`` gone from the positionals and new among the keywords (or back) is one change.

    ``positional_before``: the names passed positionally in the earlier call,
    which tell the direction.
    """
    removed = {c.path: c for c in changes if c.detail is Detail.REMOVED}
    added = {c.path: c for c in changes if c.detail is Detail.ADDED}
    moved = removed.keys() & added.keys()
    if not moved:
        return changes
    out = []
    for c in changes:
        if c.path in moved:
            if c.detail is Detail.REMOVED:
                was_keyword = c.path not in positional_before
                out.append(Change(c.path, CauseKind.PYTREE_STRUCTURE,
                                  f"{_passed(was_keyword)} ({c.before})",
                                  f"{_passed(not was_keyword)} ({added[c.path].after})",
                                  Detail.MOVED))
            continue
        out.append(c)
    return out


def _walk_arguments(old: Signature, new: Signature, add: Any) -> set[str]:
    """Report where the argument trees part; returns the earlier call's positional names."""
    a, b = old.treedef, new.treedef
    # The root is ``(positional_args, kwargs)``: name the positional ones.
    (pa, ka), (pb, kb) = a.children(), b.children()
    names_a = list(old.top_names) + [f"args[{i}]" for i in range(
        len(old.top_names), len(pa.children()))]
    names_b = list(new.top_names) + [f"args[{i}]" for i in range(
        len(new.top_names), len(pb.children()))]
    ca, cb = pa.children(), pb.children()
    offs_a, offs_b = _offsets(ca, 0), _offsets(cb, 0)
    if len(ca) != len(cb):
        common = min(len(ca), len(cb))
        for i in range(common, len(ca)):
            add(_removed(names_a[i], CauseKind.PYTREE_STRUCTURE, _summary(ca[i], old, offs_a[i])))
        for i in range(common, len(cb)):
            add(_added(names_b[i], CauseKind.PYTREE_STRUCTURE, _summary(cb[i], new, offs_b[i])))
    for i in range(min(len(ca), len(cb))):
        _walk(ca[i], cb[i], names_b[i], offs_a[i], offs_b[i], old, new, add)
    _walk(ka, kb, "", pa.num_leaves, pb.num_leaves, old, new, add,
          *_kwarg_names(ka, kb))
    return set(names_a[:len(ca)])


def _kwarg_names(ka: Any, kb: Any) -> tuple[list[str] | None, list[str] | None]:
    def names(t: Any) -> list[str] | None:
        data = None if _is_leaf(t) else t.node_data()
        if data and data[0] is dict and data[1] is not None:
            return [str(k) for k in data[1]]
        return None
    return names(ka), names(kb)
