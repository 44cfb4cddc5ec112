"""Which of one thread's JAX events belong to one backend compile.

JAX reports a compile as separate events on the compiling thread, with no id that
ties them together: the dispatch miss (the hook on ``_infer_params``), the trace and
the lowering (``jaxpr_trace_duration`` naming the function ``f``, ``jaxpr_to_mlir_
module_duration`` naming it ``jit(f)``), the persistent cache's hit and write events,
the lowered program handed to ``compile_or_get_cached``, then the backend compile.
A trace with no call around it (``f.lower(x)``) is read at once and kept for the
compile that may follow (``lowered.compile()``), because its arguments are gone by
then. The correlator keeps what came, per thread and bounded, and hands the backend
compile what is its own: the rest of the pipeline never sees an unmatched event.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .._core._failopen import FailOpen
from .._core._vocab import Phase
from . import _naming, _signature
from ._jax import _compile_entry, _listeners, _miss, _miss_path, _names

#: Phases remembered per thread while no backend compile takes them (a trace without a
#: compile, ``jax.eval_shape``, leaves one behind).
MAX_PENDING_PHASES = 64
#: Trace-only reads kept per thread (and functions) for an ahead-of-time compile.
MAX_TRACED = 8
#: Without a miss (an AOT compile of an earlier lowering, moved internals) a phase of the
#: same function seen this long before the compile is its own.
UNMATCHED_PHASE_WINDOW_S = 60.0

_PHASE_OF_EVENT = {_listeners.TRACE_EVENT: Phase.TRACE, _listeners.LOWER_EVENT: Phase.LOWER}

#: One phase as JAX reported it: which, and its own wall-clock start and end.
PhaseSpan = tuple[Phase, float, float]


@dataclass(frozen=True, slots=True)
class Traced:
    """A trace with no call around it (``f.lower(x)``, ``f.trace(x)``), read at once:
    what names and describes the compile that may follow (``Lowered.compile()``),
    without holding the arguments."""

    fun_name: str  # what JAX's events call the function (``f`` in ``jit(f)``)
    naming: _naming.Naming
    signature: _signature.Signature | None
    started: float  # wall clock when the trace began


@dataclass(frozen=True, slots=True)
class Correlated:
    """What one backend compile's thread saw of it before the compile ended."""

    miss: _miss.Miss | None  # the dispatch miss that led here, if one was seen
    traced: Traced | None  # without a miss: the trace it compiles (AOT), if seen
    compiled: _compile_entry.CompileInputs | None  # the lowered program, if it was seen
    executable: Any  # what the backend compile returned, if it was seen (``None``)
    phases: tuple[PhaseSpan, ...]  # trace, lower, backend compile, in that order
    cache_hit: bool  # JAX's persistent cache served it
    cache_written: bool  # JAX wrote it to the persistent cache


class Correlator:
    """Keeps each thread's pending events, and gives a backend compile its own."""

    def __init__(self) -> None:
        self._tls = threading.local()

    # --- events as they come ---------------------------------------------------------

    def cache_event(self, event: str) -> None:
        if event == _listeners.CACHE_HIT_EVENT:
            self._tls.cache_hit = True
        elif event == _listeners.CACHE_WRITE_EVENT:
            self._tls.cache_written = True

    def phase(self, event: str, name: str, start: float, end: float) -> None:
        """A trace or lowering, kept until a backend compile of its function takes it."""
        pending = getattr(self._tls, "phases", None)
        if pending is None:
            pending = self._tls.phases = []
        if len(pending) >= MAX_PENDING_PHASES:
            del pending[: MAX_PENDING_PHASES // 2]
        pending.append((event, name, start, end))

    def keep_traced(self, traced: Traced) -> None:
        """A trace-only read, kept for the compile of its function (the most recent
        function last; a few traces of a few functions at most)."""
        kept: dict[str, list[Traced]] | None = getattr(self._tls, "traced", None)
        if kept is None:
            kept = self._tls.traced = {}
        pending = kept.pop(traced.fun_name, None) or []
        kept[traced.fun_name] = pending
        pending.append(traced)
        del pending[:-MAX_TRACED]
        while len(kept) > MAX_TRACED:
            del kept[next(iter(kept))]

    # --- the backend compile ------------------------------------------------------------

    def take(self, name: str, start: float, end: float, guard: FailOpen) -> Correlated:
        """What belongs to the backend compile of ``name`` that ran from ``start`` to
        ``end``, taken off this thread's pending events."""
        tls = self._tls
        cache_hit = getattr(tls, "cache_hit", False)
        cache_written = getattr(tls, "cache_written", False)
        tls.cache_hit = tls.cache_written = False
        miss = guard.call("dispatch miss", lambda: self._take_miss(name), None)
        traced = guard.call("trace-only read", lambda: self._take_traced(name, miss), None)
        compiled = _compile_entry.take_compile_inputs()
        executable = _compile_entry.take_executable()
        since = (miss.started if miss is not None else traced.started if traced is not None
                 else start - UNMATCHED_PHASE_WINDOW_S)
        phases = self._take_phases(name, since, start, end)
        return Correlated(miss, traced, compiled, executable, phases, cache_hit,
                          cache_written)

    def _take_phases(self, name: str, since: float, start: float, end: float,
                     ) -> tuple[PhaseSpan, ...]:
        """This compile's phases: same function, not before its miss began.

        A trace without a compile (``jax.eval_shape``, ``.trace()``) leaves a
        phase behind; ``since`` keeps it from being taken for a later compile.
        """
        pending = getattr(self._tls, "phases", None) or []
        wanted = {_listeners.TRACE_EVENT: _names.function_name_from_event(name),
                  _listeners.LOWER_EVENT: name}
        # Other functions' phases stay (a lowering whose AOT compile comes after this
        # eager op); this function's go, taken or too old to be anyone's.
        self._tls.phases = [p for p in pending if wanted[p[0]] != p[1]]
        found: dict[Phase, PhaseSpan] = {}
        for event, fun_name, p_start, p_end in reversed(pending):
            phase = _PHASE_OF_EVENT[event]
            if phase not in found and wanted[event] == fun_name and p_start >= since:
                found[phase] = (phase, p_start, p_end)
        found[Phase.BACKEND_COMPILE] = (Phase.BACKEND_COMPILE, start, end)
        return tuple(found[p] for p in Phase if p in found)

    @staticmethod
    def _take_miss(name: str) -> _miss.Miss | None:
        miss = _miss_path.current_miss()
        if miss is None or not _naming.belongs_to(miss, name):
            return None  # no miss, or a compile this miss did not cause (an eager op inside)
        _miss_path.clear_miss()
        return miss

    def _take_traced(self, name: str, miss: _miss.Miss | None) -> Traced | None:
        """What the trace-only reads of ``name`` on this thread tell its compile without a
        miss (an AOT ``lowered.compile()``).

        Only JAX's name ties the compile to a trace: with one trace pending, it is that
        one; with several of one function (``f.lower`` of two shapes, an ``eval_shape``
        between), which one compiles is not known, so the compile is named but its
        signature is not taken from any of them. A call of the function that missed on
        its own ends them all."""
        kept: dict[str, list[Traced]] | None = getattr(self._tls, "traced", None)
        if not kept:
            return None
        fun_name = _names.function_name_from_event(name)
        if miss is not None:
            kept.pop(fun_name, None)
            return None
        pending = kept.get(fun_name)
        if not pending:
            return None
        if len(pending) == 1:
            del kept[fun_name]
            return pending[0]
        latest = pending[-1]
        if any(t.naming.info.key != latest.naming.info.key for t in pending):
            return None  # two functions of one name: not even the name is known
        return Traced(latest.fun_name, latest.naming, None, min(t.started for t in pending))
