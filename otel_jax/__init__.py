"""otel_jax: make JAX recompilation visible in OpenTelemetry.

``otel_jax.install()`` turns every JAX backend compilation into a
``jax.compile <function>`` span (with the cause of the compile as a
structured diff against the closest earlier signature), metrics and a JSON
log line. Cache hits of jitted functions cost nothing: otel_jax only runs
when JAX itself falls back to Python to compile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._capture._jax._capabilities import Capability
from ._capture._source import function_info as _function_info
from ._core import _failopen
from ._core._failopen import OtelJaxWarning
from ._core._scrub import ScrubRules
from ._core._vocab import CAUSE_KINDS, CauseKind
from ._emit._logs import add_otel_context
from ._explain._hints import hint_for
from ._pipeline import _steps
from ._pipeline._engine import ENGINE as _ENGINE
from ._pipeline._engine import RecompileError
from ._pipeline._history import CompileEntry
from ._pipeline._plugins import DivergenceError
from ._pipeline._steps import StepScope
from ._setup._install import Installation, flush, install, installation, uninstall
from ._version import __version__

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from ._setup._instrumentor import JaxInstrumentor

__all__ = [
    "CAUSE_KINDS",
    "Capability",
    "CauseKind",
    "CompileEntry",
    "DivergenceError",
    "Installation",
    "JaxInstrumentor",
    "OtelJaxWarning",
    "RecompileError",
    "ScrubRules",
    "__version__",
    "add_otel_context",
    "compile_history",
    "flush",
    "hint_for",
    "install",
    "installation",
    "mark_warmup_done",
    "step",
    "testing",
    "uninstall",
]


def compile_history(fn: Any) -> list[CompileEntry]:
    """The compilations of ``fn`` seen so far, oldest first, each with its signature and cause.

    ``fn`` is the jitted function (or the function it wraps, or its qualified
    name as a string). Each entry holds the signature that compile saw
    (argument paths with types and placements, static arguments), its cause
    kind, the one-line cause, the full diff and the phase durations; ``print``
    an entry to read it. Compiles are recorded only while otel_jax is installed
    or an ``otel_jax.testing`` budget is active; the last 64 per function are
    kept. Called while neither is the case, it warns once (``OtelJaxWarning``)
    that nothing is being recorded, and returns what was recorded before
    (``[]`` if nothing was).
    """
    if getattr(_ENGINE, "_hooks", None) is None:
        _ENGINE.failopen.warn_once(
            _failopen.Topic.NOT_RECORDING,
            "otel_jax.compile_history: otel_jax is not recording compiles (call "
            "otel_jax.install() or use an otel_jax.testing budget first); only compiles "
            "recorded earlier are returned")
    # Records still being made off the compiling thread are waited for, however long that
    # takes on a loaded machine: every compile that returned is in what is returned.
    _ENGINE.settle(None)
    if isinstance(fn, str):
        return _ENGINE.history.entries_by_name(fn)
    return _ENGINE.history.entries(_function_info(fn))


@overload
def step(name: str | None = None, /) -> StepScope: ...


@overload
def step(name: F, /) -> F: ...


def step(name: Any = None, /) -> Any:
    """Count one training step toward ``install(warmup_steps=...)``; time it when asked.

    ``otel_jax.step()`` alone counts a step, as before. As a context manager,
    ``with otel_jax.step("train_step"):`` also opens a span for the step (the
    compile spans of compiles inside it nest under it) and records its wall
    time in the ``jax.step.duration`` histogram with ``jax.step.compiled``
    saying whether it compiled. ``@otel_jax.step`` on a function makes each
    call one such step, named after the function.

    Warm-up (``install(warmup_steps=N)``) is the first N steps: a bare call says
    one step is over, so warm-up ends at the Nth call; a step scope is in its step
    until the next one begins, so compiles in step N and between steps N and N+1
    (an evaluation after the warm-up epoch) are warm-up, and step N+1's are the
    first after it. A step opened inside another on the same thread (nested
    scopes) is a part of it: it takes the enclosing step's number and does not
    count; a compile inside it is charged to every step open around it.
    """
    if callable(name):
        return _steps.decorate(name, _ENGINE.policy)
    nested = _steps.STEPS.open_here()  # a part of the open step: not a step of its own
    if not nested:
        _ENGINE.policy.step()
    return _steps.StepScope(name or _steps.DEFAULT_NAME, _ENGINE.policy, counted=not nested)


def mark_warmup_done() -> None:
    """Declare warm-up over: later compiles are marked ``jax.compile.after_warmup``.

    With ``install(on_recompile="raise")`` a recompile after this point raises
    ``otel_jax.RecompileError`` from the jit call that caused it.
    """
    _ENGINE.policy.mark_warmup_done()


def __getattr__(name: str) -> Any:
    # The instrumentor pulls in opentelemetry-instrumentation and the testing
    # kit is only for tests: keep ``import otel_jax`` light.
    if name == "JaxInstrumentor":
        from ._setup._instrumentor import JaxInstrumentor

        return JaxInstrumentor
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'otel_jax' has no attribute {name!r}")
