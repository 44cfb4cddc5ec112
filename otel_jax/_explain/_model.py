"""The diff's data model: one :class:`Change` per difference, a :class:`Diff` of them.

A change carries its path, its cause kind, the two bounded texts and a
:class:`Detail` that says what sort of difference it is; the cause's wording and
the merge passes decide from the detail, never from the texts.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass

from .._core._vocab import ABSENT, DIFF_TRUNCATED, DIFFERENCE_KINDS, CauseKind, DiffKey

_RANK = {k: i for i, k in enumerate(DIFFERENCE_KINDS)}

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
    TRANSFORMATION_PARAMETERS = "transformation_parameters"  # grad(argnums=0) vs (0, 1)
    IDENTITY_HASHED = "identity_hashed"  # a new instance of a type hashed by identity
    LOOKS_EQUAL = "looks_equal"  # equal reprs; not == to itself, or compared by identity
    PRINTS_SAME = "prints_same"  # equal reprs, told apart; the values were not held to say why
    UNSHOWN_VALUE = "unshown_value"  # equal reprs, another value of a value-compared type
    MUTATED = "mutated"  # the same static object, its hash or text changed since
    EQUAL_HASHED_APART = "equal_hashed_apart"  # == to the earlier value, hashed/typed apart
    RETRACED_BODY = "retraced_body"  # an eager control-flow body traced again
    MOVED = "moved"  # passed positionally vs by keyword
    TRACED_STATIC = "traced_static"  # a traced array vs a static value
    REPLACED = "replaced"  # a graph node became another type of node (or a reference)
    STATIC_FUNCTION = "static_function"  # a static field's function object re-created
    STATIC_FIELD = "static_field"  # a static field of a module/dataclass pytree changed
    BOUND_VALUE = "bound_value"  # what a new partial/closure binds (``subject``: the name)
    INTERNED = "interned"  # another value of a type JAX keeps one object per value of
    FIELD_OF_IDENTITY = "field_of_identity"  # a field of a new identity-hashed instance
    FUNCTION_FIELD = "function_field"  # a static value's field holds a new function object
    OTHER_EXPORT = "other_export"  # another jax.export program of the function
    KEY_STYLE = "key_style"  # a typed PRNG key vs a legacy uint32 one
    COMPILE_OPTIONS = "compile_options"  # compiler options given at compile time (AOT)
    KEY_IMPL = "key_impl"  # typed PRNG keys of two implementations (threefry vs rbg)
    # no change at all (an ``unknown`` cause's hint only):
    CACHE_CLEARED = "cache_cleared"  # equal signatures, jax.clear_caches() called between
    NOT_FOUND = "not_found"  # equal signatures, no difference and no cache clear seen


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


#: Where a diff pass reports a change it found: the diff's own collector (which
#: counts every change and keeps the first ``MAX_CHANGES``), or a list's ``append``
#: for a pass whose changes are merged or filtered before they are reported.
AddChange = Callable[[Change], None]


def _truncated(rest: int) -> str:
    return json.dumps({DiffKey.PATH: "", DiffKey.KIND: DIFF_TRUNCATED, DiffKey.BEFORE: "",
                       DiffKey.AFTER: f"{rest} more changes not shown"})


def added(path: str, kind: CauseKind, after: str) -> Change:
    """Something at ``path`` that the earlier signature did not have."""
    return Change(path, kind, ABSENT, after, Detail.ADDED)


def removed(path: str, kind: CauseKind, before: str) -> Change:
    """Something at ``path`` that the earlier signature had and this one has not."""
    return Change(path, kind, before, ABSENT, Detail.REMOVED)
