"""Why a compile happened, in words: the cause kind, one line a person reads, and a fix hint.

One entry point, :func:`explain`. The structured diff (``_diff``) decides
*what* differs; this module only words it, from the diff's structure
(:class:`~otel_jax._explain._diff.Detail`), never from the diff's own texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._capture._signature import Signature
from .._capture._source import FunctionInfo
from .._core._vocab import CauseKind
from . import _diff
from ._diff import Change, Detail, Diff
from ._hints import hint_for
from ._same import plainly_equal

NO_DIFF = Diff((), 0)


@dataclass(frozen=True, slots=True)
class Cause:
    """The explanation of one compile."""

    kind: CauseKind
    text: str
    diff: Diff = NO_DIFF
    compared_with: int | None = None  # the earlier compile (its count) the diff is against
    hint: str = ""


def explain(info: FunctionInfo, count: int, earlier: Sequence[tuple[int, Signature]],
            signature: Signature) -> Cause:
    """The cause of compile ``count`` of ``info``, against the closest earlier signature.

    ``earlier`` holds ``(count, signature)`` pairs, oldest first. The diff may
    raise on hostile values: the caller runs this under its fail-open guard
    and falls back to :func:`diff_failed`.
    """
    transformed = bool(signature.transform)
    if count == 1:
        return _cause(CauseKind.FIRST_COMPILE, f"first compilation of {info.qualname}")
    if not signature.captured:
        return _cause(CauseKind.UNKNOWN,
                      "signature not captured for this compile (no jit dispatch miss seen: a "
                      "compile JAX started without a jit call, or JAX internals that moved)")
    if not earlier:
        return _cause(CauseKind.UNKNOWN, f"compile #{count} of {info.qualname}, but no earlier "
                      "signature is kept to compare with")
    found = _diff.closest([s for _, s in earlier], signature)
    if found is None:
        return _cause(CauseKind.UNKNOWN, f"compile #{count} of {info.qualname}, but no earlier "
                      "signature was captured to compare with")
    index, old = found
    d = _diff.diff(old, signature)
    compared = earlier[index][0]
    if not d.changes:
        return _same_signature(old, signature, d, compared)
    top = _top(d)
    return _cause(d.kind, describe(d), d, compared, transformed=transformed,
                  detail=_checked_detail(top, earlier, signature),
                  transformation=signature.transformation)


def _same_signature(old: Signature, new: Signature, d: Diff, compared: int) -> Cause:
    """Two equal signatures: a cache clear when one was seen between them, else said
    plainly that the difference was not found (never a guessed eviction)."""
    if new.transform:
        same = (f"same transformed program as compile #{compared} (argument types, program "
                "shape" + (", transformations" if new.transformation else "") + " and "
                "tracing context all equal)")
    else:
        same = (f"same signature as compile #{compared} (arguments, static arguments, "
                "pytree, tracing context, jit options and function object all equal)")
    if 0 <= old.cache_clears < new.cache_clears:
        n = new.cache_clears - old.cache_clears
        return _cause(CauseKind.UNKNOWN, f"{same}; jax.clear_caches() was called "
                      f"{'once' if n == 1 else f'{n} times'} since, which dropped the "
                      "compiled program", d, compared, detail=Detail.CACHE_CLEARED.value)
    seen = ("no jax.clear_caches() call was seen" if new.cache_clears >= 0
            else "jax.clear_caches() calls are not watched on this JAX")
    return _cause(CauseKind.UNKNOWN, f"{same}: the difference was not found ({seen})", d,
                  compared, detail=Detail.NOT_FOUND.value)


def history_failed() -> Cause:
    """The cause when the function's history could not be read (an internal error)."""
    return _cause(CauseKind.UNKNOWN, "compile count and earlier signatures unavailable "
                  "(an internal error; see the otel_jax warning)")


def diff_failed(exc: BaseException, compared: int) -> Cause:
    """The cause when comparing signatures failed (a hostile ``__eq__``, say)."""
    return _cause(CauseKind.UNKNOWN, f"cause diff failed ({type(exc).__name__}); compared "
                  f"{compared} earlier signatures")


def _cause(kind: CauseKind, text: str, diff: Diff = NO_DIFF, compared: int | None = None,
           transformed: bool = False, detail: str | None = None,
           transformation: str = "") -> Cause:
    return Cause(kind, text, diff, compared,
                 hint_for(kind, transformed=transformed, detail=detail,
                          transformation=transformation))


def _checked_detail(top: Change, earlier: Sequence[tuple[int, Signature]],
                    signature: Signature) -> str:
    """The top change's detail, checked against the function's whole history where its
    hint makes a claim the history can contradict: "an equal value hits the cache" is
    not said of a static value == to one compiled before under another type or hash
    (the closest earlier signature may hold a third value)."""
    if top.kind == CauseKind.STATIC_ARGUMENT and top.detail in (Detail.VALUE,
                                                                 Detail.UNSHOWN_VALUE):
        if _equal_value_compiled_before(top.path, earlier, signature):
            return Detail.EQUAL_HASHED_APART.value
    return top.detail.value


def _equal_value_compiled_before(name: str, earlier: Sequence[tuple[int, Signature]],
                                 signature: Signature) -> bool:
    new = next((s for s in signature.statics if s.name == name and s.value is not None), None)
    value = new.value.get() if new is not None and new.value is not None else None
    if new is None or value is None:
        return False
    for _, old_signature in earlier:
        old = next((s for s in old_signature.statics
                    if s.name == name and s.kind is new.kind), None)
        if old is None or old.value is None or (old.type, old.hash) == (new.type, new.hash):
            continue
        before = old.value.get()
        if before is not None and before is not value and plainly_equal(before, value):
            return True
    return False


def _top(d: Diff) -> Change:
    """The most significant change: the first one of the diff's kind."""
    kind = d.kind
    return next(c for c in d.changes if c.kind == kind)


def describe(d: Diff) -> str:
    """``x: f32[3] -> f32[4]``, most significant change first, ``(+N more)`` after it."""
    if not d.changes:
        return ""
    top = _top(d)
    more = d.total - 1
    words = _words(top)
    if top.detail is Detail.NEW_FUNCTION:
        bound = [c for c in d.changes if c.detail is Detail.BOUND_VALUE][:_BOUND_SHOWN]
        if bound:
            said = ", ".join(f"{c.subject}: {c.before} -> {c.after}" for c in bound)
            words = words.replace(_NEW_FUNCTION_HEAD, f"{_NEW_FUNCTION_HEAD}; bound {said}", 1)
            more -= len(bound)
    elif top.detail is Detail.IDENTITY_HASHED and top.kind == CauseKind.STATIC_ARGUMENT:
        fields = [c for c in d.changes if c.detail is Detail.FIELD_OF_IDENTITY
                  and c.path.startswith(top.path + ".")][:_BOUND_SHOWN]
        if fields:
            said = ", ".join(f"{c.path[len(top.path) + 1:]}: {c.before} -> {c.after}"
                             for c in fields)
            words += f"; its fields differ too: {said}"
            more -= len(fields)
    return words + (f" (+{more} more)" if more > 0 else "")


_BOUND_SHOWN = 3
_NEW_FUNCTION_HEAD = "a new function object for the same source"


def _words(top: Change) -> str:
    detail = top.detail
    if detail is Detail.TRANSFORMATION:
        return (f"{top.path}: {top.before} -> {top.after}; JAX compiles the transformed "
                "computation apart from the plain call")
    if detail is Detail.TRANSFORMATION_PARAMETERS:
        return (f"{top.path}: {top.before} -> {top.after}; under other transformation "
                "parameters JAX traces and compiles a new program, even where its argument "
                "types are the same")
    if detail is Detail.OTHER_PROGRAM:
        return f"{top.path}: {top.before} -> {top.after}"
    if detail is Detail.BOUND_METHOD:
        return ("a new bound method object for the same method (jax.jit(obj.method) re-created "
                "each call: every obj.method access makes a new object, and jax.jit caches per "
                "function object)")
    if detail is Detail.NEW_FUNCTION:
        return (f"{_NEW_FUNCTION_HEAD} (jax.jit caches per function object: a "
                "jax.jit(lambda ...) or functools.partial re-created each call)")
    if detail is Detail.IDENTITY_HASHED and top.kind == CauseKind.STATIC_ARGUMENT:
        type_ = top.subject
        return (f"static argument {top.path}: a new {type_} instance; {type_} hashes by "
                "identity (no __eq__/__hash__), so every new instance compiles again")
    return str(top)
