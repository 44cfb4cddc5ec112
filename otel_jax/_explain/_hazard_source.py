"""What the user's source says about a compile's future: read off the file, never the stack.

Three questions the hazard analysis asks of the user's code, answered from the file's syntax
tree (parsed once per file, a few files kept): does the statement that made the jit call
feed its result back into the same names (``state = step(state)``, ``params, loss, lr =
step(params, batch, lr)``), does it make an argument anew (``f(x, Config(2))``), and is a
function defined where it is made again and again (a loop body), reading what the loop
binds? Read on the thread that makes the record,
after the call; a file that cannot be read or parsed answers ``None``.
"""

from __future__ import annotations

import ast
import collections
import linecache
import threading
from dataclasses import dataclass

#: Parsed files kept (their syntax trees can be large): the callers of a program's jitted
#: functions are few files, read again at each first compile.
_KEPT_FILES = 16
#: The longest file parsed (characters): the user's scripts and modules, not generated code.
_MAX_SOURCE = 2_000_000

_BOUNDARIES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# Where code runs once per item: a loop's body, a comprehension's element.
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)


@dataclass(frozen=True, slots=True)
class _Index:
    """One file's statements, by line: assignments of a call, definitions, parents."""

    assigns: dict[int, ast.Assign | ast.AnnAssign]  # each line: the innermost spanning it
    definitions: dict[int, ast.AST]  # def, decorator and lambda lines
    parents: dict[ast.AST, ast.AST]
    made: dict[int, frozenset[str]]  # each line: what the calls spanning it call to make
    # an argument (``f(x, Config(2))``: ``Config``; ``Scaler(2).apply(x)``: ``Scaler``, the
    # object a method is called on; ``f(x, lambda v: v)``: ``<lambda>``)
    statements: dict[int, ast.stmt]  # each line: the innermost statement spanning it
    modules: frozenset[str]  # the names its imports bind (``jnp``, ``nn``, ``optax``)


def _indexed(tree: ast.Module) -> _Index:
    assigns: dict[int, ast.Assign | ast.AnnAssign] = {}
    definitions: dict[int, ast.AST] = {}
    parents: dict[ast.AST, ast.AST] = {}
    made: dict[int, frozenset[str]] = {}
    statements: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):  # breadth first: an inner statement comes later
        if isinstance(node, ast.stmt) and not isinstance(node, _BOUNDARIES):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                statements[line] = node
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                assigns[line] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                definitions.setdefault(line, node)
        elif isinstance(node, ast.Lambda):
            definitions.setdefault(node.lineno, node)
        if isinstance(node, ast.Call):
            arguments = (*node.args, *(k.value for k in node.keywords))
            names = frozenset(filter(None, (
                *(_callee(a) for a in arguments),
                _callee(getattr(node.func, "value", None)),
                *(LAMBDA for a in arguments if isinstance(a, ast.Lambda)))))
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                if names:
                    made[line] = made.get(line, frozenset()) | names
    modules = frozenset(alias.asname or alias.name.partition(".")[0]
                        for node in ast.walk(tree) if isinstance(node, ast.Import)
                        for alias in node.names) | frozenset(
        alias.asname or alias.name for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) for alias in node.names
        if alias.name[:1].islower())  # ``from flax import linen as nn``; not a class
    return _Index(assigns, definitions, parents, made, statements, modules)


#: What :func:`made_in_call` names for a lambda written among a call's arguments.
LAMBDA = "<lambda>"


def _callee(node: ast.AST | None) -> str | None:
    """The name a call expression calls (``Config(2)``, ``cfg.Config(2)``: ``Config``)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


_lock = threading.Lock()
_files: collections.OrderedDict[str, tuple[int, _Index | None]] = collections.OrderedDict()


def _index(filename: str) -> _Index | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    size = sum(map(len, lines))
    with _lock:
        kept = _files.get(filename)
        if kept is not None and kept[0] == size:
            _files.move_to_end(filename)
            return kept[1]
    index: _Index | None = None
    if size <= _MAX_SOURCE:
        try:
            index = _indexed(ast.parse("".join(lines), filename))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            index = None
    with _lock:
        _files[filename] = (size, index)
        while len(_files) > _KEPT_FILES:
            _files.popitem(last=False)
    return index


def quoted(filename: str | None, node: ast.AST) -> str:
    """``node`` as the file writes it (its own spacing and parentheses), on one line;
    rebuilt from the tree only where the file's text is not at hand."""
    lines = linecache.getlines(filename) if filename else []
    text = ast.get_source_segment("".join(lines), node) if lines else None
    return " ".join(text.split()) if text else ast.unparse(node)


def _expression(node: ast.AST | None) -> str | None:
    """A name the statement can both read and assign (``state``, ``self.state``,
    ``box['lr']``), as comparable text; ``None`` for anything else."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return ast.dump(node, annotate_fields=False).replace("Store()", "Load()")
    return None


@dataclass(frozen=True, slots=True)
class Feedback:
    """The assignment a jit call is the value of: its targets and its arguments, as
    comparable texts (``None`` where one is not a plain name)."""

    whole: str | None  # ``state = f(...)``: the one target
    targets: tuple[str | None, ...]  # ``a, b = f(...)``: each target, in order
    args: tuple[str | None, ...]  # the call's positional arguments
    keywords: tuple[tuple[str, str | None], ...]  # the call's keyword arguments
    starred: bool  # ``f(*xs)`` or ``f(**kw)``: positions are not known
    # run again by a loop of its own scope: the next call is this line's, given what came
    # back (else the next call, if any, is another line's, or a caller's with its own)
    in_loop: bool = False


def feedback(callsite: str | None) -> Feedback | None:
    """The assignment whose value is the call at ``callsite`` (``file:line``), or ``None``."""
    if not callsite:
        return None
    filename, _, line_text = callsite.rpartition(":")
    if not filename or not line_text.isdigit():
        return None
    line = int(line_text)
    index = _index(filename)
    best = index.assigns.get(line) if index is not None else None
    if best is None or not isinstance(best.value, ast.Call):
        return None
    call = best.value
    targets = best.targets if isinstance(best, ast.Assign) else [best.target]
    if len(targets) != 1:  # a = b = f(x): which name is fed back is not one
        return None
    target = targets[0]
    items = target.elts if isinstance(target, (ast.Tuple, ast.List)) else None
    loop = _loop_around(index, best) if index is not None else None
    elsewhere = _set_elsewhere(loop, target) if loop is not None else set()

    def fed(node: ast.AST) -> str | None:
        text = None if isinstance(node, ast.Starred) else _expression(node)
        return None if text in elsewhere else text

    return Feedback(
        whole=None if items is not None else fed(target),
        targets=tuple(fed(t) for t in items or ()),
        args=tuple(_expression(a) for a in call.args),
        keywords=tuple((k.arg, _expression(k.value)) for k in call.keywords if k.arg),
        starred=any(isinstance(a, ast.Starred) for a in call.args)
        or any(k.arg is None for k in call.keywords),
        in_loop=loop is not None)


def made_in_call(callsite: str | None) -> frozenset[str]:
    """What the call at ``callsite`` (``file:line``) calls to make its arguments: a class's
    name there says each run of the line passes a new object of it."""
    filename, _, line_text = (callsite or "").rpartition(":")
    if not filename or not line_text.isdigit():
        return frozenset()
    index = _index(filename)
    return index.made.get(int(line_text), frozenset()) if index is not None else frozenset()


def _loop_around(index: _Index, node: ast.AST) -> ast.AST | None:
    """The innermost loop (or comprehension) of ``node``'s own scope, which runs it again
    on each pass, if any."""
    parent = index.parents.get(node)
    while parent is not None and not isinstance(parent, _BOUNDARIES):
        if isinstance(parent, _LOOPS):
            return parent
        parent = index.parents.get(parent)
    return None


#: Nodes of an expression that is arithmetic on values: what it makes of an array is an
#: array again (``lr * 0.5``, ``-lr``, ``lr / cfg.decay``).
_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Attribute, ast.Subscript,
               ast.operator, ast.unaryop, ast.expr_context)


#: Builtins that give back one of their arguments or a value of the array's own type:
#: ``max(lr, 1e-3)`` of an array above the floor is that array.
KEEPING_BUILTINS = frozenset({"max", "min", "abs", "round"})


def keeps_type(value: ast.AST) -> bool:
    """Whether ``value`` is arithmetic on values and the builtins above only: what it
    makes of an array is an array of the array's type (a call of anything else, such as
    ``float(lr)``, may make anything)."""
    return all(isinstance(n, _ARITHMETIC) or isinstance(n, ast.Call) and isinstance(
        n.func, ast.Name) and n.func.id in KEEPING_BUILTINS and not n.keywords
        for n in ast.walk(value))


def _updates(node: ast.AST) -> list[ast.AST]:
    """The targets ``node`` updates from their own value, keeping its type: an augmented
    assignment (``lr *= 0.9``), or a name assigned arithmetic on itself (``lr = lr * 0.9``;
    an array times a Python scalar is an array of the array's type) or a builtin that
    keeps it (``lr = max(lr, 1e-3)``). Another call (``lr = float(lr)``) may make
    anything: not an update."""
    if isinstance(node, ast.AugAssign):
        return list(ast.walk(node.target))
    if (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(name := node.targets[0], ast.Name)
            and isinstance(node.value, (ast.BinOp, ast.UnaryOp, ast.Call))
            and keeps_type(node.value)
            and any(isinstance(n, ast.Name) and n.id == name.id
                    for n in ast.walk(node.value))):
        return [name]
    return []


def _set_elsewhere(loop: ast.AST, target: ast.AST) -> set[str]:
    """What ``loop`` assigns other than ``target`` (its own targets, the loop's): a name
    set again each pass (``lr = schedule(i)``, ``for lr in rates``) is not what the call
    fed back when the next call reads it. An update of what came back (``lr *= 0.9``,
    ``lr = lr * 0.9``) keeps it as typed: not counted."""
    kept = set(ast.walk(target))  # the call's own targets, and updates of what came back
    kept.update(t for n in ast.walk(loop) for t in _updates(n))
    return {text for n in ast.walk(loop) if n not in kept
            and isinstance(getattr(n, "ctx", None), ast.Store)
            and (text := _expression(n)) is not None}


#: Statements that run some passes only: a function made under one may be made once and
#: kept (``if key not in cache: cache[key] = jax.jit(...)``).
_CONDITIONAL = (ast.If, ast.Try, ast.IfExp, ast.BoolOp, ast.Match, ast.While)


def _each_pass(index: _Index, node: ast.AST, loop: ast.AST) -> bool:
    """Whether ``node`` runs on every pass of ``loop`` (nothing between them makes it
    conditional) and what it makes is not stored into a container or an attribute (a
    cache: ``cache[key] = jax.jit(...)``, ``self.fn = ...``), which may keep the first."""
    parent = index.parents.get(node)
    while parent is not None and parent is not loop:
        if isinstance(parent, _CONDITIONAL) or isinstance(parent, ast.Call) and isinstance(
                parent.func, ast.Attribute) and parent.func.attr in ("setdefault", "get"):
            return False
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any(not isinstance(t, ast.Name) for t in targets):
                return False
        parent = index.parents.get(parent)
    return parent is loop


@dataclass(frozen=True, slots=True)
class Definition:
    """Where a function is defined, as far as being made again goes."""

    # the innermost loop of its own scope (first and last lines), which makes it again on
    # each pass; ``None``: made once per run of its scope (a module, a factory's body)
    loop_lines: tuple[int, int] | None = None
    # the names that loop binds that the function reads (``act`` in ``for act in acts:
    # jax.jit(lambda x: act(x))``): made to differ per pass, maybe on purpose
    reads: tuple[str, ...] = ()
    # made on every pass of that loop and kept in a plain name; ``False``: under an ``if``
    # or stored in a container (a cache, which may keep the first and reuse it)
    each_pass: bool = True

    @property
    def loop(self) -> bool:
        return self.loop_lines is not None


def definition(filename: str | None, line: int | None) -> Definition | None:
    """Where the function (a ``def`` or ``lambda``) at ``filename:line`` is defined, or
    ``None`` when no definition starts there."""
    if not filename or not line:
        return None
    index = _index(filename)
    found = index.definitions.get(line) if index is not None else None
    if index is None or found is None:
        return None
    loop = _loop_around(index, found)
    if loop is None:
        return Definition()
    first = getattr(loop, "lineno", 0)
    return Definition((first, getattr(loop, "end_lineno", None) or first),
                      _loop_names_read(loop, found), _each_pass(index, found, loop))


#: What jits a function, by the name it is called by (``jax.jit``, ``nnx.jit``,
#: ``eqx.filter_jit``, ``pjit``).
_JITS = frozenset({"jit", "pjit", "filter_jit"})


def _is_jit(node: ast.AST) -> bool:
    """``jax.jit(...)``, ``jit(...)``, ``functools.partial(jax.jit, ...)`` or a bare
    ``jax.jit`` (a decorator)."""
    if isinstance(node, ast.Call):
        if _callee(node) == "partial" and node.args:
            return _is_jit(node.args[0])
        return _is_jit(node.func)
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in _JITS


@dataclass(frozen=True, slots=True)
class JitInLoop:
    """A jitted function the loop around its call makes anew on each pass, and calls."""

    line: int  # where the loop jits it
    # what the loop binds that the jitted expression reads: one per pass may be meant
    reads: tuple[str, ...]


def _jitted(node: ast.AST, modules: frozenset[str]) -> ast.AST | None:
    """What ``node`` (an assignment's value, or a definition) jits, where it is a new
    function object at each run: a lambda, a definition, what a call makes
    (``functools.partial(loss, ...)``), a bound method (``model.apply``: each access
    makes one). A name or a module's function (``jnp.tanh``) is the same object each
    time, which JAX's caches find again: ``None``."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node if any(_is_jit(d) for d in node.decorator_list) else None
    if not (isinstance(node, ast.Call) and _is_jit(node.func) and node.args):
        return None
    made = node.args[0]
    if isinstance(made, (ast.Lambda, ast.Call)):
        return made
    if isinstance(made, ast.Attribute):
        root: ast.AST = made
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in modules:
            return made
    return None


def jitted_in_loop(callsite: str | None) -> JitInLoop | None:
    """Whether the call at ``callsite`` calls a function jitted anew on each pass of the
    loop around it: ``jax.jit(f)(x)`` there, or ``g(x)`` where the same loop binds ``g``
    each pass from ``jax.jit(...)`` (``jax.jit(model.apply)``, ``jax.jit(partial(loss,
    ...))``, ``jax.jit(lambda ...)``) or a ``@jax.jit`` definition, before the call."""
    index, line = _at(callsite)
    statement = index.statements.get(line) if index is not None else None
    if index is None or statement is None:
        return None
    loop = _loop_around(index, statement)
    if loop is None:
        return None
    called: set[str] = set()
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Call) and (
                inner := _jitted(node.func, index.modules)) is not None:
            if _each_pass(index, statement, loop):
                return JitInLoop(node.lineno, _loop_names_read(loop, inner))
        elif isinstance(node.func, ast.Name):
            called.add(node.func.id)
    for node in ast.walk(loop):
        if getattr(node, "lineno", line) >= line or not _each_pass(index, node, loop):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in called:
            inner = _jitted(node.value, index.modules)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in called:
            inner = _jitted(node, index.modules)
        else:
            continue
        if inner is not None:
            return JitInLoop(node.lineno, _loop_names_read(loop, inner))
    return None


def _at(callsite: str | None) -> tuple[_Index | None, int]:
    filename, _, line_text = (callsite or "").rpartition(":")
    if not filename or not line_text.isdigit():
        return None, 0
    return _index(filename), int(line_text)


def in_loop(callsite: str | None) -> bool:
    """Whether the statement at ``callsite`` is run again by a loop of its own scope."""
    index, line = _at(callsite)
    statement = index.statements.get(line) if index is not None else None
    return statement is not None and index is not None \
        and _loop_around(index, statement) is not None


def runs_again(caller: str | None) -> bool | None:
    """Whether the line that called the function (``caller``) runs it again: in a loop
    of its scope, or in a comprehension on that line; ``None`` when not known."""
    index, line = _at(caller)
    statement = index.statements.get(line) if index is not None else None
    if index is None or statement is None:
        return None
    if _loop_around(index, statement) is not None:
        return True
    return any(isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
               and n.lineno <= line <= (n.end_lineno or n.lineno)
               for n in ast.walk(statement))


def line_runs_again(callsite: str | None, caller: str | None) -> bool:
    """Whether the statement at ``callsite`` is seen to run again: a loop of its own
    scope, or its function called by a line that runs it again (``caller``)."""
    return in_loop(callsite) or runs_again(caller) is True


def helper_feeds_back(callsite: str | None, caller: str | None, name: str) -> bool:
    """Whether the function holding the call at ``callsite`` (a helper) is called at
    ``caller`` by an assignment, run again by a loop of its own scope, that passes as the
    helper's parameter ``name`` (comparable text, a plain name there) a name it assigns
    what the helper returns to (``params, lr = train_one(params, lr)``): the helper is
    given back what it returned."""
    index, line = _at(callsite)
    statement = index.statements.get(line) if index is not None else None
    if index is None or statement is None or not caller:
        return False
    helper = index.parents.get(statement)
    while helper is not None and not isinstance(helper, _BOUNDARIES):
        helper = index.parents.get(helper)
    if not isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
    if helper.args.args and params[0] in ("self", "cls"):
        params = params[1:]  # called as a method: its first argument is the object
    parameter = next((p for p in params if _expression(ast.Name(p, ast.Load())) == name),
                     None)
    fed = feedback(caller)
    if parameter is None or fed is None or not fed.in_loop or fed.starred:
        return False
    position = params.index(parameter)
    given = fed.args[position] if position < len(fed.args) else dict(
        fed.keywords).get(parameter)
    return given is not None and given in {fed.whole, *fed.targets}


def parameters(filename: str | None, line: int | None) -> tuple[str, ...] | None:
    """The positional parameters of the function defined at ``filename:line``, in
    order (``None`` when no ``def`` starts there)."""
    index = _index(filename) if filename and line else None
    found = index.definitions.get(line) if index is not None and line else None
    if not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    arguments = found.args
    return tuple(a.arg for a in (*arguments.posonlyargs, *arguments.args))


def _names(node: ast.AST, ctx: type[ast.expr_context]) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _loop_names_read(loop: ast.AST, function: ast.AST) -> tuple[str, ...]:
    """The names ``loop`` binds (its targets, its body's assignments) that ``function``,
    defined in it, reads: its own parameters and locals shadow them; its defaults
    (``lambda x, a=act: ...``) are read where it is made."""
    own = _names(function, ast.Store)
    read = _names(function, ast.Load)
    arguments = getattr(function, "args", None)
    if isinstance(arguments, ast.arguments):
        read -= own | {a.arg for a in ast.walk(arguments) if isinstance(a, ast.arg)}
        for default in (*arguments.defaults, *filter(None, arguments.kw_defaults)):
            read |= _names(default, ast.Load)
    else:
        read -= own
    return tuple(sorted(read & (_names(loop, ast.Store) - own)))
