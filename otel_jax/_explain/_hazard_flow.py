"""What a call returns reaching its next call another way than by the calling line's
own targets, read off the user's source:

- *routes*: the call's result is named, then taken apart on a later line of the loop,
  through aliases, items, attributes, arithmetic and the builtins that keep an array an
  array (``out = step(params, lr)``, then ``lr = out["lr"]``; ``lr = result.lr``;
  ``new_lr = ...``, then ``lr = max(new_lr, 1e-3)``; a field of a returned dataclass,
  ``params = out.params``; a field of a state renewed from the result, ``state =
  state.replace(params=new_params)``, which the next call is given as ``state.params``):
  :func:`routes` finds them and :func:`part` the output they reach; the fixed-point
  rule (:mod:`._hazard_fixpoint`) compares that output with the input it becomes (an
  output computed only from weak inputs and Python scalars stays weak, and feeding it
  back compiles nothing).
- *accumulated*: a Python scalar the loop updates by arithmetic from what another jitted
  function of the file returns (a running mean of the loss, started at ``0.0``), passed
  to this function before it is an array: from the next call on it is one (a
  ``weak_type`` warning: the loop runs the call again with the strongly typed value).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._capture._jax._outputs import Outputs, aval_facts
from .._capture._signature import Signature
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_parts as _parts
from . import _hazard_source as _src

#: An accessor from a call's result to one of its parts: ``("index", 2)``,
#: ``("key", "lr")``, ``("attr", "temperature")``.
Access = tuple[str, Any]
#: How far a route is followed through the loop's assignments (aliases of aliases).
_ROUNDS = 4
_SOURCE_LIMIT = 80
_TEXT_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Route:
    """A name the call is given that a later line of its loop sets from what the call
    returned (not the calling line's own target: that is the plain ``weak_type`` rule)."""

    argument: str  # the name's comparable text (as ``Feedback.args`` has it)
    access: tuple[Access, ...]  # from the call's result to the part it is set from
    line: int  # the line that sets it
    source: str  # that line, as written (bounded)


def _scope_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``root`` in its own scope (not in a nested def, lambda or class)."""
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _src._BOUNDARIES):
            stack.extend(ast.iter_child_nodes(node))


def _constant_like(node: ast.AST, bound: dict[str, tuple[Access, ...]]) -> bool:
    """Arithmetic that reads nothing the call returned (``0.5``, ``cfg.floor``)."""
    return _src.keeps_type(node) and not any(
        isinstance(n, ast.Name) and n.id in bound for n in ast.walk(node))


def _derive(node: ast.AST, bound: dict[str, tuple[Access, ...]]) -> tuple[Access, ...] | None:
    """The part of the call's result ``node`` is, kept an array of its type, or ``None``."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, (str, int)):
        base = _derive(node.value, bound)
        kind = "key" if isinstance(node.slice.value, str) else "index"
        return None if base is None else (*base, (kind, node.slice.value))
    if isinstance(node, ast.Attribute):
        base = _derive(node.value, bound)
        return None if base is None else (*base, ("attr", node.attr))
    if isinstance(node, ast.UnaryOp):
        return _derive(node.operand, bound)
    parts: list[ast.AST]
    if isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _src.KEEPING_BUILTINS and not node.keywords:
        parts = list(node.args)
    else:
        return None
    derived = [d for d in (_derive(p, bound) for p in parts) if d is not None]
    rest = [p for p in parts if _derive(p, bound) is None]
    if len(derived) != 1 or not all(_constant_like(p, bound) for p in rest):
        return None
    return derived[0]


def _file(callsite: str | None) -> str | None:
    return callsite.rpartition(":")[0] if callsite else None


def routes(callsite: str | None) -> tuple[Route, ...]:
    """The names the call at ``callsite`` is given that a later line of the loop around it
    sets from parts of what it returned, with nothing else in the loop setting them."""
    index, line = _src._at(callsite)
    statement = index.assigns.get(line) if index is not None else None
    if index is None or not isinstance(statement, ast.Assign) \
            or len(statement.targets) != 1 or not isinstance(statement.value, ast.Call):
        return ()
    loop = _src._loop_around(index, statement)
    if loop is None:
        return ()
    target = statement.targets[0]
    own = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    bound: dict[str, tuple[Access, ...]] = {}
    if isinstance(target, ast.Name):
        bound[target.id] = ()
    elif isinstance(target, (ast.Tuple, ast.List)):
        bound.update((t.id, (("index", i),)) for i, t in enumerate(target.elts)
                     if isinstance(t, ast.Name))
    assigns = sorted((n for n in _scope_nodes(loop) if isinstance(n, ast.Assign)
                      and n is not statement and len(n.targets) == 1),
                     key=lambda n: n.lineno)
    setters: dict[str, ast.Assign] = {}  # a name set from the result -> the line setting it
    for _ in range(_ROUNDS):
        grown = False
        for node in assigns:
            for name, value in _pairs(node.targets[0], node.value, bound):
                access = _derive(value, bound)
                if access is None or name in own or name in setters:
                    continue
                bound[name], setters[name] = access, node
                grown = True
        if not grown:
            break
    found: list[Route] = []
    for name, node in setters.items():
        stores = [n for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == name
                  and isinstance(n.ctx, ast.Store)]
        # set anew elsewhere in the loop (``lr = schedule(i)``, ``for lr in rates``):
        # what the next call reads is not (only) what came back
        if any(not _within(s, node) for s in stores):
            continue
        found.append(Route(_src._expression(ast.Name(name, ast.Load())) or name,
                           bound[name], node.lineno,
                           truncate(_src.quoted(_file(callsite), node), _SOURCE_LIMIT)))
    for node in assigns:
        for argument, access in _replaced_fields(node, bound, loop):
            found.append(Route(argument, access, node.lineno,
                               truncate(_src.quoted(_file(callsite), node), _SOURCE_LIMIT)))
    return tuple(found)


def _replaced_fields(node: ast.Assign, bound: dict[str, tuple[Access, ...]],
                     loop: ast.AST) -> list[tuple[str, tuple[Access, ...]]]:
    """The fields a line renews an object with from parts of the call's result, each as
    the argument text the next call reads it by and the part it is set from: ``state =
    state.replace(params=new_params)`` (a flax ``TrainState``, a flax struct),
    ``dataclasses.replace(state, params=...)``, a NamedTuple's ``state._replace(...)``,
    where ``new_params`` came back from the call: the next call given ``state.params`` is
    given it. Nothing else in the loop may set the object or the field."""
    target, value = node.targets[0], node.value
    text = _src._expression(target)
    if text is None or not isinstance(value, ast.Call):
        return []
    func = value.func
    renewed = (isinstance(func, ast.Attribute) and func.attr in ("replace", "_replace")
               and not value.args and _src._expression(func.value) == text) or (
        _src._callee(value) == "replace" and len(value.args) == 1
        and _src._expression(value.args[0]) == text)
    if not renewed:
        return []
    found: list[tuple[str, tuple[Access, ...]]] = []
    for keyword in value.keywords:
        access = _derive(keyword.value, bound) if keyword.arg else None
        if access is None or keyword.arg is None:
            continue
        field = _src._expression(ast.Attribute(target, keyword.arg, ast.Load()))
        # set anew elsewhere in the loop (``state = make_state()``, ``state.params =
        # ...``): what the next call reads is not (only) what came back
        others = [n for n in ast.walk(loop) if isinstance(getattr(n, "ctx", None), ast.Store)
                  and _src._expression(n) in (text, field) and not _within(n, node)]
        if field is not None and not others:
            found.append((field, access))
    return found


def _pairs(target: ast.AST, value: ast.expr, bound: dict[str, tuple[Access, ...]],
           ) -> list[tuple[str, ast.expr]]:
    """``(name, value)`` each plain name ``target`` is assigned: ``a = v``; ``a, b = v1,
    v2``; ``a, b = out`` (unpacking a part of the result: its items by position)."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if not isinstance(target, (ast.Tuple, ast.List)):
        return []
    items = target.elts
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(items):
        return [(t.id, v) for t, v in zip(items, value.elts) if isinstance(t, ast.Name)]
    if _derive(value, bound) is not None and not any(isinstance(t, ast.Starred)
                                                     for t in items):
        return [(t.id, ast.Subscript(value, ast.Constant(i), ast.Load()))
                for i, t in enumerate(items) if isinstance(t, ast.Name)]
    return []


def _within(node: ast.AST, statement: ast.AST) -> bool:
    return any(n is node for n in ast.walk(statement))


def part(outputs: Outputs, access: tuple[Access, ...]) -> tuple[Any, list[int]] | None:
    """The tree of the outputs' part ``access`` reaches, and its leaves' indices; ``None``
    past a node other than a tuple, list, NamedTuple, dict or dataclass. Read off the
    tree's own nodes (their types and keys) and a dataclass's fields
    (:func:`_field_child`): no user class is rebuilt, no user code runs."""
    tree, first = outputs.tree, 0
    for kind, key in access:
        node = tree.node_data()  # (type, keys) of the top node; ``None`` for a leaf
        if node is None:
            return None
        node_type, data = node
        fields = getattr(node_type, "_fields", None)  # a NamedTuple's
        at: int | None = None
        if kind == "index" and (node_type in (tuple, list) or fields is not None):
            at = key
        elif kind == "key" and node_type is dict and key in (data or ()):
            at = list(data).index(key)
        elif kind == "attr" and isinstance(fields, tuple) and key in fields:
            at = fields.index(key)
        children = _parts.tree_children(tree)
        if kind == "attr" and at is None:
            at = _field_child(node, key, len(children))
        if not isinstance(at, int) or not 0 <= at < len(children):
            return None
        first += sum(c.num_leaves for c in children[:at])
        tree = children[at]
    return tree, list(range(first, first + tree.num_leaves))


#: The field metadata that keeps a dataclass's field out of its pytree's children:
#: ``jax.tree_util.register_dataclass`` and equinox (``static=True``), flax's struct
#: (``pytree_node=False``).
_STATIC_FIELD = (("static", True), ("pytree_node", False))


def _field_child(node: tuple[Any, Any], name: str, count: int) -> int | None:
    """Which of the ``count`` children of a dataclass node (its ``node_data()``) holds the
    field ``name``. A node that keeps its fields' names as its data (chex's dataclass,
    its fields sorted by name) says their order; a flax struct, a dataclass registered
    with ``register_dataclass`` and an equinox Module flatten their fields in the order
    the class declares them, less those their metadata marks static. Read off the node's
    data and the class's fields: no user class is rebuilt, no user code runs. ``None``
    where the count differs (fields kept out otherwise, as a registration's own
    ``meta_fields`` list does), the class flattens itself (``tree_flatten``: its own
    order), or the field is not a child."""
    import dataclasses

    node_type, data = node
    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return None
    try:
        declared = list(dataclasses.fields(node_type))
        names = {f.name for f in declared}
        if isinstance(data, tuple) and len(data) == count and data \
                and all(isinstance(k, str) for k in data) and set(data) <= names:
            fields = list(data)  # the names, in their children's order
        elif any(hasattr(node_type, m) for m in ("tree_flatten", "tree_flatten_with_keys")):
            return None
        else:
            fields = [f.name for f in declared
                      if not any(f.metadata.get(k, not v) == v for k, v in _STATIC_FIELD)]
    except Exception:  # metadata that does not read as a mapping: not one of these
        return None
    if len(fields) != count or name not in fields:
        return None
    return fields.index(name)


def accessed(access: tuple[Access, ...]) -> str:
    part = "".join(f".{k}" if kind == "attr" else f"[{k!r}]" for kind, k in access)
    return f"{part} of the result" if part else "the result"


# --- accumulated: a Python scalar that a loop turns into an array --------------------------

def _jitted_names(index: _src._Index) -> frozenset[str]:
    """The names the file binds to a jitted function: ``@jax.jit`` definitions and
    ``step = jax.jit(...)`` (``nnx.jit``, ``eqx.filter_jit``) assignments."""
    names = {n.name for n in index.definitions.values()
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(_src._is_jit(d) for d in n.decorator_list)}
    names.update(t.id for n in index.assigns.values() if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call) and not isinstance(n.value.func, ast.Call)
                 and _src._is_jit(n.value) for t in n.targets if isinstance(t, ast.Name))
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class Accumulator:
    """A name passed to the call that the loop around it updates by arithmetic from what
    another jitted function returns."""

    argument: int | str  # its position among the call's arguments, or its keyword
    name: str
    source: str  # the jitted function whose result it takes in
    line: int  # the line that updates it


def accumulators(callsite: str | None, function: str) -> tuple[Accumulator, ...]:
    """The accumulators the call of ``function`` (its plain name) at ``callsite`` is
    given: each set in the loop around the call only by arithmetic (``+=``, ``a = a +
    (loss - a) / n``) that reads a name the loop sets from a call of a function the file
    jits (``params, loss = train_step(...)``)."""
    index, line = _src._at(callsite)
    statement = index.statements.get(line) if index is not None else None
    if index is None or statement is None:
        return ()
    calls = [n for n in ast.walk(statement) if isinstance(n, ast.Call)
             and _src._callee(n) == function]
    loop = _src._loop_around(index, statement)
    if len(calls) != 1 or loop is None:
        return ()
    call = calls[0]
    jitted = _jitted_names(index)
    results: dict[str, str] = {}  # a name the loop sets from a jitted call -> its function
    for node in _scope_nodes(loop):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id in jitted \
                and node.value.func.id != function:
            results.update((n.id, node.value.func.id) for t in node.targets
                           for n in ast.walk(t) if isinstance(n, ast.Name))
    given: list[tuple[int | str, ast.expr]] = [
        *enumerate(call.args), *((k.arg, k.value) for k in call.keywords if k.arg)]
    found: list[Accumulator] = []
    for where, value in given:
        if not isinstance(value, ast.Name) or value.id in results:
            continue
        updates = _updates_of(loop, value.id)
        if not updates:
            continue
        sources = {results[n.id] for u in updates for n in ast.walk(u.value)
                   if isinstance(n, ast.Name) and n.id in results}
        if len(sources) == 1:
            found.append(Accumulator(where, value.id, sources.pop(), updates[0].lineno))
    return tuple(found)


def _updates_of(loop: ast.AST, name: str) -> list[ast.Assign | ast.AugAssign]:
    """The loop's assignments of ``name``, when each is arithmetic (nothing else sets it
    in the loop: not a loop target, not ``a = float(...)``); else none."""
    found: list[ast.Assign | ast.AugAssign] = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            owner = next((s for s in ast.walk(loop) if isinstance(s, (ast.Assign, ast.AugAssign))
                          and any(t is node for t in (
                              s.targets if isinstance(s, ast.Assign) else [s.target]))), None)
            if owner is None or not _src.keeps_type(owner.value):
                return []
            found.append(owner)
    return found


def accumulated(signature: Signature, callsite: str | None,
                function: str) -> list[_parts.Hazard]:
    """A rank-0 input the call is given as a Python scalar (weakly typed) that the loop
    around it turns into an array from another jitted function's result (see the
    module's doc)."""
    if not any(getattr(a, "weak_type", False) for a in signature.avals):
        return []
    found_accumulators = accumulators(callsite, function)
    inputs = _parts.inputs(signature)
    names = _parts.positional_names(signature)
    if not found_accumulators or not inputs or names is None:
        return []
    found: list[_parts.Hazard] = []
    for acc in found_accumulators:
        parameter = acc.argument if isinstance(acc.argument, str) else (
            names[acc.argument] if acc.argument < len(names) else None)
        given = inputs.get(parameter) if parameter is not None else None
        if given is None or given[0].num_leaves != 1:
            continue
        facts = aval_facts(signature.avals[given[1]])
        if facts is None or facts[0] != () or not facts[2]:
            continue  # not a weakly typed scalar: an array in, an array later
        path = signature.paths[given[1]]
        found.append(_parts.Hazard(
            CauseKind.WEAK_TYPE, path,
            truncate(f"{path} goes in {_parts.weakness(True, signature.types[given[1]])}, "
                     f"and the loop around the call updates {acc.name} from what "
                     f"{acc.source} (jitted) returns (line {acc.line}): from the next call it "
                     "is an array, strongly typed, which compiles again", _TEXT_LIMIT),
            "start it as an array (jnp.zeros((), jnp.float32)) or keep it a Python float "
            "(float(loss)), so that every call is given it typed alike"))
    return found
