"""The JAX listeners and patches one otel_jax engine owns (:class:`Hooks`): installed and
taken off together, each patch tried on its own.

Its own module: it puts together ``_listeners``, ``_miss_path``, ``_compile_entry`` and
``_cache_clears``, and says what each missing internal costs as a
:class:`~._capabilities.Capability`; ``Hooks.unavailable`` lists those this JAX version
lacks, and the engine says so once. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest,
default and newest test venvs). Fallback: a patch that fails costs its facts, not the
others (half a miss path is taken off again); compile counts, durations and phases from
the monitoring events are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _compile_entry, _miss_path
from ._cache_clears import watch_cache_clears
from ._capabilities import Capability, Unavailable
from ._compile_entry import COMPILE_ENTRY, COMPILE_PARAMS
from ._listeners import unregister
from ._miss import Miss
from ._patch import Patch, leading_parameters


class Hooks:
    """JAX listeners and patches owned by one otel_jax engine."""

    def __init__(
        self,
        on_time_span: Callable[..., None],
        on_event: Callable[..., None],
        on_trace_only: Callable[[Miss], None] | None = None,
    ) -> None:
        self._on_time_span = on_time_span
        self._on_event = on_event
        self._on_trace_only = on_trace_only
        self._patches: list[Patch] = []
        self.captures_signatures = False
        self.captures_programs = False
        #: What this JAX version's internals do not give (empty on a tested version).
        self.unavailable: tuple[Unavailable, ...] = ()

    def install(self) -> None:
        from jax._src import monitoring

        _exclude_from_tracebacks()
        watch_cache_clears()
        monitoring.register_event_time_span_listener(self._on_time_span)
        monitoring.register_event_listener(self._on_event)
        gaps: list[Unavailable] = []
        # Each patch is tried on its own: one that fails costs its facts, not the others.
        patched = len(self._patches)
        try:
            gaps += self._patch_pjit()
        except Exception as exc:
            # Half a miss path would keep misses (and the user's arrays) alive: none at all.
            for patch in reversed(self._patches[patched:]):
                patch.remove()
            del self._patches[patched:]
            why = f"{type(exc).__name__} reading jax._src.pjit"
            gaps += [Unavailable(Capability.CAUSES, why),
                     Unavailable(Capability.TRANSFORMED_CAUSES, why)]
        self.captures_signatures = not any(g.capability is Capability.CAUSES for g in gaps)
        try:
            gap = self._patch_compiler()
        except Exception as exc:
            gap = f"{type(exc).__name__} reading jax._src.compiler"
        self.captures_programs = gap is None
        if gap is not None:
            gaps += [Unavailable(Capability.PROGRAM_FINGERPRINTS, gap),
                     Unavailable(Capability.CACHE_MISS_REASONS, gap)]
        self.unavailable = tuple(gaps)

    def _patch_compiler(self) -> str | None:
        """Wrap the backend-compile entry so the compile event can see what was compiled;
        returns what is missing when it cannot."""
        try:
            from jax._src import compiler
        except Exception:
            return "no jax._src.compiler"
        entry = getattr(compiler, COMPILE_ENTRY, None)
        if not callable(entry):
            return f"no jax._src.compiler.{COMPILE_ENTRY}"
        if (leading_parameters(entry) or ())[:len(COMPILE_PARAMS)] != COMPILE_PARAMS:
            return f"{COMPILE_ENTRY} takes other arguments"
        self._patches.append(Patch(compiler, COMPILE_ENTRY,
                                   _compile_entry.wrap_compile_or_get_cached))
        return None

    def _patch_pjit(self) -> list[Unavailable]:
        found = _miss_path.pjit_module()
        if found is None:
            module: Any = None
            try:
                from jax._src import pjit as module
            except Exception:
                pass
            gap = _miss_path.pjit_gap(module)
            return [Unavailable(Capability.CAUSES, gap),
                    Unavailable(Capability.TRANSFORMED_CAUSES, gap)]
        pjit = found.module
        miss_path = _miss_path.miss_path_code(pjit)
        self._patches.append(Patch(
            pjit, found.trace,
            lambda original: _miss_path.wrap_infer_params(original, miss_path,
                                                          self._on_trace_only)))
        self._patches.append(Patch(
            pjit, found.scope,
            lambda original: _miss_path.wrap_run_python_pjit(original,
                                                             found.trace_inside_scope)))
        transformed = _miss_path.transformed_entry(pjit)
        if transformed is None:
            return [Unavailable(Capability.TRANSFORMED_CAUSES,
                                "jit_p's miss path calls no _pjit_call_impl_python")]
        self._patches.append(Patch(pjit, transformed, _miss_path.wrap_call_impl_python))
        return []

    def uninstall(self) -> None:
        from jax._src import monitoring

        for patch in reversed(self._patches):
            patch.remove()
        self._patches.clear()
        self.captures_signatures = False
        self.captures_programs = False
        self.unavailable = ()
        _compile_entry.take_compile_inputs()  # forgets any left on this thread
        _compile_entry.take_executable()
        unregister(monitoring, ("unregister_event_time_span_listener",
                                "_unregister_event_time_span_listener_by_callback"),
                   "_event_time_span_listeners", self._on_time_span)
        unregister(monitoring, ("unregister_event_listener",
                                "_unregister_event_listener_by_callback"),
                   "_event_listeners", self._on_event)
        _miss_path.clear_miss()


def _exclude_from_tracebacks() -> None:
    """Hide the wrappers (the modules ``_miss_path`` and ``_compile_entry``) from JAX's
    filtered tracebacks and source locations.

    They sit on the stack of every traced jit call; an error in the user's
    function should point at the user's code and JAX, not at otel_jax. The two
    lists are separate: ``traceback_util``'s filters tracebacks, while
    ``source_info_util``'s picks the user frame that ``jax_explain_cache_misses``
    and equation source locations name.
    """
    wrappers = (_miss_path.__file__, _compile_entry.__file__)
    try:
        from jax._src import traceback_util

        for path in wrappers:
            if path not in getattr(traceback_util, "_exclude_paths", ()):
                traceback_util.register_exclusion(path)
    except Exception:  # pragma: no cover - moved: tracebacks just show one more frame
        pass
    try:
        from jax._src import source_info_util

        for path in wrappers:
            if path not in getattr(source_info_util, "_exclude_paths", ()):
                source_info_util.register_exclusion(path)
    except Exception:  # pragma: no cover - moved: JAX names this frame as the call site
        pass
