"""One program per item of a loop: a ``function_identity`` hazard's one rule for a jit a
loop makes on each pass of a function that reads the item (``for lr in rates: step =
jax.jit(make_step(lr))``, ``jax.jit(functools.partial(step, wd))``, ``jax.jit(lambda x:
act(x))``).

Each item compiles its own program, surely; whether that is a fault depends on the item.
A Python float (a learning rate, a weight decay, a temperature: a literal list of them,
``np.logspace(...)``) is a value baked into each program as a constant, which an argument
would carry through one program: a warning. Anything else (an activation, a width that
changes the shapes, a config) may be why the programs differ: a note. A factory called
once (``step = make_step(0.1)``, outside a loop) is no hazard at all.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source as _src

_TEXT_LIMIT = 300
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: What makes an array of evenly spread floats (``np.logspace(-5, -2, 4)``).
_FLOAT_RANGES = frozenset({"linspace", "logspace", "geomspace"})


def _float_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is float


def _floats(node: ast.AST, index: _src._Index, depth: int = 0) -> bool:
    """Whether iterating ``node`` gives Python floats (or numpy's): a literal sequence of
    float constants, a ``linspace``-like call, or a name the file binds to one of these."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        # one item is no sweep: no other program follows
        return len(node.elts) > 1 and all(
            _float_literal(e) or isinstance(e, ast.Constant) and type(e.value) is int
            for e in node.elts) and any(_float_literal(e) for e in node.elts)
    if isinstance(node, ast.Call):
        return _src._callee(node) in _FLOAT_RANGES
    if isinstance(node, ast.Name) and depth < 2:
        values = [a.value for a in index.assigns.values() if isinstance(a, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
        values += [n.value for n in index.parents if isinstance(n, ast.Assign)
                   and not isinstance(n.value, ast.Call)
                   and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)]
        return bool(values) and all(_floats(v, index, depth + 1) for v in values)
    return False


@dataclass(frozen=True, slots=True)
class Swept:
    """A loop that sweeps Python floats, as the jitted function reads it: the item itself
    (``for lr in rates``, ``[Trainer(lr) for lr in rates]``), or an object the loop builds
    from it on each pass (``opt = optax.adam(lr)``; ``cfg = {"lr": lr}`` then ``opt =
    build_optimizer(cfg)``), which carries the float into the function's closure."""

    item: str  # the name the loop binds to each float
    through: tuple[str, ...] = ()  # the names read that hold an object built from it
    # where the item goes into an optax optimizer, its callee and keyword
    # (``optax.adamw``, ``weight_decay``): the fix keeps it in the optimizer's state
    optax: tuple[str, str] | None = None


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


#: How many objects built one from another a swept float is followed through
#: (``cfg = {"lr": lr}``, ``opt = build_optimizer(cfg)``).
_CHAIN = 3


def _built_from(loop: ast.AST, name: str, item: str, loop_bound: set[str],
                depth: int = 0) -> ast.Call | ast.Dict | None:
    """The call (or dict, a config) the loop assigns ``name`` from on each pass, reading
    ``item`` and nothing else the loop binds, directly or through another object built so
    (``opt = optax.adam(lr)``, ``tx = optax.chain(..., optax.adamw(3e-4,
    weight_decay=wd))``, ``cfg = {"lr": lr}`` then ``opt = build_optimizer(cfg)``);
    ``None`` where ``name`` is set otherwise too."""
    stores = [n for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == name
              and isinstance(n.ctx, ast.Store)]
    assigns = [a for a in ast.walk(loop) if isinstance(a, ast.Assign) and len(a.targets) == 1
               and isinstance(a.targets[0], ast.Name) and a.targets[0].id == name]
    if len(stores) != 1 or len(assigns) != 1 \
            or not isinstance(value := assigns[0].value, (ast.Call, ast.Dict)):
        return None
    read = _reads(value) & loop_bound
    if read == {item}:
        return value
    if not read or item in read or depth >= _CHAIN:
        return None
    # built from objects the loop built from the item on this pass, and nothing else
    return value if all(_built_from(loop, other, item, loop_bound, depth + 1) is not None
                        for other in read) else None


def _optax_slot(call: ast.AST, item: str, index: _src._Index) -> tuple[str, str] | None:
    """Where ``item`` goes into an optax transformation inside ``call``: the innermost
    ``optax.*(...)`` call given it directly, with the keyword it fills (an optax alias's
    first parameter is its ``learning_rate``)."""
    if "optax" not in index.modules:
        return None
    for node in ast.walk(call):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        root = node.func.value
        if not (isinstance(root, ast.Name) and root.id == "optax"):
            continue
        for keyword in node.keywords:
            if keyword.arg and isinstance(keyword.value, ast.Name) and keyword.value.id == item:
                return ast.unparse(node.func), keyword.arg
        if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == item:
            return ast.unparse(node.func), "learning_rate"
    return None


def swept(filename: str | None, loop_line: int, names: tuple[str, ...]) -> Swept | None:
    """How the ``for`` loop starting at ``filename:loop_line`` gives each of ``names`` a
    Python float of a sweep (``for lr in (1e-3, 1e-2)``, ``for i, wd in
    enumerate(np.logspace(-5, -2, 4))``), directly or through an object built from it on
    each pass (``opt = optax.adam(lr)``); ``None`` where it does not."""
    index = _src._index(filename) if filename else None
    if index is None or not names:
        return None
    loop = next((n for n in index.parents if isinstance(n, (ast.For, ast.AsyncFor))
                 and n.lineno == loop_line), None) or next(
        (n for n in index.parents if isinstance(n, _COMPREHENSIONS)
         and n.lineno == loop_line and len(n.generators) == 1), None)
    if loop is None:
        return None
    if isinstance(loop, _COMPREHENSIONS):  # ``[Trainer(lr) for lr in rates]``
        target, items = loop.generators[0].target, loop.generators[0].iter
    else:
        target, items = loop.target, loop.iter
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 \
            and isinstance(items, ast.Call) and _src._callee(items) == "enumerate" \
            and items.args:
        target, items = target.elts[1], items.args[0]
    if not isinstance(target, ast.Name) or not _floats(items, index):
        return None
    item = target.id
    loop_bound = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
    through: list[str] = []
    slot: tuple[str, str] | None = None
    for name in names:
        if name == item:
            continue
        built = _built_from(loop, name, item, loop_bound)
        if built is None:
            return None  # another name the loop binds is read too: not only the item
        through.append(name)
        slot = slot or _optax_slot(built, item, index)
    return Swept(item, tuple(through), slot)


def swept_floats(filename: str | None, loop_line: int, names: tuple[str, ...]) -> bool:
    """Whether :func:`swept` finds the loop's floats reaching ``names``."""
    return swept(filename, loop_line, names) is not None


def per_item(info: FunctionInfo, line: int, reads: tuple[str, ...],
             floats: Swept | bool | None, where: str) -> _parts.Hazard:
    """The hazard of a function jitted anew on each pass of a loop (``where``: which
    loop, in words) that reads the item the loop binds: one program per item."""
    names = ", ".join(reads)
    if floats:
        sweep = floats if isinstance(floats, Swept) else None
        made = names
        if sweep is not None and sweep.through:
            made = (f"{', '.join(sweep.through)}, built there from {sweep.item}, "
                    f"a Python float the loop sweeps")
        else:
            made = f"{names}, a Python float the loop sweeps"
        return _parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}), "
                     f"made from {made}: each value is baked into a program of its own, "
                     "which compiles again", _TEXT_LIMIT),
            _float_hint(sweep, names))
    return _parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}); it "
                 f"reads {names}, which the loop binds, so each may be meant to differ: one "
                 "program per item", _TEXT_LIMIT),
        f"if it need not differ per pass, jit it once before the loop and pass {names} "
        "as an argument", warn=False)


def _float_hint(sweep: Swept | None, names: str) -> str:
    """The fix for a swept float: an argument, or, where it reaches the function through an
    optax optimizer, the optimizer's state (``optax.inject_hyperparams``)."""
    if sweep is None or not sweep.through:
        return (f"jit it once, before the loop, and pass {names} as an argument (a Python "
                "float or a jnp.float32): one program serves every value")
    if sweep.optax is not None:
        callee, keyword = sweep.optax
        return (f"keep {sweep.item} in the optimizer's state: build it once, before the "
                f"loop, with optax.inject_hyperparams({callee})({keyword}=...), jit the step "
                f"once, and set opt_state.hyperparams['{keyword}'] to each {sweep.item}: "
                "one program serves every value")
    return (f"jit it once, before the loop, and pass {sweep.item} as an argument instead "
            f"of through {', '.join(sweep.through)} (a Python float or a jnp.float32): one "
            "program serves every value")


def per_pass(info: FunctionInfo, line: int, loop_lines: tuple[int, int],
             reads: tuple[str, ...], callsite: str | None) -> list[_parts.Hazard]:
    """A function jitted anew on each pass of a loop around the loop that calls it (once
    per epoch, once per sweep item)."""
    where = f"the loop at line {loop_lines[0]}"
    if reads:
        floats = swept(callsite.rpartition(":")[0] if callsite else None,
                       loop_lines[0], reads)
        return [per_item(info, line, reads, floats, where)]
    return [_parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}), "
                 "around the loop that calls it: each pass makes a new jitted function, "
                 "which compiles again", _TEXT_LIMIT),
        "jit it once, before the outer loop, and call that same function")]


def swept_at(callsite: str | None, reads: tuple[str, ...]) -> Swept | None:
    """:func:`swept` of the innermost loop around the call at ``callsite``."""
    index, line = _src._at(callsite)
    statement = index.statements.get(line) if index is not None else None
    loop = _src._loop_around(index, statement) if index is not None and statement else None
    if loop is None:
        return None
    return swept(callsite.rpartition(":")[0] if callsite else None,
                 getattr(loop, "lineno", 0), reads)
