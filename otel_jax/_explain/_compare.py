"""The per-part diff of two signatures: function, jit options, tracing context,
static arguments, leaves (types and placements), and the argument trees.

:func:`diff` is the entry point; the pytree walk is in ``_trees``, the passes
that merge related changes into one are in ``_merge``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from .._capture._arg_texts import aval_text
from .._capture._leaves import differing
from .._capture._reprs import MAX_FIELDS, bound_text
from .._capture._signature import Signature, StaticArg, StaticKind
from .._capture._statics import EXPORTED_PROGRAM
from .._core._idcache import SERIALS
from .._core._text import safe_repr, truncate
from .._core._vocab import ABSENT, CauseKind
from ._merge import drop_implied, merge_gone_and_back, merge_traced_and_static
from ._model import (
    MAX_CHANGES,
    TRANSFORMATION_PATH,
    AddChange,
    Change,
    Detail,
    Diff,
    added,
    removed,
)
from ._parts import (
    function_site,
    leaf_change,
    passed,
    placement_change,
    static_value_change,
    where_texts_differ,
)
from ._same import (
    is_bound_method,
    plainly_equal,
    safe_ne,
    same_function,
    static_changed,
    static_value_changed,
    transformations_differ,
    treedef_equal,
)
from ._trees import structure_changes, tree_changes

#: Where the static-argument pass sets aside a wrapper library's whole structure
#: ``(name, before, after)``, walked only when nothing more precise differs.
AddFallback = Callable[[tuple[str, Any, Any]], None]

CALLED_DIRECTLY = "called directly"
# The jit option holding the wrapper's own compiler options (``_jit_info``'s public name).
_WRAPPER_COMPILER_OPTIONS = "compiler_options"


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
                   _applied(old), _applied(new), Detail.TRANSFORMATION))
        return Diff(tuple(out), total)
    if transformations_differ(old, new) and (old.program != new.program
                                             or not (old.transform or treedef_equal(old, new))):
        # Other transformation parameters: a new program, whose arguments need not line
        # up with the earlier one's (vmap's in_axes batch other dimensions). Named by what
        # the user changed, the same on every JAX whatever its arguments read as.
        add(Change(TRANSFORMATION_PATH, CauseKind.TRANSFORM_PARAMS, old.transformation,
                   new.transformation, Detail.TRANSFORMATION_PARAMETERS))
        if not old.transform and not same_function(old, new):
            add(_new_function(old, new))  # a re-created jax.jit(jax.vmap(...)): also new
        return Diff(tuple(out), total)
    # Another program (grad's backward pass is no recompile of its forward pass, even
    # where both read as many inputs): its arguments and tracing context need not line up
    other_program = old.program != new.program or old.program_pass != new.program_pass
    if other_program and _other_object(old, new):
        # A function re-created per call (a test's parametrisation) whose program differs
        # with what it binds: a new function object, never another program of this one.
        add(_TRANSFORMED_FUNCTION)
        _bound_changes(old.bound, new.bound, add)
        return Diff(tuple(out), total)
    if other_program:
        add(Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY,
                   f"transformed program ({_program_text(old)})",
                   f"another transformed program of the same function "
                   f"({_program_text(new)}): " + _programs_apart(new.transformation),
                   Detail.OTHER_PROGRAM))
        return Diff(tuple(out), total)
    if transformations_differ(old, new):
        # The same program shape under other transformation parameters: JAX traced a
        # new program (grad(argnums=(0, 1)) differentiates more than grad(argnums=0)).
        add(Change(TRANSFORMATION_PATH, CauseKind.TRANSFORM_PARAMS, old.transformation,
                   new.transformation, Detail.TRANSFORMATION_PARAMETERS))
    if not same_function(old, new):
        add(_new_function(old, new))
        # a closure's or partial's values; a bound method's, its object's attributes
        _bound_changes(old.bound, new.bound, add)
    elif _other_object(old, new) and old.cache_clears == new.cache_clears:
        # The transformation was applied to another function object (a seen clear is said
        # as one): JAX traces a jitted function once per object and argument types (its
        # explainer says "never seen function"), whatever else changed with it.
        add(_TRANSFORMED_FUNCTION)
        _bound_changes(old.bound, new.bound, add)
    for (name, a), (_, b) in zip(old.options, new.options):
        if a != b:
            add(Change(f"jit({name})", CauseKind.JIT_OPTIONS, a, b))
    if old.compiler_options != new.compiler_options and (
            dict(old.options).get(_WRAPPER_COMPILER_OPTIONS)
            == dict(new.options).get(_WRAPPER_COMPILER_OPTIONS)):
        # The same wrapper's options, yet the compile was asked for others: given to
        # Lowered.compile (ahead of time). Named option by option.
        before, after = dict(old.compiler_options), dict(new.compiler_options)
        for key in sorted(before.keys() | after.keys()):
            if before.get(key) != after.get(key):
                add(Change(f"compile(compiler_options)[{key!r}]", CauseKind.JIT_OPTIONS,
                           before.get(key, ABSENT), after.get(key, ABSENT),
                           Detail.COMPILE_OPTIONS))
    if safe_ne(old.context, new.context):
        for (name, a), (_, b) in zip(old.context, new.context):
            if safe_ne(a, b):
                add(Change(name, CauseKind.TRACING_CONTEXT, _config_text(a), _config_text(b)))
    structure: list[Change] = []
    fallback: list[tuple[str, Any, Any]] = []
    _static_changes(old, new, add, structure.append, fallback.append)
    if treedef_equal(old, new):
        _leaf_changes(old, new, add)
    else:
        structure_changes(old, new, add)
    # A wrapper library's whole argument structure, passed as a static value,
    # says less than a path that appeared or went: only when nothing else does.
    if structure and not any(c.kind == CauseKind.PYTREE_STRUCTURE for c in out):
        for change in structure:
            add(change)
    if fallback and not out:
        for name, before, after in fallback:
            if safe_ne(before, after):
                tree_changes(name, before, after, add)
    if (not out and old.program_serial and old.program_serial == new.program_serial
            and (old.program_pass != new.program_pass or not new.program_pass)
            and old.cache_clears == new.cache_clears):
        # All else equal, the same function under the same transformation: JAX compiles
        # each program it derives from one trace apart (grad's forward and backward pass),
        # and compiles none of them twice.
        add(Change(TRANSFORMATION_PATH, CauseKind.FUNCTION_IDENTITY,
                   f"transformed program ({_program_text(old)})",
                   f"another transformed program of the same function "
                   f"({_program_text(new)}): " + _programs_apart(new.transformation),
                   Detail.OTHER_PROGRAM))
    merged = drop_implied(merge_gone_and_back(merge_traced_and_static(out)))
    return Diff(tuple(merged), total - (len(out) - len(merged)))


def _applied(sig: Signature) -> str:
    """How the function was called: directly, or under the transformations read (named as
    the user applied them: ``checkify()``, ``grad(argnums=0)``)."""
    if not sig.transform:
        return CALLED_DIRECTLY
    return sig.transformation or UNNAMED_TRANSFORMATION


#: A transformed program whose transformations were not read off the stack.
UNNAMED_TRANSFORMATION = "under a transformation outside jit (not named)"
# Transformations that derive a forward and a backward program from one trace.
_TWO_PASSES = ("grad", "value_and_grad", "jacrev", "vjp", "linearize")


def _programs_apart(transformation: str) -> str:
    """Why one transformation compiles several programs of one function, for the one
    applied (the outermost): said of grad only where grad was applied."""
    outer = transformation.partition("(")[0]
    if outer in _TWO_PASSES:
        return f"{outer}'s forward and backward passes are programs of their own"
    if outer:
        return f"{outer} compiles each program it derives from the function apart"
    return "a transformation compiles each program it derives from the function apart"


def _program_text(sig: Signature) -> str:
    """``backward pass; 2 inputs, 1 output, 1 operation`` (the pass where it was read)."""
    return f"{sig.program_pass} pass; {sig.program}" if sig.program_pass else sig.program


def _other_object(old: Signature, new: Signature) -> bool:
    """Two transformed programs of two function objects (both numbers known)."""
    return bool(old.program_serial and new.program_serial
                and old.program_serial != new.program_serial)


#: The transformation applied to another function object of the same source.
_TRANSFORMED_FUNCTION = Change(
    "<function>", CauseKind.FUNCTION_IDENTITY, "earlier function object",
    "new function object, same source, under the same transformation", Detail.NEW_FUNCTION)


def _new_function(old: Signature, new: Signature) -> Change:
    # never through its weak reference, which would hold it, racing the program's next
    # jit of an equal function (``Serials.alive``)
    alive = bool(old.function_serial) and SERIALS.alive(old.function_serial)
    before = "earlier function object" + ("" if alive else " (garbage-collected)")
    if is_bound_method(new):
        return Change("<function>", CauseKind.FUNCTION_IDENTITY, before,
                      "new bound method object, same method", Detail.BOUND_METHOD)
    return Change("<function>", CauseKind.FUNCTION_IDENTITY, before,
                  "new function object, same source", Detail.NEW_FUNCTION)


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


def _bound_changes(before: tuple[tuple[str, str], ...], after: tuple[tuple[str, str], ...],
                   add: AddChange) -> None:
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


def _static_changes(old: Signature, new: Signature, add: AddChange, add_structure: AddChange,
                    add_fallback: AddFallback) -> None:
    # Keyed by kind too: a wrapper's argument ``n`` has a value and a structure.
    olds = {(s.kind, s.name): s for s in old.statics}
    news = {(s.kind, s.name): s for s in new.statics}
    for key, s in news.items():
        name = s.name
        prev = olds.get(key)
        if s.kind is StaticKind.GRAPH_NODE:  # a node of a library's graph (an nnx sub-module)
            if prev is None:
                add(added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
            elif prev.type != s.type:
                add(Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr, s.repr, Detail.REPLACED))
            elif prev.repr != s.repr:
                add(Change(name, CauseKind.PYTREE_STRUCTURE, prev.repr, s.repr))
            continue
        if s.kind is StaticKind.PYTREE_STRUCTURE:
            if s.fallback:
                if prev is not None:
                    add_fallback((name, prev.tree, s.tree))
            elif s.tree is None:  # a static attribute of a library's graph node (nnx)
                if prev is None:
                    add(added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
                elif static_changed(prev, s):
                    live = _live_values(prev, s) if prev.repr == s.repr else None
                    if live is not None:  # read field by field from the values themselves
                        static_value_change(name, *live, add)
                    else:
                        add(_graph_change(name, prev, s))
            elif prev is None:
                add_structure(added(name, CauseKind.PYTREE_STRUCTURE, s.repr))
            elif static_changed(prev, s):
                tree_changes(name, prev.tree, s.tree, add_structure)
            continue
        if prev is None:
            add(added(name, CauseKind.STATIC_ARGUMENT, s.repr))
        elif name == EXPORTED_PROGRAM:
            if static_changed(prev, s):  # exported again: named by its argument types
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           f"exported for {_exported_inputs(prev)}",
                           f"another export, for {_exported_inputs(s)}", Detail.OTHER_EXPORT))
        elif prev.keyword != s.keyword:
            # JAX keys a static argument by how it was passed as well as by its value.
            same = not static_value_changed(prev, s)
            add(Change(name, CauseKind.STATIC_ARGUMENT,
                       passed(prev.keyword) + ("" if same else f" ({prev.repr})"),
                       passed(s.keyword) + ("" if same else f" ({s.repr})"), Detail.MOVED))
        elif static_changed(prev, s):
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
                           else f"another function ({function_site(y)})",
                           Detail.STATIC_FUNCTION))
            elif s.identity_hashed and prev.type == s.type:
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           f"{prev.repr} (a {prev.type} hashed by identity)",
                           f"new {s.type} instance (hashed by identity)",
                           Detail.IDENTITY_HASHED, s.type))
                # what else differs, read off both values: the fields that changed
                _field_changes(name, prev.fields, s.fields, lambda c: add(Change(
                    c.path, c.kind, c.before, c.after, Detail.FIELD_OF_IDENTITY)))
            elif (live := _live_values(prev, s)) is not None and live[0] is live[1]:
                # one object, whose hash or text changed since: mutated in place
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                           "the same object, changed in place since"
                           + (" (its hash changed)" if prev.hash != s.hash else
                              f" ({s.repr})" if s.repr != prev.repr else ""),
                           Detail.MUTATED, s.type))
            elif live is not None and plainly_equal(*live):
                # == yet told apart: JAX's cache keys a value by its type and hash as
                # well, so each spelling (2 and 2.0; jnp.bfloat16, x.dtype, "bfloat16")
                # compiles
                apart = " and ".join(
                    [w for w, differs in (("of another type", prev.type != s.type),
                                          ("hashed differently", prev.hash != s.hash))
                     if differs]) or "told apart by JAX's cache"
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                           f"{s.repr} (== to it, but {apart})", Detail.EQUAL_HASHED_APART,
                           s.type))
            elif prev.type == s.type and (
                    _field_changes(name, prev.fields, s.fields, add)
                    | _identity_field_changes(name, prev, s, add)):
                pass  # a dataclass-like value: one change per field that differs
            elif prev.repr == s.repr and prev.detail and s.detail and prev.detail != s.detail:
                # texts that part after the cut: shown where they part
                add(Change(name, CauseKind.STATIC_ARGUMENT,
                           *where_texts_differ(prev.detail, s.detail, len(s.repr))))
            elif prev.repr == s.repr:
                _same_text_change(name, prev, s, add)
            else:
                add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr, s.repr))
    for key in olds.keys() - news.keys():
        gone = olds[key]
        if gone.kind is StaticKind.GRAPH_NODE or (gone.kind is StaticKind.PYTREE_STRUCTURE
                                                  and gone.tree is None and not gone.fallback):
            add(removed(gone.name, CauseKind.PYTREE_STRUCTURE, gone.repr))
        elif gone.kind is StaticKind.PYTREE_STRUCTURE:
            add_structure(removed(gone.name, CauseKind.PYTREE_STRUCTURE, gone.repr))
        else:
            add(removed(gone.name, CauseKind.STATIC_ARGUMENT, gone.repr))


def _same_text_change(name: str, prev: StaticArg, new: StaticArg, add: AddChange) -> None:
    """A static value that prints as the earlier one did but is another: said by what was
    seen of the two values (while JAX's cache holds them), so that the hint's claim holds:
    a value that is not == to itself (a NaN) or a type that compares by identity never
    hits the cache; another value of a value-compared type is just another value, named by
    the attributes that differ where they can be read."""
    live = _live_values(prev, new)
    if live is None:
        add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                   f"{new.repr} (prints the same but JAX's cache told them apart; the values "
                   "are no longer held to say why)", Detail.PRINTS_SAME))
        return
    before, after = live
    if _bound_to_another(before, after):
        # a bound method of another object (``eqx.filter_jit(self._step)`` in each new
        # trainer's ``__init__``): the same method, a new function; said with the
        # attributes of the two objects that differ
        owner = type(after.__self__).__name__
        add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                   f"the same method bound to another {owner} object", Detail.BOUND_METHOD,
                   new.type))
        _attribute_changes(f"{name}.self", before.__self__, after.__self__, add)
        return
    by_identity = getattr(type(after), "__eq__", None) is getattr(object, "__eq__", None)
    if not plainly_equal(after, after) or by_identity:
        add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                   f"{new.repr} (looks the same but is not == to it: "
                   + ("not == to itself, e.g. a NaN)" if not plainly_equal(after, after) else
                      f"{new.type} compares by identity)"), Detail.LOOKS_EQUAL))
        return
    if not _attribute_changes(name, before, after, add):
        add(Change(name, CauseKind.STATIC_ARGUMENT, prev.repr,
                   f"{new.repr} (another value that prints the same: not == to it)",
                   Detail.UNSHOWN_VALUE))


def _bound_to_another(before: Any, after: Any) -> bool:
    """Two bound methods of one function, bound to two objects."""
    return (isinstance(before, types.MethodType) and isinstance(after, types.MethodType)
            and before.__func__ is after.__func__ and before.__self__ is not after.__self__)


def _attribute_changes(name: str, before: Any, after: Any, add: AddChange) -> bool:
    """``self.scale: 2.0 -> 3.0`` for each instance attribute of two values of one type
    that differs, read without running their code; whether any did."""
    if type(before) is not type(after):
        return False
    try:
        old = object.__getattribute__(before, "__dict__")
        new = object.__getattribute__(after, "__dict__")
    except Exception:  # slots, or no attributes
        return False
    if type(old) is not dict or type(new) is not dict:
        return False
    found = False
    for key in list(new)[:MAX_FIELDS]:
        if not isinstance(key, str):
            continue
        text = bound_text(new[key], key)
        prev = bound_text(old[key], key) if key in old else ABSENT
        if prev != text:
            add(Change(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, prev, text))
            found = True
    return found


def _field_changes(name: str, before: tuple[tuple[str, str], ...],
                   after: tuple[tuple[str, str], ...], add: AddChange) -> bool:
    """``cfg.lr: 0.1 -> 0.2`` for each field that differs; whether any did."""
    if not (before and after) or before == after:
        return False
    old = dict(before)
    new = dict(after)
    found = False
    for key, text in after:
        prev = old.get(key)
        if prev is None:
            add(added(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, text))
        elif prev != text:
            add(Change(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, prev, text))
        else:
            continue
        found = True
    for key, text in before:
        if key not in new:
            add(removed(f"{name}.{key}", CauseKind.STATIC_ARGUMENT, text))
            found = True
    return found


def _identity_field_changes(name: str, prev: StaticArg, new: StaticArg,
                            add: AddChange) -> bool:
    """A field that reads the same but holds another object compared by identity: a new
    function object (an optax optimizer built again: its ``init`` and ``update`` are new
    closures), or a new instance of a type without ``__eq__``/``__hash__``."""
    if not (prev.field_ids and new.field_ids) or prev.field_ids == new.field_ids:
        return False
    before = {path: (number, site) for path, number, site, _ in prev.field_ids}
    texts_before, texts_after = dict(prev.fields), dict(new.fields)
    found = False
    for path, number, site, type_ in new.field_ids:
        old = before.get(path)
        text = texts_after.get(path)
        if old is None or old[0] == number or text is None or texts_before.get(path) != text:
            continue  # the same object, or a difference its text already shows
        if site:
            add(Change(f"{name}.{path}", CauseKind.STATIC_ARGUMENT, text,
                       "new function object, same source" if site == old[1]
                       else f"another function ({site})", Detail.FUNCTION_FIELD))
        else:
            add(Change(f"{name}.{path}", CauseKind.STATIC_ARGUMENT,
                       f"{text} (a {type_} hashed by identity)",
                       f"new {type_} instance (hashed by identity)",
                       Detail.IDENTITY_HASHED, type_))
        found = True
    return found


def _leaf_changes(old: Signature, new: Signature, add: AddChange) -> None:
    ot, nt, op, np_ = old.types, new.types, old.placements, new.placements
    changed = sorted({*differing(ot, nt), *differing(op, np_)})
    for i in changed:
        if ot[i] != nt[i]:
            add(leaf_change(new.paths[i], old.avals[i], new.avals[i], ot[i], nt[i]))
        else:
            add(placement_change(new.paths[i], op[i], np_[i]))
