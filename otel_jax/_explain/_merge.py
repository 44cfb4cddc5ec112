"""Passes that fold related changes into the one a person would name.

A path gone and back as something else, an argument that went from traced to
static, one passed positionally then by keyword, and changes implied by a path
that appeared or went above them.
"""

from __future__ import annotations

from .._core._vocab import CauseKind
from ._model import Change, Detail
from ._parts import passed


def merge_gone_and_back(changes: list[Change]) -> list[Change]:
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


def drop_implied(changes: list[Change]) -> list[Change]:
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


def merge_traced_and_static(changes: list[Change]) -> list[Change]:
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


def merge_moved_arguments(changes: list[Change], positional_before: set[str],
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
                                  f"{passed(was_keyword)} ({c.before})",
                                  f"{passed(not was_keyword)} ({added[c.path].after})",
                                  Detail.MOVED))
            continue
        out.append(c)
    return out
