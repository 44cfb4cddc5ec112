"""What the pipeline does about recompiles: warm-up, the storm warning, ``on_recompile``.

The engine builds each record and asks the policy two things: whether this
compile starts a recompile storm (a :class:`Storm`, which the engine delivers
through the same route as the record), and, once every emitter has the record,
what a recompile after warm-up does (nothing more, a warning, or
:class:`RecompileError` from the user's jit call). Warm-up is counted here, from
``otel_jax.step()`` and step scopes (``_steps``), or ended by
``otel_jax.mark_warmup_done()``.
"""

from __future__ import annotations

import threading
from typing import Literal

from .._core._failopen import FailOpen, shown, warn_here
from .._core._vocab import CauseKind
from ._history import FunctionHistory, History
from ._record import CompileRecord, Storm

__all__ = ["ON_RECOMPILE", "STORM_THRESHOLD", "OnRecompile", "Policy", "RecompileError"]

OnRecompile = Literal["log", "warn", "raise"]
ON_RECOMPILE: tuple[OnRecompile, ...] = ("log", "warn", "raise")
#: Recompiles of one function before the storm warning: ``install()``'s default
#: (``InstallOptions.storm_threshold``) and the policy's own until then.
STORM_THRESHOLD = 8


class RecompileError(RuntimeError):
    """A recompile after warm-up, raised when installed with ``on_recompile="raise"``."""

    def __init__(self, record: CompileRecord) -> None:
        self.record = record
        # One line, read on a terminal: the function's name comes from user code.
        super().__init__(shown(
            f"{record.function.qualname} recompiled after warm-up (compile "
            f"#{record.count}, cause {record.cause_kind.value}: {record.cause}). "
            f"Hint: {record.hint}"))


class Policy:
    """Warm-up, the storm threshold and ``on_recompile``: one installation's rules."""

    def __init__(self, history: History, failopen: FailOpen) -> None:
        self._history = history
        self._failopen = failopen
        self.storm_threshold = STORM_THRESHOLD
        self.on_recompile: OnRecompile = "log"
        self._warmup_marked = False  # mark_warmup_done() was called
        self._warmup_steps: int | None = None
        self._steps = 0  # the number of the latest step (bare calls and step scopes)
        self._steps_done = 0  # steps over: the latest, unless a step scope is still in it
        self._lock = threading.RLock()

    # --- warm-up -----------------------------------------------------------------

    @property
    def warmup_done(self) -> bool:
        """Whether ``warmup_steps`` steps are over (or ``mark_warmup_done()`` was called).

        A bare ``otel_jax.step()`` call says a step is over; a step scope (``with
        otel_jax.step():``, ``@otel_jax.step``) is in its step until the next one
        begins, so what compiles in step N, and between steps N and N+1 (an evaluation
        after the warm-up epoch), is still warm-up, and step N+1 is the first after.
        """
        steps = self._warmup_steps
        return self._warmup_marked or (steps is not None and self._steps_done >= steps)

    def configure_warmup(self, steps: int | None) -> None:
        with self._lock:
            self._warmup_steps = steps
            self._steps = self._steps_done = 0
            self._warmup_marked = False

    def step(self, n: int = 1) -> int:
        """Count ``n`` more training steps, each over (``-1`` takes one back); returns the
        step count."""
        with self._lock:
            self._steps = self._steps_done = max(0, self._steps + n)
            return self._steps

    def begin_step(self, counted: bool) -> int:
        """An outermost step scope begins (``counted``: ``otel_jax.step(name)`` already
        counted it as a bare call): it is in progress, not over. Returns its number."""
        with self._lock:
            if not counted:
                self._steps += 1
            self._steps_done = max(0, self._steps - 1)
            return self._steps

    @property
    def steps(self) -> int:
        """The number of the latest step."""
        return self._steps

    def mark_warmup_done(self) -> None:
        self._warmup_marked = True

    # --- the storm warning ---------------------------------------------------------------

    def storm(self, record: CompileRecord, fh: FunctionHistory | None) -> Storm | None:
        """The storm this compile starts, once per function: its recompiles (eager op
        compiles aside) reached ``storm_threshold``; then it keeps counting, silently."""
        if (fh is None or not record.is_recompile or record.eager_op or fh.storm_warned
                or fh.recompiles < self.storm_threshold):
            return None
        fh.storm_warned = True
        return Storm(record.function, fh.recompiles, self.storm_threshold,
                     {k: v for k, v in fh.causes.items() if k != CauseKind.FIRST_COMPILE},
                     record.cause, record.hint)

    # --- on_recompile ------------------------------------------------------------------

    def enforce(self, record: CompileRecord) -> None:
        """A recompile after warm-up: ``"warn"`` warns at the user's jit call, ``"raise"``
        refuses the compile with :class:`RecompileError`."""
        if not (record.after_warmup and record.is_recompile):
            return
        if self.on_recompile == "raise":
            # The compile is refused: JAX will compile again when the user retries,
            # which must read as this compile, not as a repeat of it.
            with self._failopen.guard("history"):
                self._history.forget(record.function, record.count)
            raise RecompileError(record)
        if self.on_recompile == "warn":
            # Point at the user's jit call, not at this listener deep inside JAX; what
            # the filters make of it (``-W error``) raises from that call.
            warn_here(str(RecompileError(record)))
