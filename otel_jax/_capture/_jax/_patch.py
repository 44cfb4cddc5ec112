"""Wrapping an attribute of one of JAX's modules so that it can be taken off again without
clobbering another's wrapper, and reading whether a function takes the arguments a wrapper
will pass.

Its own module: shared by the miss-path patches and the backend-compile patch. Checked on
JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: a
function whose parameters cannot be read (``None``) is not wrapped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class Patch:
    """A wrapped module attribute that can be removed without clobbering others."""

    def __init__(self, module: Any, name: str, make_wrapper: Callable[[Any], Any]):
        self.module = module
        self.name = name
        self.original = getattr(module, name)
        self.wrapper = make_wrapper(self.original)
        self.wrapper.__otel_jax_original__ = self.original
        setattr(module, name, self.wrapper)

    def remove(self) -> None:
        if getattr(self.module, self.name, None) is self.wrapper:
            setattr(self.module, self.name, self.original)


def leading_parameters(function: Any) -> tuple[str, ...] | None:
    """The names of ``function``'s positional parameters (``None`` when unreadable or when
    it takes ``*args``)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))
