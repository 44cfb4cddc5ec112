"""Where in the user's source a compiled function lives, and which line called it."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from dataclasses import dataclass
from types import FrameType
from typing import Any

# Libraries whose frames are never "the user's callsite": JAX itself, otel_jax,
# the usual wrappers around jax.jit, and the standard library (functools,
# contextlib, threading).
_WRAPPER_PACKAGES = (
    "jax", "jaxlib", "otel_jax", "flax", "equinox", "optax", "haiku", "chex",
    "orbax", "penzai", "pytest", "_pytest", "pluggy", "opentelemetry",
)


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """Identity of a compiled function's source: what spans and metrics name."""

    qualname: str
    file: str | None = None
    line: int | None = None

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        """Compiles of the same source share history even across new objects."""
        return (self.qualname, self.file, self.line)


def _unwrap(fun: Any) -> Any:
    seen = 0
    while seen < 32:
        seen += 1
        if isinstance(fun, functools.partial):
            fun = fun.func
        elif hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        elif hasattr(fun, "__func__"):  # bound method
            fun = fun.__func__
        else:
            break
    return fun


def function_info(fun: Any) -> FunctionInfo:
    """Qualified name and definition site of ``fun`` (a function, partial or callable)."""
    target = _unwrap(fun)
    code = getattr(target, "__code__", None)
    qualname = getattr(target, "__qualname__", None)
    if code is None and not isinstance(target, type):
        call = getattr(type(target), "__call__", None)
        call_code = getattr(call, "__code__", None)
        if call_code is not None:
            code = call_code
            qualname = getattr(call, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = getattr(target, "__name__", None) or type(target).__name__
    if code is None:
        return FunctionInfo(qualname)
    return FunctionInfo(qualname, code.co_filename, code.co_firstlineno)


def qualname_at(file: str, line: int, name: str) -> str | None:
    """The ``__qualname__`` of the function ``name`` whose code starts at ``file:line``.

    A jaxpr's debug info keeps only ``"name at file:line"`` (the plain name and
    ``co_firstlineno``); the qualified name (``train.<locals>.loss``,
    ``Model.loss``) follows from where the definition sits in the source.
    """
    return _qualnames(file).get((line, name))


@functools.lru_cache(maxsize=64)
def _qualnames(file: str) -> dict[tuple[int, str], str]:
    """``(co_firstlineno, name) -> qualname`` of every function defined in ``file``."""
    import ast
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return {}
    out: dict[tuple[int, str], str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = "<lambda>" if isinstance(child, ast.Lambda) else child.name
                qualname = prefix + name
                # co_firstlineno is the first decorator's line when there is one.
                lines = [d.lineno for d in getattr(child, "decorator_list", [])[:1]]
                out.setdefault((lines[0] if lines else child.lineno, name), qualname)
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
    return tuple(os.path.normcase(os.path.realpath(d)) + os.sep for d in dirs if d)


_skip_dirs: dict[str, str] = {}


_library_dirs_seen: tuple[int, tuple[str, ...]] = (-1, ())


def _library_dirs() -> tuple[str, ...]:
    # Only packages already imported can appear on the stack, so resolving
    # their directories lazily keeps this free of imports; they are looked for
    # again only when the set of imported modules grew.
    global _library_dirs_seen
    modules = len(sys.modules)
    if _library_dirs_seen[0] == modules:
        return _library_dirs_seen[1]
    for name in _WRAPPER_PACKAGES:
        if name not in _skip_dirs:
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None)
            if path:
                _skip_dirs[name] = os.path.normcase(
                    os.path.dirname(os.path.realpath(path))) + os.sep
    dirs = tuple(_skip_dirs.values())
    _library_dirs_seen = (modules, dirs)
    return dirs


_frame_verdict: dict[str, bool] = {}


def _is_library_file(filename: str, package_dirs: tuple[str, ...]) -> bool:
    verdict = _frame_verdict.get(filename)
    if verdict is None:
        if filename.startswith("<frozen"):
            verdict = True
        else:
            real = os.path.normcase(os.path.realpath(filename))
            in_stdlib = real.startswith(_stdlib_dirs()) and not any(
                part in real for part in ("site-packages", "dist-packages"))
            verdict = in_stdlib or real.startswith(package_dirs)
        if len(_frame_verdict) > 4096:
            _frame_verdict.clear()
        _frame_verdict[filename] = verdict
    return verdict


def owner_info(fun: Any) -> FunctionInfo | None:
    """``MLP.apply`` for a library method bound to an instance of a user's class.

    ``jax.jit(model.apply)`` with a flax module jits ``flax.linen.Module.apply``:
    the user's subclass, not the library's method, names what was compiled.
    """
    owner = getattr(fun, "__self__", None)
    method = getattr(fun, "__name__", None)
    if owner is None or method is None or isinstance(owner, type):
        return None
    cls = type(owner)
    for klass in cls.__mro__:
        for value in vars(klass).values():
            code = getattr(_unwrap(value), "__code__", None)
            if code is not None and not is_library_file(code.co_filename):
                return FunctionInfo(f"{cls.__qualname__}.{method}", code.co_filename,
                                    _class_line(klass, code.co_firstlineno))
        if klass.__module__ != cls.__module__:
            break
    return None


def _class_line(klass: type, fallback: int) -> int:
    """The ``class`` line: the first method's line, walked back to its ``class`` statement."""
    try:
        import linecache

        filename = sys.modules[klass.__module__].__file__ or ""
        for line in range(fallback, max(0, fallback - 2000), -1):
            if linecache.getline(filename, line).lstrip().startswith(
                    f"class {klass.__name__}"):
                return line
    except Exception:
        pass
    return fallback


def is_library_file(filename: str) -> bool:
    """Whether ``filename`` belongs to JAX, a wrapper library or the standard library."""
    return _is_library_file(filename, _library_dirs())


_jax_verdict: dict[str, bool] = {}


def is_jax_file(filename: str) -> bool:
    """Whether ``filename`` is part of JAX itself (its own jitted library functions)."""
    verdict = _jax_verdict.get(filename)
    if verdict is None:
        _library_dirs()
        jax_dirs = tuple(_skip_dirs[n] for n in ("jax", "jaxlib") if n in _skip_dirs)
        verdict = bool(jax_dirs) and os.path.normcase(
            os.path.realpath(filename)).startswith(jax_dirs)
        if len(_jax_verdict) > 4096:
            _jax_verdict.clear()
        _jax_verdict[filename] = verdict
    return verdict


def find_user_function(values: Any, depth: int = 4, budget: int = 64) -> Any | None:
    """The first function defined in user code inside ``values`` (nested tuples/lists).

    Wrapper libraries such as ``equinox.filter_jit`` jit a function of their
    own and pass the user's function as a static argument: the user's one is
    the function worth naming.
    """
    stack = [(v, depth) for v in reversed(list(values))]
    while stack and budget > 0:
        value, d = stack.pop()
        budget -= 1
        if isinstance(value, (tuple, list)):
            if d > 0:
                stack.extend((v, d - 1) for v in reversed(value[:16]))
            continue
        target = _unwrap(value)
        code = getattr(target, "__code__", None)
        if code is None and callable(target) and not isinstance(target, type):
            code = getattr(getattr(type(target), "__call__", None), "__code__", None)
        if code is not None and not is_library_file(code.co_filename):
            return value
    return None


def find_user_function_in_closure(fun: Any, depth: int = 6, budget: int = 64) -> Any | None:
    """A user's function that a library's jitted function wraps or closes over, or ``None``.

    ``jax.pmap(f)`` jits a function of JAX's own that reaches ``f`` through
    wrappers, bound methods and closures (as a ``lu.WrappedFun``, whose ``.f``
    is the user's function).
    """
    stack = [(fun, depth)]
    seen: set[int] = set()
    while stack and budget > 0:
        value, d = stack.pop()
        budget -= 1
        if id(value) in seen:
            continue
        seen.add(id(value))
        try:
            code = getattr(value, "__code__", None)
            filename = code.co_filename if code is not None else None
        except Exception:
            continue
        if isinstance(filename, str) and not is_library_file(filename):
            return value
        if d > 0:
            stack.extend((child, d - 1) for child in reversed(_inner_callables(value)))
    return None


def _inner_callables(value: Any) -> list[Any]:
    """What ``value`` wraps: partials, ``__wrapped__``, bound methods' owners, closures."""
    out: list[Any] = []
    try:
        _collect_inner(value, out)
    except Exception:  # an object whose attribute lookup raises: look no deeper
        pass
    return out


def _collect_inner(value: Any, out: list[Any]) -> None:
    if isinstance(value, functools.partial):
        out.append(value.func)
    for attr in ("__wrapped__", "__func__", "f"):
        inner = getattr(value, attr, None)
        if callable(inner):
            out.append(inner)
    owner = getattr(value, "__self__", None)
    if owner is not None and not isinstance(owner, type) and callable(
            getattr(owner, "f", None)):
        out.append(owner)
    for cell in getattr(value, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(contents) or callable(getattr(contents, "f", None)):
            out.append(contents)


def user_stacklevel(limit: int = 200) -> int:
    """The ``stacklevel`` for ``warnings.warn`` called by this function's caller that
    points at the user's own code: JAX, otel_jax and wrapper-library frames are
    walked out of. 2 (the caller's caller) when no user frame is found.
    """
    dirs = _library_dirs()
    try:
        frame: FrameType | None = sys._getframe(1)
    except ValueError:
        return 2
    level = 1
    while frame is not None and level < limit:
        if not _is_library_file(frame.f_code.co_filename, dirs):
            return level
        frame = frame.f_back
        level += 1
    return 2


def user_callsite(skip: int = 1, limit: int = 200) -> str | None:
    """``file:line`` of the innermost frame that is the user's own code."""
    dirs = _library_dirs()
    frame: FrameType | None
    try:
        frame = sys._getframe(skip)
    except ValueError:
        return None
    depth = 0
    while frame is not None and depth < limit:
        filename = frame.f_code.co_filename
        if not _is_library_file(filename, dirs):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
        depth += 1
    return None
