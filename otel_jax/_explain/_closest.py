"""Which earlier signature a compile is closest to: a cheap distance and the search.

Cost depends only on the two signatures being compared (their leaf count) and on
the bounded history of *this* function, never on how many other functions the
process has compiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._capture._leaves import differing
from .._capture._signature import (
    Placement,
    Signature,
    StaticArg,
)
from .._core._vocab import ABSENT
from ._same import (
    safe_ne,
    same_function,
    static_changed,
    transformations_differ,
    treedef_equal,
)

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
    if old.program_pass != new.program_pass:
        # grad's backward program is no recompile of its forward one: each pass is
        # compared with earlier programs of its own pass, another pass only when none is
        return _OTHER_PROGRAM // 2
    if old.program != new.program:
        if old.program_pass and old.program_serial != new.program_serial:
            # the same pass of a function re-created with other bound values, whose
            # program differs with them: closer than any other pass
            return _OTHER_PROGRAM // 8 + (_bound_distance(old, new) or 1)
        return _OTHER_PROGRAM // 4  # another program of the same transformation
    # Whole differences, doubled on return. Each part is compared whole first:
    # equal parts (the common case) cost one comparison instead of a walk.
    d = 0
    fine = 0
    if transformations_differ(old, new):
        d += 1
        fine += 1
    if not same_function(old, new):
        d += 1
        fine += 1 + _bound_distance(old, new)
    if old.options != new.options:
        n = sum(1 for (_, a), (_, b) in zip(old.options, new.options) if a != b)
        d += n
        fine += n
    if old.compiler_options != new.compiler_options:  # given to Lowered.compile
        d += 1
        fine += 1
    if safe_ne(old.context, new.context):
        n = sum(1 for (_, a), (_, b) in zip(old.context, new.context) if safe_ne(a, b))
        d += n
        fine += n
    if old.statics != new.statics:
        n, f = _static_distance(old, new)
        d += n
        fine += f
    if treedef_equal(old, new):
        moved = differing(old.placements, new.placements)
        d += len(moved)
        fine += sum(_placement_distance(old.placements[i], new.placements[i]) for i in moved)
        # Count each differing aspect (dtype, shape, weak type) so that a
        # signature differing in one aspect is closer than one differing in two;
        # inside an aspect, count dimensions (and sharding entries).
        leaves = differing(old.types, new.types)
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
        elif static_changed(prev, s):
            d += 1
            fine += _fields_distance(prev, s)
    gone = len(olds.keys() - {(s.kind, s.name) for s in new.statics})
    return d + gone, fine + gone


def _fields_distance(old: StaticArg, new: StaticArg) -> int:
    if not (old.fields and new.fields and old.type == new.type):
        return 1
    a, b = dict(old.fields), dict(new.fields)
    n = sum(1 for k, v in b.items() if a.get(k, ABSENT) != v) + len(a.keys() - b.keys())
    if old.field_ids != new.field_ids:  # fields that read the same, other objects
        ids = {path: number for path, number, _, _ in old.field_ids}
        n += sum(1 for path, number, _, _ in new.field_ids
                 if ids.get(path, number) != number and a.get(path) == b.get(path))
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
        if sha is not shb and safe_ne(sha, shb):
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
            and old.program_pass == new.program_pass and not transformations_differ(old, new)
            and old.types == new.types and old.placements == new.placements
            and old.paths == new.paths and same_function(old, new)
            and old.options == new.options and not safe_ne(old.context, new.context)
            and old.statics == new.statics and treedef_equal(old, new))
