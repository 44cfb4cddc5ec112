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

The loop may make the object through a function that makes one each time it runs: a
factory (``trainer = make_trainer(lr)``) or the class's classmethod
(``Trainer.from_config(cfg)``), not one that makes it under an ``if`` or keeps what it
made (a cache); or in a comprehension (``[Trainer(lr) for lr in rates]``). Not seen: a
factory that calls another, an object kept in a container the loop fills on some passes;
there the second compile's cause names the new bound method and the attributes of its
object that differ.
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
class _Maker:
    """A function that makes a new object of the class each time it runs: a factory
    (``def make_trainer(lr): return Trainer(lr)``) or the class's own classmethod
    (``Trainer.from_config(cfg)``: ``return cls(...)``)."""

    function: ast.FunctionDef | ast.AsyncFunctionDef
    made: ast.Call  # the call in its body that makes the object
    owner: str | None  # the class a classmethod or staticmethod is called on; else None


@dataclass(frozen=True, slots=True)
class _Made:
    """Where a loop makes an object of the class on each pass."""

    filename: str
    call: ast.Call
    loop: ast.AST
    reads: tuple[str, ...]  # what the loop binds that the object is made from
    maker: _Maker | None = None  # the function the loop calls to make it, if not the class


def _makers(cls: str, filenames: list[str]) -> list[_Maker]:
    """The functions of ``filenames`` that make a new ``cls`` on each run: a call of
    it (``cls(...)`` in its classmethod) in their own body, under no ``if``, loop or
    cache between (a factory that keeps what it made, ``if lr not in cache: ...``, may
    give back the same object)."""
    found: list[_Maker] = []
    for filename in filenames:
        index = _src._index(filename)
        if index is None:
            continue
        for function in {n for n in index.definitions.values()
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}:
            owner = index.parents.get(function)
            in_class = isinstance(owner, ast.ClassDef) and owner.name == cls
            if not in_class and not isinstance(owner, ast.Module):
                continue  # a method of another class, a function made in a function
            if function.name in _INITS:
                continue
            names = {cls} | ({function.args.args[0].arg} if in_class and function.args.args
                             and _decorated(function, "classmethod") else set())
            calls = [n for n in _scope_of(function) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id in names
                     and _src._loop_around(index, n) is None
                     and _src._each_pass(index, n, function)]
            if len(calls) == 1:
                found.append(_Maker(function, calls[0], cls if in_class else None))
    return found


def _decorated(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in function.decorator_list)


def _scope_of(function: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body (not of a function or class nested in it)."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, _src._BOUNDARIES):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _calls_maker(call: ast.Call, maker: _Maker) -> bool:
    func, name = call.func, maker.function.name
    if maker.owner is None:
        return isinstance(func, ast.Name) and func.id == name
    return isinstance(func, ast.Attribute) and func.attr == name \
        and isinstance(func.value, ast.Name) and func.value.id == maker.owner


def _made_in_loop(cls: str, filenames: list[str]) -> _Made | None:
    """The first call of ``cls``, or of a function that makes one (:func:`_makers`),
    made on every pass of a loop (a comprehension's too), in ``filenames``."""
    makers = _makers(cls, filenames)
    for filename in filenames:
        index = _src._index(filename)
        if index is None:
            continue
        calls = sorted(((n, next((m for m in makers if _calls_maker(n, m)), None))
                        for n in index.parents if isinstance(n, ast.Call)),
                       key=lambda c: (c[0].lineno, c[0].col_offset))
        for call, maker in calls:
            if maker is None and _src._callee(call) != cls:
                continue
            loop = _src._loop_around(index, call)
            if loop is not None and _src._each_pass(index, call, loop):
                return _Made(filename, call, loop, _src._loop_names_read(loop, call), maker)
    return None


def _given(parameters: list[str], call: ast.Call) -> dict[str, ast.expr]:
    given = {parameters[i]: a for i, a in enumerate(call.args) if i < len(parameters)}
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    return given


def _kept_as(made: _PerObject, call: ast.Call, item: str,
             maker: _Maker | None = None) -> str | None:
    """The attribute ``__init__`` keeps the item in (``self.lr = lr``), where the call
    passes the item as that parameter (through the maker's parameter of the same place,
    where a factory makes the object): the value the program bakes in."""
    if maker is not None:
        arguments = maker.function.args.args
        params = [a.arg for a in arguments[1:]] if maker.owner is not None \
            and arguments and _decorated(maker.function, "classmethod") \
            else [a.arg for a in arguments]
        passed = next((p for p, v in _given(params, call).items()
                       if isinstance(v, ast.Name) and v.id == item), None)
        return _kept_as(made, maker.made, passed) if passed else None
    given = _given([a.arg for a in made.init.args.args[1:]], call)
    param = next((p for p, v in given.items() if isinstance(v, ast.Name) and v.id == item),
                 None)
    me = made.init.args.args[0].arg
    for node in ast.walk(made.init):
        if not param or not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        # ``self.lr = lr``; ``self.lr, self.steps = lr, steps``
        pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) \
            and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) \
            else [(target, value)]
        for t, v in pairs:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                    and t.value.id == me and isinstance(v, ast.Name) and v.id == param:
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
    through = ""
    if made.maker is not None:
        maker = made.maker
        through = f" (through {maker.owner + '.' if maker.owner else ''}{maker.function.name})"
    start = (f"{info.qualname} is jitted in {cls}.{per_object.init.name} (line "
             f"{per_object.line}) as a bound method, new for each {cls}; the loop at {where} "
             f"makes a {cls} on each pass{through}")
    jitted = f"self.{per_object.attribute}"
    if not made.reads:
        return [_parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{start}: each one compiles again", _TEXT_LIMIT),
            f"make the {cls} once, before the loop, or have {jitted} be one function "
            "jitted once at module level, given what differs as arguments")]
    sweep = _hazard_sweep.swept(made.filename, loop_line, made.reads)
    names = ", ".join(made.reads)
    if sweep is None:
        return [_parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{start} from {names}, which the loop binds, so each may be meant "
                     "to differ: one program per item", _TEXT_LIMIT),
            f"if it need not differ per item, jit one module-level function once and "
            f"pass what {names} sets as an argument", warn=False)]
    kept = _kept_as(per_object, made.call, sweep.item, made.maker)
    held = f" ({kept})" if kept else ""
    return [_parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{start} from {sweep.item}{held}, a Python float it sweeps: "
                 "each value is baked into a program of its own, which compiles again",
                 _TEXT_LIMIT),
        f"jit one function once, at module level, and pass {sweep.item} to it as an "
        f"argument (a Python float or a jnp.float32) instead of reading {kept or 'it'} "
        "off self: one program serves every value")]
