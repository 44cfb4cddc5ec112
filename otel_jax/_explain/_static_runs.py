"""A static argument that takes a new value at each compile: a counter, a position, an
object built per call.

A static argument's every new value compiles again (JAX keys its cache by the value's hash
and equality). A few values that come back (a ``train``/``eval`` flag, three evaluation
splits) compile once each and then hit the cache; a value new at every call (a decoding
position passed static, a step counter, a policy or closure built on the calling line)
compiles at every call, for good. What tells the two apart is the run: the compiles in a
row, ending at this one, each caused by that static taking a value none of the others had.
A run of ``STATIC_RUN`` is a note (a few fixed values make one, then hit the cache); of
``STATIC_WARN_RUN``, a warning. Each is said at the compile where the run reaches it,
decided from the function's earlier signatures in the order they compiled.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._capture._signature import Signature, StaticArg, StaticKind
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source
from ._model import Diff

#: Compiles in a row whose static argument took a new value each time: a note ...
STATIC_RUN = 3
#: ... and a warning: a handful of fixed values (modes, splits) seldom reaches five.
STATIC_WARN_RUN = 5
#: Value texts quoted in the hazard, each cut to this many characters.
_VALUE_TEXT = 24
#: Python scalars held static: a counter or a position, which a traced argument would carry.
_SCALARS = frozenset({"int", "float", "bool", "complex", "str"})


def consecutive(count: int, earlier: Sequence[tuple[int, Signature]],
                limit: int) -> list[Signature]:
    """The signatures of the (at most ``limit``) compiles just before compile ``count``,
    in a row, oldest first: a kept history with gaps says nothing of a run."""
    row: list[Signature] = []
    for c, s in reversed(earlier):
        if c != count - 1 - len(row) or len(row) >= limit:
            break
        row.insert(0, s)
    return row


def _static(signature: Signature, name: str) -> StaticArg | None:
    return next((s for s in signature.statics if s.kind is StaticKind.STATIC_ARGUMENT
                 and s.name == name), None)


def _identity(static: StaticArg | None) -> tuple[object, ...] | None:
    """What tells two values of a static apart after their calls (the values themselves
    may be gone): the type, hash and text; for one hashed by identity, which object."""
    if static is None:
        return None
    return (static.type, static.hash, static.repr,
            static.obj_id if static.identity_hashed else 0)


def new_each_call(count: int, signature: Signature, earlier: Sequence[tuple[int, Signature]],
                  diff: Diff, callsite: str | None = None,
                  caller: str | None = None) -> list[_parts.Hazard]:
    """At a recompile caused by a static argument: a note where it took a new value at each
    of the last ``STATIC_RUN`` compiles in a row, a warning at each of the last
    ``STATIC_WARN_RUN``. Not said again of an object the calling line makes (a warning at
    the first compile already said it)."""
    row = consecutive(count, earlier, STATIC_WARN_RUN)
    if len(row) < STATIC_RUN - 1:
        return []
    changed = dict.fromkeys(c.path for c in diff.changes
                            if c.kind is CauseKind.STATIC_ARGUMENT)
    found: list[_parts.Hazard] = []
    for name in changed:
        statics = [_static(s, name) for s in (*row, signature)]
        run = 0  # compiles in a row, ending here, whose value none of the others had
        seen: set[tuple[object, ...]] = set()
        for static in reversed(statics):
            key = _identity(static)
            if key is None or key in seen:
                break
            seen.add(key)
            run += 1
        if run not in (STATIC_RUN, STATIC_WARN_RUN):
            continue  # said at the compile where the run reached that length
        last = statics[-1]
        assert last is not None
        if last.identity_hashed and _made_on_the_line(last, callsite, caller):
            continue
        if last.identity_hashed:
            what = (f"was a new object at each of the last {run} compiles "
                    f"({truncate(last.repr, _VALUE_TEXT)}, hashed by identity): each new "
                    "object compiles again")
        else:
            values = ", ".join(truncate(_parts.value_text(s), _VALUE_TEXT)
                               for s in statics[-run:] if s)
            what = (f"took a new value at each of the last {run} compiles ({values}): each "
                    "new value compiles again")
        found.append(_parts.Hazard(
            CauseKind.STATIC_ARGUMENT, name,
            truncate(f"static argument {name} {what}"
                     + ("" if run >= STATIC_WARN_RUN else
                        " (a few fixed values, each used again, would hit the cache)"),
                     _parts.TEXT_LIMIT),
            _hint(name, last, wrapped=_held_by_wrapper(signature)),
            warn=run >= STATIC_WARN_RUN))
    return found


def _held_by_wrapper(signature: Signature) -> bool:
    """Whether a wrapper library holds the call's statics (``eqx.filter_jit`` keeps every
    non-array argument static, and passes the user's function among them): the user never
    asked for them to be static."""
    return not signature.top_names and any(
        s.kind is StaticKind.STATIC_ARGUMENT and s.name.startswith("<function>")
        for s in signature.statics)


def _made_on_the_line(static: StaticArg, callsite: str | None, caller: str | None) -> bool:
    """Whether the first compile's rule warns of ``static`` already: an object of a class,
    or a lambda, that the calling line makes (a lambda where that line runs again)."""
    made = _hazard_source.made_in_call(callsite)
    return any(h.warn for h in _parts.by_identity(
        static, made, lambda: _hazard_source.line_runs_again(callsite, caller)))


#: Types of a static that holds ints (a shape, a window, an axis list): no array can
#: stand in for one where it sets a shape.
_SEQUENCES = frozenset({"tuple", "list"})


def _hint(name: str, static: StaticArg, wrapped: bool = False) -> str:
    """The fix for a static that takes a new value at each compile. ``wrapped``: held
    static by a wrapper library (``eqx.filter_jit`` keeps every non-array argument
    static), not by the user's ``static_argnums``: the fix is an array, not an option."""
    short = static.type.rpartition(".")[2]
    if short in _SCALARS and wrapped:
        return (f"pass {name} as an array (jnp.asarray({name}, dtype)): the wrapper holds "
                "every Python scalar static and traces an array; where it sets a shape, "
                "round it up to a few sizes")
    if short in _SCALARS:
        return (f"pass {name} as a traced argument (not static) where it only feeds "
                "arithmetic or indexing (jax.lax.dynamic_slice for a position); where it "
                "sets a shape, round it up to a few sizes")
    if short in _SEQUENCES:
        return (f"where {name} sets a shape, keep it to a few values that come back (pad or "
                "bucket to a few sizes: each compiles once, then hits the cache); what only "
                "feeds arithmetic can go in as an array argument instead")
    if short in _parts.LONG_LIVED:  # a function: no class of the user's to change
        return f"make {name} once, before the loop, and pass that same function"
    if static.identity_hashed:
        return (f"make {name} once, before the loop, and pass that same object, or give "
                f"{short} value-based __eq__ and __hash__ (a frozen dataclass)")
    return (f"pass what changes in {name} as an array argument, or keep it to a few "
            "values that come back (they hit the cache)")
