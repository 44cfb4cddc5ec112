"""What every hazard rule uses: the :class:`Hazard` record, a call's top-level arguments
in its signature's tree, the words for weak and strong typing, and the rule for a static
argument hashed by identity (said at a first compile, and by :mod:`._static_runs` at a run
of new values). The rules themselves: :mod:`._hazards` (the entry point) and the modules
it calls, each of which imports this one, never the entry point."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._capture._signature import Signature, StaticArg, StaticKind
from .._core._text import truncate
from .._core._vocab import CauseKind
from . import _hazard_source

#: The longest text a hazard says (its hint apart).
TEXT_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Hazard:
    """A recompile this compile shows is coming: where, what will happen, the fix."""

    kind: CauseKind  # the cause kind of the recompile it predicts
    path: str  # the argument path (``lr``, ``state['lr']``), the static's name, or ""
    text: str  # what will happen, in one line
    hint: str  # the fix
    warn: bool = True  # precise enough for a warning; ``False``: a note (INFO)

    @property
    def level(self) -> str:
        return "warning" if self.warn else "info"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "path": self.path, "text": self.text,
                "hint": self.hint, "level": self.level}


def tree_children(tree: Any) -> list[Any]:
    from jax import tree_util

    return list(tree_util.treedef_children(tree))


def is_leaf(tree: Any) -> bool:
    """Whether a treedef is one leaf (not a node, nor ``None``: a node of no leaf)."""
    return bool(tree.num_leaves == 1 and tree.num_nodes == 1)


def child_paths(path: str, node: tuple[Any, Any] | None, count: int) -> list[str]:
    """Each child's path under a node (its ``node_data()``), as JAX names them:
    ``p['k']``, ``p[0]``, ``p.field``."""
    if node is not None:
        node_type, data = node
        if node_type is dict and data is not None and len(data) == count:
            return [f"{path}[{k!r}]" for k in data]
        fields = getattr(node_type, "_fields", None)
        if isinstance(fields, tuple) and len(fields) == count:
            return [f"{path}.{f}" for f in fields]
    return [f"{path}[{i}]" for i in range(count)]


def node_at(signature: Signature, path: str, limit: int = 4096) -> Any | None:
    """The input tree's node at ``path`` (an argument's, or below it), or ``None``."""
    given = (inputs(signature) or {}).get(top_name(path))
    if given is None:
        return None
    level: list[tuple[Any, str]] = [(given[0], top_name(path))]
    while level and limit > 0:
        tree, at = level.pop()
        limit -= 1
        if at == path:
            return tree
        if is_leaf(tree) or not path.startswith(at):
            continue
        children = tree_children(tree)
        level.extend(zip(children, child_paths(at, tree.node_data(), len(children))))
    return None


def top_name(path: str) -> str:
    cut = min((i for i in (path.find("["), path.find(".")) if i >= 0), default=len(path))
    return path[:cut]


def inputs(signature: Signature) -> dict[str, tuple[Any, int]] | None:
    """Each top-level argument's tree and first leaf's index, by the parameter's name."""
    children = tree_children(signature.treedef)
    if len(children) != 2:  # not (args, kwargs): a wrapper library's own layout
        return None
    positional, keywords = tree_children(children[0]), tree_children(children[1])
    out: dict[str, tuple[Any, int]] = {}
    offset = 0
    paths = signature.paths
    for j, sub in enumerate(positional + keywords):
        leaves = sub.num_leaves
        if leaves and offset < len(paths):
            out[top_name(paths[offset])] = (sub, offset)
        elif j < len(positional) and j < len(signature.top_names):
            out[signature.top_names[j]] = (sub, offset)
        offset += leaves
    return out


def positional_names(signature: Signature) -> tuple[str, ...] | None:
    """The parameters the call's positional arguments fill, in order; ``None`` when a
    positional static argument (not in the traced tree) shifts them."""
    if any(s.kind is StaticKind.STATIC_ARGUMENT and not s.keyword for s in signature.statics):
        return None
    return signature.top_names


def value_text(static: StaticArg) -> str:
    """A static's value as the user wrote it: a Python float shown at the precision JAX
    computes with it (float32 unless x64 is on: ``0.1 * 0.243`` reads ``0.0243``, not
    ``0.024300000000000002``), the shortest text that reads back as that value."""
    if static.type != "float":
        return static.repr
    try:
        value = float(static.repr)  # a float's repr reads back as the very value
    except ValueError:
        return static.repr
    import jax
    import numpy as np

    wide = jax.dtypes.canonicalize_dtype(np.float64) == np.dtype(np.float64)  # x64 on
    if wide or not np.isfinite(value):
        return repr(value)
    return str(np.float32(value))


def weakness(weak: bool, kind: str = "") -> str:
    if weak:
        return f"weakly typed ({kind}: a Python scalar)" if kind else "weakly typed"
    return f"strongly typed ({kind})" if kind else "strongly typed"


#: Types hashed by identity whose objects are made once and passed again (a module-level
#: function, a class): not a hazard unless made per call, which the definition tells.
LONG_LIVED = frozenset({"function", "builtin_function_or_method", "type", "module",
                         "method", "builtin_method", "PjitFunction", "custom_jvp",
                         "custom_vjp"})


def by_identity(static: StaticArg, made: frozenset[str] = frozenset(),
                runs_again: Callable[[], bool] = lambda: False) -> list[Hazard]:
    """``made``: what the calling line calls to make its arguments (class names). A
    warning where the calling line makes a new object of the static's class; else a
    note: the same object passed again (a static ``self``, a module-level config) hits the
    cache, which nothing at the first compile tells apart from a new one each call.
    ``runs_again``: whether the calling line is seen to run again (a loop of its own
    scope, or its function called from one), asked only for a lambda written there."""
    short = static.type.rpartition(".")[2]
    if short in LONG_LIVED or static.type in LONG_LIVED:
        if "<lambda>" in static.repr and _hazard_source.LAMBDA in made:
            # written on the calling line: each run of the line makes another. A warning
            # where the line is seen to run again; a line run once (a test's body, a
            # script's last step) compiles once, so only a note. A function made
            # elsewhere (a local function a wrapper library passes as its static, the
            # same object at each call) is said only once seen compiling anew.
            return [Hazard(
                CauseKind.STATIC_ARGUMENT, static.name,
                truncate(f"static argument {static.name} is a lambda written on the calling "
                         f"line ({static.repr}), hashed by identity: each run of the line "
                         "makes a new one, which compiles again", TEXT_LIMIT),
                "define it once (module level) and pass that same function",
                warn=runs_again())]
        return []
    fresh = short in made
    return [Hazard(
        CauseKind.STATIC_ARGUMENT, static.name,
        truncate(f"static argument {static.name} is a {static.type}, hashed and compared "
                 "by identity (object.__hash__): every new object, even an equal one, "
                 "compiles again" + (f", and the calling line makes a new {short} each run"
                                     if fresh else "; the same object passed again hits "
                                     "the cache"), TEXT_LIMIT),
        f"give {short} value-based __eq__ and __hash__ (a frozen dataclass), or pass the "
        "same object each time", warn=fresh)]
