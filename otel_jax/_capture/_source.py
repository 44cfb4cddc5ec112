"""Where in the user's source a compiled function lives, and which line called it."""

from __future__ import annotations

import functools
import os
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._core import _failopen
from .._core._walk import walk


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


def _layers(fun: Any) -> Iterator[Any]:
    """``fun``, then each function it stands for in turn, outermost first: a partial's
    function, a wrapper's ``__wrapped__``, a bound method's function (at most 32)."""
    for _ in range(32):
        yield fun
        if isinstance(fun, functools.partial):
            fun = fun.func
        elif hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        elif hasattr(fun, "__func__"):  # bound method
            fun = fun.__func__
        else:
            return
    yield fun


def _unwrap(fun: Any) -> Any:
    *_, innermost = _layers(fun)
    return innermost


def wrapped_by_library(fun: Any) -> bool:
    """Whether a layer of ``fun`` (:func:`_layers`) is code of a library other than JAX
    (a callable object whose ``__call__`` is flax's, equinox's): such a layer may return
    something else than the function it wraps (``nnx.jit``'s returns the user's result
    beside its own state updates). Partials, bound methods and JAX's own wrappers
    (``vmap``, ``checkpoint``) return what the function returns."""
    for layer in _layers(fun):
        if isinstance(layer, functools.partial):
            continue
        code = getattr(layer, "__code__", None)
        if code is None and not isinstance(layer, type):
            code = getattr(_unwrap(getattr(type(layer), "__call__", None)), "__code__", None)
        filename = getattr(code, "co_filename", None)
        if isinstance(filename, str) and is_library_file(filename) \
                and not is_jax_file(filename):
            return True
    return False


def returns_its_own(fun: Any, info: FunctionInfo) -> bool:
    """Whether what the jitted ``fun`` returns is what the function ``info`` names
    returns: JAX traced that function itself (through partials, bound methods and
    wrappers that keep it as ``__wrapped__``), not another library's callable around it,
    which lays the outputs out its own way (``nnx.jit(graph=False)`` traces one returning
    the user's result beside its own state updates, a tuple of 2)."""
    return not wrapped_by_library(fun) and function_info(fun) == info


def function_info(fun: Any) -> FunctionInfo:
    """Qualified name and definition site of ``fun`` (a function, partial or callable)."""
    target = _unwrap(fun)
    code = getattr(target, "__code__", None)
    qualname = getattr(target, "__qualname__", None)
    if code is None and not isinstance(target, type):
        inherited = _inherited_call_info(type(target))
        if inherited is not None:
            return inherited
        # a decorated __call__ (jax.named_scope, functools.wraps): the method itself
        call = _unwrap(getattr(type(target), "__call__", None))
        call_code = getattr(call, "__code__", None)
        if call_code is not None:
            code = call_code
            qualname = getattr(call, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = getattr(target, "__name__", None) or type(target).__name__
    if code is None:
        return FunctionInfo(qualname)
    return FunctionInfo(qualname, code.co_filename, code.co_firstlineno)


#: ``_inherited_call_info`` by class, read at a class's first compile: every later one
#: (on the compiling thread) resolves no path and reads no source. Weak keys: a class
#: made per call is not kept alive; emptied when full.
_inherited: weakref.WeakKeyDictionary[type, FunctionInfo | None] = weakref.WeakKeyDictionary()
_INHERITED_MAX = 1024
_UNREAD = FunctionInfo("")


def _inherited_call_info(cls: type) -> FunctionInfo | None:
    """``Dense.__call__`` at the ``class Dense`` line, for an instance whose class inherits
    ``__call__`` from a base defined elsewhere (a Keras layer, an equinox module class
    built on a library's): every such class runs a computation of its own, and naming it
    after the base's one ``__call__`` would file them all under one function."""
    try:
        found = _inherited.get(cls, _UNREAD)
    except Exception:  # a metaclass whose hash or equality raises: read every time
        return _read_inherited_call_info(cls)
    if found is _UNREAD:
        found = _read_inherited_call_info(cls)
        if len(_inherited) >= _INHERITED_MAX:
            _inherited.clear()
        try:
            _inherited[cls] = found
        except Exception:
            pass
    return found


def _read_inherited_call_info(cls: type) -> FunctionInfo | None:
    try:
        call = getattr(cls, "__call__", None)
        code = getattr(_unwrap(call), "__code__", None)
        if code is None or "__call__" in vars(cls):
            return None
        # where the class's own methods are (a notebook cell), else its module's file
        own = [c.co_filename for v in vars(cls).values()
               if (c := getattr(_unwrap(v), "__code__", None)) is not None]
        filename = own[0] if own else getattr(sys.modules.get(cls.__module__), "__file__", None)
        if not filename or os.path.realpath(filename) == os.path.realpath(code.co_filename):
            return None
    except Exception:
        return None
    return FunctionInfo(f"{cls.__qualname__}.__call__", filename, _class_site(cls, filename))


def _class_site(cls: type, filename: str) -> int | None:
    """The line of ``cls``'s ``class`` statement: walked back from its first method, or,
    for a class with no method of its own, the first such statement in its file."""
    lines = [c.co_firstlineno for v in vars(cls).values()
             if (c := getattr(_unwrap(v), "__code__", None)) is not None]
    if lines:
        return _class_line(cls, min(lines))
    import linecache

    for number, text in enumerate(linecache.getlines(filename), 1):
        if text.lstrip().startswith(f"class {cls.__name__}"):
            return number
    return None


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
    return _failopen.is_library_file(filename)


_package_verdict: dict[tuple[str, tuple[str, ...]], bool] = {}


def _in_packages(filename: str, packages: tuple[str, ...]) -> bool:
    key = (filename, packages)
    verdict = _package_verdict.get(key)
    if verdict is None:
        dirs = _failopen.package_dirs()
        found = tuple(d for n in packages for d in dirs.get(n, ()))
        verdict = bool(found) and os.path.normcase(
            os.path.realpath(filename)).startswith(found)
        if len(_package_verdict) > 4096:
            _package_verdict.clear()
        _package_verdict[key] = verdict
    return verdict


def is_jax_file(filename: str) -> bool:
    """Whether ``filename`` is part of JAX itself (its own jitted library functions)."""
    return _in_packages(filename, ("jax", "jaxlib"))


def transforms_user_functions(filename: str) -> bool:
    """Whether ``filename`` belongs to a library whose jitted functions are the user's
    function transformed (JAX's ``pmap`` and ``vectorize``, haiku's ``transform``), so
    that the user's function they reach through closures is the one to name."""
    return _in_packages(filename, ("jax", "jaxlib", "haiku"))


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


#: Attributes through which a library's wrapper object reaches what it wraps: equinox's
#: ``filter_custom_vjp`` (``fn``) and the ``__wrapped__`` property of its wrapper modules.
_WRAPPER_ATTRIBUTES = ("__wrapped__", "__func__", "fn", "_fun")


def find_user_callable(root: Any, depth: int = 8, budget: int = 64) -> Any | None:
    """The user's callable that ``root`` is or wraps, or ``None``.

    ``root`` is what a library was handed to jit (``equinox.filter_jit(x)``): a
    function, a bound method, a callable object (a Module instance, named after its
    class's ``__call__``), or a wrapper of any of these (``functools.partial``,
    ``functools.wraps``, another ``filter_jit``, ``filter_grad``,
    ``filter_custom_vjp``). Only wrapping references are followed, never closures or
    other attributes: a library's callable that merely calls a user's function (an
    activation, a schedule) is not that function.
    """
    for value in walk(root, _wrapped, depth, budget):
        if _is_user_callable(value):
            return value
    return None


def _is_user_callable(value: Any) -> bool:
    try:
        code = getattr(value, "__code__", None)
        if code is None and callable(value) and not isinstance(value, type):
            inherited = _inherited_call_info(type(value))
            if inherited is not None:
                return inherited.file is not None and not is_library_file(inherited.file)
            code = getattr(_unwrap(getattr(type(value), "__call__", None)), "__code__", None)
        return code is not None and not is_library_file(code.co_filename)
    except Exception:
        return False


def _wrapped(value: Any) -> list[Any]:
    out: list[Any] = []
    try:
        if isinstance(value, functools.partial):
            out.append(value.func)
        for attr in _WRAPPER_ATTRIBUTES:
            inner = getattr(value, attr, None)
            if inner is not None and callable(inner):
                out.append(inner)
    except Exception:  # a property that raises: look no deeper
        pass
    return out


def find_user_function_in_closure(fun: Any, depth: int = 6, budget: int = 64) -> Any | None:
    """A user's function that a library's jitted function wraps or closes over, or ``None``.

    ``jax.pmap(f)`` jits a function of JAX's own that reaches ``f`` through
    wrappers, bound methods and closures (as a ``lu.WrappedFun``, whose ``.f``
    is the user's function).
    """
    for value in walk(fun, _inner_callables, depth, budget):
        if _is_user_callable(value):
            return value
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
        elif isinstance(contents, tuple):
            # a library's static part held whole (equinox.filter_pmap's: the user's
            # function first, then the arguments' static leaves)
            out.extend(v for v in contents[:4] if callable(v))


def user_callsite(skip: int = 1, limit: int = 200) -> str | None:
    """``file:line`` of the innermost frame that is the user's own code, ``skip`` frames
    out from this function (1: its caller)."""
    return user_callsites(skip + 1, limit)[0]


def user_callsites(skip: int = 1, limit: int = 200) -> tuple[str | None, str | None]:
    """``(callsite, library callsite)``, ``skip`` frames out from this function.

    The callsite is the innermost frame of code the user wrote, outside every installed
    library, the standard library and test runners (``model.fit(...)`` in the user's
    script, not Keras's ``trainer.py``). The library callsite is the innermost frame
    outside JAX, otel_jax and the wrapper libraries (Keras's ``trainer.py``), given only
    when it is another line. Where every frame is installed code (a library's own test
    suite run from site-packages), the callsite is that innermost frame, as before.
    """
    return _user_frames(skip + 1, limit)[:2]


#: How far past the user's call the frame that called its function is looked for: a
#: helper's caller is its next frame, or a few wrappers' (a decorator) out.
_CALLER_FRAMES = 8
#: The code names of a comprehension's own frame (Python 3.11; 3.12 inlines them): the
#: function that holds it is the frame after.
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def user_callsites_and_caller(skip: int = 1, limit: int = 200,
                              ) -> tuple[str | None, str | None, str | None]:
    """:func:`user_callsites`, and the user's line that called the function the call
    site is in (``train_one(...)`` in the training loop, for ``step(...)`` in the
    helper ``train_one``), when it is within a few frames; else ``None``."""
    return _user_frames(skip + 1, limit, caller=True)


def _user_frames(skip: int, limit: int, caller: bool = False,
                 ) -> tuple[str | None, str | None, str | None]:
    found = _failopen.user_frame(skip=skip, limit=limit)
    if found is None:
        return None, None, None
    frame, level = found
    inner = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    outside = None
    if caller:
        holder = frame  # the function holding the call: not a comprehension's own frame
        while holder.f_code.co_name in _COMPREHENSIONS and holder.f_back is not None:
            holder = holder.f_back
        back = holder.f_back
        for _ in range(_CALLER_FRAMES):
            if back is None:
                break
            if not _failopen.is_library_file(back.f_code.co_filename):
                outside = f"{back.f_code.co_filename}:{back.f_lineno}"
                break
            back = back.f_back
    if not _failopen.is_installed_file(frame.f_code.co_filename):
        return inner, None, outside
    outer = _failopen.user_frame(skip=level, limit=limit,
                                 is_library=_failopen.is_installed_file)
    if outer is None:
        return inner, None, outside
    return f"{outer[0].f_code.co_filename}:{outer[0].f_lineno}", inner, outside
