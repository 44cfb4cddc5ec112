"""The one contract between the pipeline and what it feeds: compiles, storms, divergences.

Every output (the span, metrics, JSON / structlog / OpenTelemetry log emitters, the
testing kit's recorders) is an :class:`Emitter`. The compile span is the one output
others refer to: its emitter is the :class:`LinkEmitter`, called first, and the ids
it returns (a :class:`SpanLink`) are handed to every other emitter as a value, so
no emitter depends on another. A :class:`Route` is that order written down once:
the engine delivers compiles and storm warnings through it, and the cross-rank
check reports divergences through the same route.

Each emitter runs under the fail-open guard on its own: one that raises costs one
warning and its own output, never another emitter's nor the user's call.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._core._failopen import FailOpen
from .._core._vocab import LOGGER_NAME
from .._explain._hazard_parts import Hazard
from ._record import CompileRecord, Divergence, SpanLink, Storm

__all__ = ["STDLIB_WARNINGS", "Emitter", "HazardGate", "LinkEmitter", "Route",
           "StderrLines", "StdlibWarnings"]


class Emitter(Protocol):
    """An output of compile records, storm warnings and divergences between ranks."""

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        """One backend compile; ``link``: its compile span's ids (``None`` without one)."""

    def storm(self, storm: Storm) -> None:
        """One function recompiled past the storm threshold (said once per function)."""

    def divergence(self, divergence: Divergence) -> None:
        """Ranks of a multi-process job compiled different things for one compile."""


@runtime_checkable
class HazardGate(Protocol):
    """An emitter that reports some hazards itself (the testing kit's gate fails the test
    that shows one): the engine's warning does not say those a second time."""

    def claims_hazard(self, record: CompileRecord, hazard: Hazard) -> bool:
        """Whether this gate reports ``hazard`` of ``record`` itself."""


@runtime_checkable
class StderrLines(Protocol):
    """An emitter of lines that may go to the process's stderr, where Python writes its
    warnings too, or to a terminal, where a person reads them among the program's own
    output: the engine leaves a hazard's warning to such a line (said once), and, on a
    terminal, waits for a compile's lines before the call returns (in program order)."""

    def on_stderr(self, level: int) -> bool:
        """Whether a line of ``level`` (``logging``'s numbers) goes to ``sys.stderr`` now."""

    def on_terminal(self) -> bool:
        """Whether its lines go to a terminal (decided once, at ``install()``)."""

    def flush(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until every line handed over is written."""


class LinkEmitter(Protocol):
    """The emitter called first: it emits the compile's span and returns the span's ids,
    the link every :class:`Emitter` receives with the record."""

    def compile(self, record: CompileRecord) -> SpanLink | None:
        """Emit the compile span of ``record``; its ids, or ``None`` when there is none."""

    def storm(self, storm: Storm) -> None: ...

    def divergence(self, divergence: Divergence) -> None: ...


class StdlibWarnings:
    """Storms and divergences as WARNINGs on the ``otel_jax`` ``logging`` logger.

    The voice of the policy and of the cross-rank check where no log emitter writes
    their lines (``install(log_output=None)``, or a recorder without ``install()``):
    a storm or a divergence is never silent. Compiles are the other emitters' to say.
    """

    reaches = "logging handler"

    def compile(self, record: CompileRecord, link: SpanLink | None) -> None:
        pass

    def storm(self, storm: Storm) -> None:
        logging.getLogger(LOGGER_NAME).warning(
            "%s recompiled %d times (threshold %d); causes so far: %s; last: %s",
            storm.function.qualname, storm.recompiles, storm.threshold,
            storm.causes, storm.last_cause)

    def divergence(self, divergence: Divergence) -> None:
        logging.getLogger(LOGGER_NAME).warning(
            "%s: ranks diverge at compile #%d (%s): %s", divergence.function,
            divergence.count, divergence.kind.value, divergence.text)


STDLIB_WARNINGS = StdlibWarnings()


def _reaches(emitter: object) -> str | None:
    """The kind of the user's code an emitter calls (its ``reaches``: ``"logging
    handler"``), whose exceptions are the user's to hear about, not otel_jax's."""
    reaches = getattr(emitter, "reaches", None)
    return reaches if isinstance(reaches, str) else None


class Route:
    """Emitters in delivery order: the link emitter first, then every emitter with the
    link it returned. Immutable: a route that changes is a new route, so a delivery in
    progress on another thread finishes on the route it started with.

    A route is itself a :class:`LinkEmitter`: ``compile(record)`` delivers to all and
    returns the link (for the cross-rank check, which names the compile span).
    """

    __slots__ = ("_lines", "_terminal", "emitters", "failopen", "link")

    def __init__(self, failopen: FailOpen, link: LinkEmitter | None = None,
                 emitters: Sequence[Emitter] = ()) -> None:
        self.failopen = failopen
        self.link = link
        self.emitters: tuple[Emitter, ...] = tuple(emitters)
        self._lines = tuple(e for e in self.emitters if isinstance(e, StderrLines))
        #: The emitters writing to a terminal: their lines are waited for (``written``).
        self._terminal = tuple(e for e in self._lines if failopen.call(
            "log output", e.on_terminal, False))

    def says_on_stderr(self, level: int) -> bool:
        """Whether one of its emitters writes a line of ``level`` to ``sys.stderr``."""
        return any(self.failopen.call("log output", functools.partial(e.on_stderr, level),
                                      False) for e in self._lines)

    @property
    def to_terminal(self) -> bool:
        """Whether one of its emitters writes to a terminal."""
        return bool(self._terminal)

    def written(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds in all, until the lines handed to its
        emitters that write to a terminal are written; whether they are."""
        deadline = time.monotonic() + timeout
        return all([self.failopen.call(
            "log output", functools.partial(e.flush, max(0.0, deadline - time.monotonic())),
            False) for e in self._terminal])

    def joined(self, emitters: Sequence[Emitter]) -> Route:
        """This route, followed by ``emitters``."""
        return Route(self.failopen, self.link, (*self.emitters, *emitters))

    def compile(self, record: CompileRecord) -> SpanLink | None:
        link: SpanLink | None = None
        span = self.link
        if span is not None:
            with self.failopen.guard("span emitter", _reaches(span)):
                link = span.compile(record)
        for emitter in self.emitters:
            with self.failopen.guard(f"sink {type(emitter).__name__}", _reaches(emitter)):
                emitter.compile(record, link)
        return link

    def storm(self, storm: Storm) -> None:
        for emitter in self._all():
            with self.failopen.guard("storm warning", _reaches(emitter)):
                emitter.storm(storm)

    def divergence(self, divergence: Divergence) -> None:
        for emitter in self._all():
            with self.failopen.guard("divergence report", _reaches(emitter)):
                emitter.divergence(divergence)

    def _all(self) -> tuple[Emitter | LinkEmitter, ...]:
        return self.emitters if self.link is None else (self.link, *self.emitters)

