"""One program per object: a ``function_identity`` hazard for a class that jits its own
bound method in ``__init__`` (``self.step = jax.jit(self._step)``, ``eqx.filter_jit``) and
is made anew on each pass of a loop (``for lr in rates: trainer = Trainer(lr)``).

A bound method is a new function object for each object, and JAX traces each function
object apart: every new object compiles its own program, even one made with the same
values. Judged from the source at the first compile: the ``__init__`` of the method's
class jits the method, and a loop (in the class's file, the call's or its caller's) makes
an object of the class on each pass. What the loop binds that the object is made from
decides the words, as the sweep rule (:mod:`._hazard_sweep`) says them: a Python float the
loop sweeps (a learning rate), or nothing the loop binds (the same object, made again), a
warning; anything else (a config, a width), which may be why the programs differ, a note.

Not seen: an object made in a helper the loop calls (``run(lr)`` making the trainer), or
kept in a container per item; there the second compile's cause names the new bound method
and the attributes of its object that differ.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from .._capture._signature import Signature, StaticKind
from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source as _src
from . import _hazard_sweep

_TEXT_LIMIT = 300
#: The methods that run once per object, where a per-object jit is made.
_INITS = frozenset({"__init__", "__post_init__"})


@dataclass(frozen=True, slots=True)
class _PerObject:
    """A class that jits a bound method of each of its objects in ``__init__``."""

    cls: str  # the class's name
    line: int  # the line in ``__init__`` that jits the method
    attribute: str  # where the jitted method is kept (``step``, of ``self.step``)
    init: ast.FunctionDef  # the ``__init__``


def _jits_own_method(value: ast.AST, owner: str, method: str) -> bool:
    """Whether ``value`` jits ``owner.method`` (``jax.jit(self._step)``,
    ``eqx.filter_jit(self._step)``, ``jax.jit(functools.partial(self._step, ...))``)."""
    if not (isinstance(value, ast.Call) and _src._is_jit(value.func) and value.args):
        return False
    return any(isinstance(n, ast.Attribute) and n.attr == method
               and isinstance(n.value, ast.Name) and n.value.id == owner
               for n in ast.walk(value.args[0]))


def _per_object(info: FunctionInfo) -> _PerObject | None:
    """The class of the method ``info`` is, where its ``__init__`` jits that method."""
    index = _src._index(info.file) if info.file else None
    found = index.definitions.get(info.line) if index is not None and info.line else None
    if index is None or not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    owner = index.parents.get(found)
    if not isinstance(owner, ast.ClassDef):
        return None
    for init in owner.body:
        if not isinstance(init, ast.FunctionDef) or init.name not in _INITS \
                or not init.args.args:
            continue
        me = init.args.args[0].arg
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(target := node.targets[0], ast.Attribute) \
                    and isinstance(target.value, ast.Name) and target.value.id == me \
                    and _jits_own_method(node.value, me, found.name):
                return _PerObject(owner.name, node.lineno, target.attr, init)
    return None


@dataclass(frozen=True, slots=True)
class _Made:
    """Where a loop makes an object of the class on each pass."""

    filename: str
    call: ast.Call
    loop: ast.AST
    reads: tuple[str, ...]  # what the loop binds that the object is made from


def _made_in_loop(cls: str, filenames: list[str]) -> _Made | None:
    """The first call of ``cls`` made on every pass of a loop, in ``filenames``."""
    for filename in filenames:
        index = _src._index(filename)
        if index is None:
            continue
        calls = sorted((n for n in index.parents if isinstance(n, ast.Call)
                        and _src._callee(n) == cls), key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            loop = _src._loop_around(index, call)
            if loop is not None and _src._each_pass(index, call, loop):
                return _Made(filename, call, loop, _src._loop_names_read(loop, call))
    return None


def _kept_as(made: _PerObject, call: ast.Call, item: str) -> str | None:
    """The attribute ``__init__`` keeps the item in (``self.lr = lr``), where the call
    passes the item as that parameter: the value the program bakes in."""
    params = [a.arg for a in made.init.args.args[1:]]
    given = {params[i]: a for i, a in enumerate(call.args) if i < len(params)}
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    param = next((p for p, v in given.items() if isinstance(v, ast.Name) and v.id == item),
                 None)
    me = made.init.args.args[0].arg
    for node in ast.walk(made.init):
        if param and isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(t := node.targets[0], ast.Attribute) \
                and isinstance(t.value, ast.Name) and t.value.id == me \
                and isinstance(node.value, ast.Name) and node.value.id == param:
            return f"self.{t.attr}"
    return None


def made_per_object(info: FunctionInfo, signature: Signature, callsite: str | None,
                    caller: str | None) -> list[_parts.Hazard]:
    """The hazard of a method its class's ``__init__`` jits, where a loop makes an object
    of the class on each pass (see the module's doc). Said at the first compile."""
    found = _made_per_object(info, callsite, caller)
    # A wrapper library that passes the function as a static (``eqx.filter_jit``): the
    # new bound method is a new value of that static, which its recompile names.
    static = next((s for s in signature.statics if s.kind is StaticKind.STATIC_ARGUMENT
                   and s.type.rpartition(".")[2] == "method"), None)
    if static is None:
        return found
    return [replace(h, kind=CauseKind.STATIC_ARGUMENT, path=static.name) for h in found]


def _made_per_object(info: FunctionInfo, callsite: str | None,
                     caller: str | None) -> list[_parts.Hazard]:
    if "<locals>" in info.qualname or "." not in info.qualname:
        return []
    per_object = _per_object(info)
    if per_object is None:
        return []
    files = [info.file or ""]
    for site in (callsite, caller):
        where = (site or "").rpartition(":")[0]
        if where and where not in files:
            files.append(where)
    made = _made_in_loop(per_object.cls, [f for f in files if f])
    if made is None:
        return []
    cls, loop_line = per_object.cls, getattr(made.loop, "lineno", 0)
    where = f"line {loop_line}" + ("" if made.filename == info.file
                                   else f" of {made.filename.rpartition('/')[2]}")
    start = (f"{info.qualname} is jitted in {cls}.{per_object.init.name} (line "
             f"{per_object.line}) as a bound method, new for each {cls}; the loop at {where} "
             f"makes a {cls} on each pass")
    jitted = f"self.{per_object.attribute}"
    if not made.reads:
        return [_parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{start}: each one compiles again", _TEXT_LIMIT),
            f"make the {cls} once, before the loop, or have {jitted} be one function "
            "jitted once at module level, given what differs as arguments")]
    sweep = _hazard_sweep.swept(made.filename, loop_line, made.reads) \
        if isinstance(made.loop, (ast.For, ast.AsyncFor)) else None
    names = ", ".join(made.reads)
    if sweep is None:
        return [_parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{start} from {names}, which the loop binds, so each may be meant "
                     "to differ: one program per item", _TEXT_LIMIT),
            f"if it need not differ per item, jit one module-level function once and "
            f"pass what {names} sets as an argument", warn=False)]
    kept = _kept_as(per_object, made.call, sweep.item)
    held = f" ({kept})" if kept else ""
    return [_parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{start} from {sweep.item}{held}, a Python float it sweeps: "
                 "each value is baked into a program of its own, which compiles again",
                 _TEXT_LIMIT),
        f"jit one function once, at module level, and pass {sweep.item} to it as an "
        f"argument (a Python float or a jnp.float32) instead of reading {kept or 'it'} "
        "off self: one program serves every value")]
