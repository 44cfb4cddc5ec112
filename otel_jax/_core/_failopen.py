"""The one fail-open primitive: otel_jax's own failures never reach the user's program.

Everything otel_jax does around a compile runs inside JAX's monitoring
listeners, on the compiling thread, where an exception would surface in the
user's jit call. Each step runs under :meth:`FailOpen.guard`; a failure
degrades the telemetry (an ``unknown`` cause, a missing attribute) and costs
one warning per kind of problem, never an exception.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ._text import safe_repr

T = TypeVar("T")

_logger = logging.getLogger("otel_jax")


class OtelJaxWarning(RuntimeWarning):
    """otel_jax could not do part of its work; the user's program is unaffected."""


class FailOpen:
    """Counts internal errors and warns once per kind of problem.

    ``warn`` is a test seam: by default Python's ``warnings.warn``.
    """

    def __init__(self, warn: Callable[..., None] = warnings.warn) -> None:
        self.internal_errors = 0
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._warn = warn

    def warn_once(self, key: str, message: str, stacklevel: int = 3) -> bool:
        """One clear warning per ``key``; returns whether this call warned."""
        with self._lock:
            if key in self._warned:
                return False
            self._warned.add(key)
        try:
            self._warn(message, OtelJaxWarning, stacklevel=stacklevel)
        except Exception:  # warnings turned into errors must not reach JAX
            _logger.warning(message)
        return True

    def failed(self, where: str, exc: BaseException) -> None:
        """Record an internal error in step ``where``: counted, logged at DEBUG, warned once."""
        with self._lock:
            self.internal_errors += 1
        _logger.debug("otel_jax internal error in %s", where, exc_info=exc)
        self.warn_once(
            f"internal:{where}:{type(exc).__name__}",
            f"otel_jax: internal error in {where} ({type(exc).__name__}: "
            f"{safe_repr(str(exc), 200)}); the jit call is unaffected and the compile is "
            "reported with the best explanation available.", stacklevel=4)

    @contextmanager
    def guard(self, where: str) -> Iterator[None]:
        """Run a block whose failure must not propagate; the block's effects stop there."""
        try:
            yield
        except Exception as exc:
            self.failed(where, exc)

    def call(self, where: str, fn: Callable[[], T], default: T) -> T:
        """``fn()``, or ``default`` when it raises (counted and warned once)."""
        try:
            return fn()
        except Exception as exc:
            self.failed(where, exc)
            return default

    def reset(self) -> None:
        with self._lock:
            self._warned.clear()
