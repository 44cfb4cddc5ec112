"""Compile budgets for tests: count real backend compiles and say why each happened; and a
gate that fails a test when a compile shows a recompile is coming (a hazard).

Unlike tracing counters (``chex.assert_max_traces``) or the jit dispatch cache
size, this counts XLA compiles only, and on failure lists each one with its
cause diff. Works without ``otel_jax.install()`` and without any
OpenTelemetry setup: it hooks JAX for its own duration.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ContextDecorator
from typing import Any

from ._capture._source import FunctionInfo, function_info
from ._core._vocab import CauseKind
from ._explain._hazard_parts import Hazard
from ._pipeline._engine import ENGINE
from ._pipeline._record import CompileRecord, Divergence, SpanLink, Storm

__all__ = ["CompileRecorder", "assert_max_compiles", "assert_no_hazards", "record_compiles"]

_MAX_KEPT = 10_000


class CompileRecorder(ContextDecorator):
    """Collects the compile records that happen while it is active (any thread).

    An emitter of the pipeline like the span, metrics and log emitters: the engine
    delivers each record to it, with the compile span's ids when installed.
    ``fn`` narrows it to one function (the jitted function, the function it
    wraps, or a qualified name); eager op-by-op compiles of single primitives
    are left out unless ``include_eager`` is true.
    """

    def __init__(self, fn: Any = None, *, include_eager: bool = False) -> None:
        self._target: FunctionInfo | str | None = (
            fn if fn is None or isinstance(fn, str) else function_info(fn))
        self.include_eager = include_eager
        self.records: list[CompileRecord] = []
        self.dropped = 0
        self._lock = threading.Lock()

    def _matches(self, record: CompileRecord) -> bool:
        if record.eager_op and not self.include_eager:
            return False
        target = self._target
        if target is None:
            return True
        if isinstance(target, str):
            return record.function.qualname == target
        return record.function.key == target.key

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        """Keep ``record`` if it matches (at most ``_MAX_KEPT``, then only counted)."""
        if self._matches(record):
            with self._lock:
                if len(self.records) < _MAX_KEPT:
                    self.records.append(record)
                else:
                    self.dropped += 1

    def storm(self, storm: Storm) -> None:
        """A budget counts compiles; the storm warning is the log's to say."""

    def divergence(self, divergence: Divergence) -> None:
        """Divergences between ranks are reported by ``install()``'s emitters."""

    def __enter__(self) -> CompileRecorder:
        ENGINE.add_emitter(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        ENGINE.remove_emitter(self)

    @property
    def count(self) -> int:
        return len(self.records) + self.dropped

    def __iter__(self) -> Iterator[CompileRecord]:
        return iter(list(self.records))

    def __len__(self) -> int:
        return self.count

    def report(self) -> str:
        """One block per compile: count, cause kind, cause, time, callsite, fix hint."""
        lines = []
        for r in self.records:
            where = f" at {r.callsite}" if r.callsite else ""
            lines.append(f"  {r.function.qualname} #{r.count} {r.cause_kind.value}: {r.cause}"
                         f" ({r.compile_s * 1e3:.1f} ms{where})")
            for change in r.diff.changes[1:6]:
                lines.append(f"      also {change.kind.value}: {change}")
            if r.cause_kind is not CauseKind.FIRST_COMPILE:
                lines.append(f"      hint: {r.hint}")
        if self.dropped:
            lines.append(f"  ... and {self.dropped} more")
        return "\n".join(lines)


def record_compiles(fn: Any = None, *, include_eager: bool = False) -> CompileRecorder:
    """Context manager that records the compiles inside it (``len()`` counts them)."""
    return CompileRecorder(fn, include_eager=include_eager)


class assert_max_compiles(CompileRecorder):  # a statement: lower case, like assert
    """Fail when more than ``n`` compilations happen inside the block.

    >>> with otel_jax.testing.assert_max_compiles(1, fn=train_step):
    ...     for batch in batches:
    ...         train_step(params, batch)

    Counts real backend (XLA) compiles of user functions — of ``fn`` only,
    when given — and on failure lists every compile with its cause diff.
    Also works as a decorator.
    """

    def __init__(self, n: int, fn: Any = None, *, include_eager: bool = False) -> None:
        super().__init__(fn, include_eager=include_eager)
        self.n = n

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        super().__exit__(exc_type, *exc)
        if exc_type is None and self.count > self.n:
            what = "compilation" if self.n == 1 else "compilations"
            scope = ""
            if isinstance(self._target, FunctionInfo):
                scope = f" of {self._target.qualname}"
            elif isinstance(self._target, str):
                scope = f" of {self._target}"
            raise AssertionError(
                f"expected at most {self.n} {what}{scope}, got {self.count}:\n"
                + self.report())


class _HazardsOn:
    """Hazards computed while any gate is active, whatever ``install(hazards=...)`` or
    ``OTEL_JAX_HAZARDS`` said; the program's own choice back when the last one ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._before = True

    def enter(self) -> None:
        with self._lock:
            if not self._active:
                self._before = ENGINE.hazards
                ENGINE.hazards = True
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
            if not self._active:
                ENGINE.hazards = self._before


_HAZARDS_ON = _HazardsOn()


class assert_no_hazards(CompileRecorder):  # a statement: lower case, like assert
    """Fail when a compile inside the block shows a recompile is coming (a hazard).

    >>> with otel_jax.testing.assert_no_hazards(fn=train_step):
    ...     for batch in batches[:1]:  # one step is enough: the hazard is said at it
    ...         state = train_step(state, batch)

    A one-step smoke test then catches the recompile before production pays for it.
    Hazards are computed inside the block even where the program turned them off
    (``install(hazards=False)``, ``OTEL_JAX_HAZARDS=off``). Warnings fail it (a hazard
    otel_jax is sure of: ``will compile again``); notes (``jax.compile.hazard`` lines at
    INFO: a pattern that may or may not repeat) only with ``notes=True``. The failure
    names each hazard, the function, the calling line and the fix. ``fn`` narrows it to
    one function, as for :class:`assert_max_compiles`. Also works as a decorator.
    """

    def __init__(self, fn: Any = None, *, notes: bool = False) -> None:
        super().__init__(fn)
        self.notes = notes

    def __enter__(self) -> assert_no_hazards:
        _HAZARDS_ON.enter()
        try:
            super().__enter__()
        except BaseException:
            _HAZARDS_ON.leave()
            raise
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        try:
            # the records (and their hazards) of the compiles made inside the block that
            # another thread is still making, waited for however long that takes: a
            # loaded machine must not turn them into a pass
            ENGINE.settle(None)
        finally:
            super().__exit__(exc_type, *exc)
            _HAZARDS_ON.leave()
        found = self.hazards
        if exc_type is None and found:
            scope = ""
            if isinstance(self._target, FunctionInfo):
                scope = f" of {self._target.qualname}"
            elif isinstance(self._target, str):
                scope = f" of {self._target}"
            what = "hazard" if len(found) == 1 else "hazards"
            raise AssertionError(f"expected no hazard{scope}, got {len(found)} {what}:\n"
                                 + _hazard_report(found))

    def claims_hazard(self, record: CompileRecord, hazard: Hazard) -> bool:
        """Whether this gate fails on ``hazard``: it is then said once, in the failure, not
        also as a warning (pytest's warnings summary, or stderr)."""
        return (hazard.warn or self.notes) and self._matches(record)

    @property
    def hazards(self) -> list[tuple[CompileRecord, Hazard]]:
        """``(record, hazard)`` of each hazard said inside the block that fails it."""
        return [(r, h) for r in self.records for h in r.hazards if h.warn or self.notes]


def _hazard_report(found: list[tuple[CompileRecord, Hazard]]) -> str:
    lines = []
    for r, h in found:
        where = f" at {r.callsite}" if r.callsite else ""
        said = "will compile again" if h.warn else "may compile again (a note)"
        lines.append(f"  {r.function.qualname} #{r.count}{where} {said} ({h.kind.value}): "
                     f"{h.text}")
        lines.append(f"      fix: {h.hint}")
    return "\n".join(lines)
