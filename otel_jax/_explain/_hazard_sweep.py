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

from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source as _src

_TEXT_LIMIT = 300
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


def swept_floats(filename: str | None, loop_line: int, names: tuple[str, ...]) -> bool:
    """Whether the ``for`` loop starting at ``filename:loop_line`` binds each of ``names``
    to the Python floats of a sweep (``for lr in (1e-3, 1e-2)``, ``for i, wd in
    enumerate(np.logspace(-5, -2, 4))``)."""
    index = _src._index(filename) if filename else None
    if index is None or not names:
        return False
    loop = next((n for n in index.parents if isinstance(n, (ast.For, ast.AsyncFor))
                 and n.lineno == loop_line), None)
    if loop is None:
        return False
    target, items = loop.target, loop.iter
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 \
            and isinstance(items, ast.Call) and _src._callee(items) == "enumerate" \
            and items.args:
        target, items = target.elts[1], items.args[0]
    if not isinstance(target, ast.Name) or set(names) != {target.id}:
        return False  # another name the loop binds is read too: not only the item
    return _floats(items, index)


def per_item(info: FunctionInfo, line: int, reads: tuple[str, ...], floats: bool,
             where: str) -> _parts.Hazard:
    """The hazard of a function jitted anew on each pass of a loop (``where``: which
    loop, in words) that reads the item the loop binds: one program per item."""
    names = ", ".join(reads)
    if floats:
        return _parts.Hazard(
            CauseKind.FUNCTION_IDENTITY, "",
            truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}), "
                     f"made from {names}, a Python float the loop sweeps: each value is "
                     "baked into a program of its own, which compiles again", _TEXT_LIMIT),
            f"jit it once, before the loop, and pass {names} as an argument (a Python "
            "float or a jnp.float32): one program serves every value")
    return _parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}); it "
                 f"reads {names}, which the loop binds, so each may be meant to differ: one "
                 "program per item", _TEXT_LIMIT),
        f"if it need not differ per pass, jit it once before the loop and pass {names} "
        "as an argument", warn=False)


def per_pass(info: FunctionInfo, line: int, loop_lines: tuple[int, int],
             reads: tuple[str, ...], callsite: str | None) -> list[_parts.Hazard]:
    """A function jitted anew on each pass of a loop around the loop that calls it (once
    per epoch, once per sweep item)."""
    where = f"the loop at line {loop_lines[0]}"
    if reads:
        floats = swept_floats(callsite.rpartition(":")[0] if callsite else None,
                              loop_lines[0], reads)
        return [per_item(info, line, reads, floats, where)]
    return [_parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{info.qualname} is jitted anew on each pass of {where} (line {line}), "
                 "around the loop that calls it: each pass makes a new jitted function, "
                 "which compiles again", _TEXT_LIMIT),
        "jit it once, before the outer loop, and call that same function")]


def swept_at(callsite: str | None, reads: tuple[str, ...]) -> bool:
    """:func:`swept_floats` of the innermost loop around the call at ``callsite``."""
    index, line = _src._at(callsite)
    statement = index.statements.get(line) if index is not None else None
    loop = _src._loop_around(index, statement) if index is not None and statement else None
    return loop is not None and swept_floats(callsite.rpartition(":")[0] if callsite else None,
                                             getattr(loop, "lineno", 0), reads)
