"""``function_identity`` hazards where the jitted function is made anew each time the code
that makes it runs again, though no loop of the call's own makes it there.

Read off the user's source at the call line: where the jitted function the call calls
was made, in the same scope (``jax.jit(self._forward)(x)`` on the line;
``forward = jax.jit(...)``, ``self._fn = jax.jit(...)`` or a ``@jax.jit`` definition on
an earlier line of the same body, not under an ``if``), of what is a new function object
at each run (a bound method, a partial, a lambda, a function defined in that body).

- *Made per run of a function*: made in a function's body, outside any loop of it
  (``predict``, ``__call__``, a request handler): each call of that function makes a new
  jitted function, which compiles again. Judged by who calls the function, from the line
  that called it (the caller's frame): a warning where that line runs it again (a loop,
  a comprehension); where it is not seen (a thread pool, a server's worker), a note for a
  method at the first compile, and a warning at the second compile, which shows the
  function made it anew; nothing for a function its visible caller runs once (``main()``).
- *Made per pass of an outer loop*: made on each pass of a loop around the loop that
  calls it (once per epoch, once per sweep item), said as the loop rule says it (see
  :mod:`._hazard_sweep` for the items of a sweep).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .._capture._source import FunctionInfo
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source as _src
from . import _hazard_sweep

_TEXT_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Made:
    """Where the jitted function a call calls is made, in the call's own scope."""

    line: int  # the line that makes it
    scope: str  # the function whose body makes it ("" at module level)
    method: bool  # that function is a method (its first parameter is ``self``)
    # the innermost loop of that scope around the making, when the making is in one:
    # (first line, last line), and the names it binds that the made function reads
    loop_lines: tuple[int, int] | None = None
    reads: tuple[str, ...] = ()


def _function_of(index: _src._Index, node: ast.AST) -> ast.AST | None:
    parent = index.parents.get(node)
    while parent is not None and not isinstance(parent, _src._BOUNDARIES):
        parent = index.parents.get(parent)
    return parent


def _unconditional(index: _src._Index, node: ast.AST, until: ast.AST | None) -> bool:
    """Whether ``node`` runs each time ``until`` (a loop, a function) runs: under no
    ``if``, ``try``, ``while`` or a cache's ``get``/``setdefault`` between them."""
    parent = index.parents.get(node)
    while parent is not None and parent is not until:
        if isinstance(parent, _src._CONDITIONAL) or isinstance(parent, ast.Call) and (
                isinstance(parent.func, ast.Attribute)
                and parent.func.attr in ("setdefault", "get")):
            return False
        parent = index.parents.get(parent)
    return True


def _local_functions(scope: ast.AST | None) -> set[str]:
    """The functions (``def``, ``name = lambda``) a function's body defines: a new
    object at each run of it."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    names = set()
    for node in ast.walk(scope):
        if node is scope:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _new_each_run(node: ast.AST, index: _src._Index, local: set[str]) -> ast.AST | None:
    """What ``node`` (a jit call, or a definition) jits, when it is a new function object
    each time the line runs: as the loop rule reads it, or a function the same body
    defines (``jax.jit(score)`` of a local ``def score``)."""
    made = _src._jitted(node, index.modules)
    if made is not None:
        return made
    if isinstance(node, ast.Call) and _src._is_jit(node.func) and node.args \
            and isinstance(node.args[0], ast.Name) and node.args[0].id in local:
        return node.args[0]
    return None


def _key(node: ast.AST) -> str | None:
    """The text a callee or an assignment target is compared by (``fn``, ``self._fn``)."""
    return _src._expression(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def made_where(callsite: str | None) -> Made | None:
    """Where the call at ``callsite`` has its jitted function made, in its own scope,
    each time that code runs (``None``: not found, or made once and kept)."""
    index, line = _src._at(callsite)
    statement = index.statements.get(line) if index is not None else None
    if index is None or statement is None:
        return None
    scope = _function_of(index, statement)
    local = _local_functions(scope)
    making: ast.AST | None = None
    made: ast.AST | None = None
    called: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Call) and (
                    inner := _new_each_run(node.func, index, local)) is not None:
                making, made = statement, inner
                break
            if (key := _key(node.func)) is not None:
                called.add(key)
    if making is None:
        body: ast.AST = statement  # the scope's node: the function, or the module
        while body is not scope and (parent := index.parents.get(body)) is not None:
            body = parent
        for node in ast.walk(body):
            if getattr(node, "lineno", line) >= line or _function_of(index, node) is not scope:
                continue
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and _key(node.targets[0]) in called:
                inner = _new_each_run(node.value, index, local)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and _key(ast.Name(node.name, ast.Load())) in called:
                inner = _new_each_run(node, index, local)
            else:
                continue
            if inner is not None:
                making, made = node, inner  # the last one before the call wins
    if making is None or made is None:
        return None
    loop = _src._loop_around(index, making)
    if not _unconditional(index, making, loop if loop is not None else scope):
        return None  # made on some runs only: a cache, made once and kept
    name = getattr(scope, "name", "")
    arguments = getattr(scope, "args", None)
    first = arguments.args[0].arg if arguments is not None and arguments.args else ""
    if loop is None:
        return Made(getattr(making, "lineno", line), name, first in ("self", "cls"))
    start = getattr(loop, "lineno", 0)
    return Made(getattr(making, "lineno", line), name, first in ("self", "cls"),
                (start, getattr(loop, "end_lineno", None) or start),
                _src._loop_names_read(loop, made))


def made_per_run(info: FunctionInfo, count: int, callsite: str | None,
                 caller: str | None) -> list[_parts.Hazard]:
    """The hazards of a jitted function made where the code that makes it runs again
    (see the module's doc): at the first compile, and at the second where the first
    could not tell."""
    made = made_where(callsite)
    if made is None:
        return []
    if made.loop_lines is not None:
        line = _src._at(callsite)[1]
        if count != 1 or not made.loop_lines[0] <= line <= made.loop_lines[1] \
                or _src.jitted_in_loop(callsite) is not None:
            # called after the loop (the last one made, once), or said by the loop rule
            # (``_hazards._made_again``: the loop around the call makes it)
            return []
        return _hazard_sweep.per_pass(info, made.line, made.loop_lines, made.reads,
                                      callsite)
    if not made.scope or made.scope.startswith("test"):
        # module level, outside any loop: made once; a test's body runs once per case
        return []
    again = _src.runs_again(caller)
    if again is False:
        return []  # a line that runs it once (``main()``; twice in a row, no more)
    if count == 1:
        if again is None and not made.method:
            return []  # a function its unseen caller may run once
        warn = bool(again)
    elif again:
        return []  # warned at the first compile
    else:
        warn = True  # called from where it is not seen, and made anew: it runs again
    where = f"{made.scope}()" if made.scope else "its scope"
    called_at = caller.rpartition(":")[2] if caller else ""
    who = (f"which line {called_at} runs again (a loop)" if again else
           "called again (its second compile shows it made anew)" if warn else
           "a method, likely called again")
    return [_parts.Hazard(
        CauseKind.FUNCTION_IDENTITY, "",
        truncate(f"{info.qualname} is jitted anew at each run of {where} (line "
                 f"{made.line}), {who}: each run makes a new jitted function, which "
                 "compiles again", _TEXT_LIMIT),
        f"jit it once, outside {where} ("
        + ("in __init__ or at module level" if made.method else "at module level")
        + "), keep that jitted function and call it each time", warn=warn)]

