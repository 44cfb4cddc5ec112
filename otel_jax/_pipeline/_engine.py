"""From JAX's compile events to one ``CompileRecord`` per backend compile, delivered.

Data flows one way: JAX event -> signature -> cause -> record -> emitters
(span, metrics, log lines, test recorders), delivered through one ``Route``
(``_emitter``): the span emitter first, its span ids handed to the others. The
engine owns listening (JAX's hooks while anything consumes records), the bounded
history of signatures and delivery; which events belong to which compile is the
``_correlate``'s to say, what a recompile means (storm warning,
warm-up, ``on_recompile``) is the ``_policy``'s to say. Assembling a
record (``_assemble``), naming (``_naming``), signatures (``_signature``) and
cause wording (``_causes``) live in their own modules, each with one entry point.

What dies with the jit call (the dispatch miss's signature, the caller's frame,
the step tally) is read inside JAX's monitoring listeners, on the compiling
thread, where an exception would surface in the user's jit call: each step runs
under the one fail-open guard (``_failopen``), and a failure degrades the
explanation (``unknown`` at worst) and warns once. The record, its history entry
and cause are made there too when something needs them before the call returns
(the testing kit's emitters, ``on_recompile="warn"``/``"raise"``,
``on_divergence="raise"``); otherwise, by default, they are made, and
``install()``'s emitters emit them (spans, metrics, log lines, the cross-rank
check's hand-off), on the one background thread of ``_background``, in the user's
context captured at the compile. ``compile_history`` makes the records still to be
made itself (``settle``).
"""

from __future__ import annotations

import collections
import contextvars
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._capture import _correlate
from .._capture._jax import (
    _capabilities,
    _devices,
    _hooks,
    _listeners,
    _memory,
    _miss,
    _reader_gaps,
)
from .._capture._source import FunctionInfo
from .._core._failopen import FailOpen, OtelJaxWarning, Topic, WarnKey, at_site
from .._core._where import THEIRS
from .._explain._hazard_parts import Hazard
from . import _assemble
from ._background import WORKER
from ._emitter import STDLIB_WARNINGS, Emitter, HazardGate, Route
from ._history import History
from ._plugins import CacheLedger, DivergenceError, NoLedger, NoRankCheck, RankCheck
from ._policy import ON_RECOMPILE, OnRecompile, Policy, RecompileError
from ._record import CompileRecord, Devices, PhaseTiming, SpanLink, Storm
from ._steps import STEPS


class _Later(NamedTuple):
    """A compile whose record is made later: what its call left, where it goes, and the
    context (the user's span, structlog's variables) it is emitted in."""

    captured: _assemble.Captured
    route: Route
    context: contextvars.Context


class _Made(NamedTuple):
    """A record made after its call, waiting for the background thread to emit it."""

    record: CompileRecord
    storm: Storm | None
    route: Route
    context: contextvars.Context


__all__ = ["ENGINE", "ON_RECOMPILE", "SETTLE_S", "Engine", "OtelJaxWarning",
           "RecompileError"]

#: The longest ``settle`` (``compile_history``, ``flush``, a switch of what listens) waits
#: for a record another thread is making before it makes the pending ones itself: one
#: record takes about a millisecond, unless a user's ``__eq__`` in its diff hangs.
SETTLE_S = 5.0
#: The most function keys ``Engine._first_seen`` keeps.
_SEEN_FUNCTIONS = 4096
#: Where install()'s lines go to a terminal: the longest a compile's call waits for them
#: to be written (``Engine._in_order``).
ORDER_S = 0.5


class Engine:
    """Owns JAX's hooks while anything consumes compile records, and builds them."""

    def __init__(self, failopen: FailOpen | None = None) -> None:
        self.history = History()
        self.failopen = failopen or FailOpen()
        #: Warm-up (``otel_jax.step()`` counts there), storm threshold, ``on_recompile``.
        self.policy = Policy(self.history, self.failopen)
        self._installed: Route | None = None  # install()'s emitters, the span emitter first
        self._added: tuple[Emitter, ...] = ()  # recorders of the testing kit, and the like
        #: What records and storms are delivered through: install()'s route (or, without
        #: one, ``logging`` WARNINGs for storms), then the added emitters.
        self._route = self._compose()
        #: Emit install()'s part of each compile on the background thread (``_background``);
        #: ``False``: on the compiling thread, inside the jit call.
        self.emit_in_background = True
        #: Called on the compiling thread at each compile while install()'s route is
        #: connected, until it returns False: install() puts its flush barrier in the
        #: providers the application sets up after it (``_barrier.attach_when_set``).
        self.watch: Callable[[], bool] | None = None
        self._lock = threading.RLock()
        #: Which of each thread's JAX events belong to which backend compile.
        self.correlator = _correlate.Correlator()
        #: Compiles whose records are still to be made, oldest first, and records made but
        #: not emitted yet, in the same order: whoever makes records takes ``_making``, so
        #: that one function's compiles are numbered in the order they happened.
        self._pending: collections.deque[_Later] = collections.deque()
        self._made: collections.deque[_Made] = collections.deque()
        # Reentrant: a finalizer the collector runs inside this work may compile.
        self._making = threading.RLock()
        self._work_queued = False  # a job of ``_work`` waits on the background thread
        #: How deep each thread is in otel_jax's own work (listeners, records, emission): a
        #: compile that starts there (a signal handler, a finalizer, a user's processor or
        #: log handler that calls a jitted function) is only captured, never made in place.
        self._inside = threading.local()
        self._hooks: _hooks.Hooks | None = None
        self._unavailable: frozenset[_capabilities.Capability] = frozenset()
        self._devices: tuple[Any, int] | None = None  # (default device, process index)
        #: Multi-process jobs: each compile compared with the other ranks'; why the
        #: persistent cache missed, across runs (plugged in by ``_setup._checks``).
        self.cross_rank: RankCheck = NoRankCheck()
        self.ledger: CacheLedger = NoLedger()
        #: Name the recompiles a compile shows are coming (``install(hazards=...)``).
        self.hazards = True
        #: Analyse each compile's lowered program (its size by line, constants, cost).
        self.programs = True
        #: Keep each distinct lowered program in this folder (``install(programs=...)``).
        self.programs_dir: str | None = None
        #: Functions compiled in this process (``_first_seen``), kept across installs.
        self._seen_functions: set[tuple[str, str | None, int | None]] = set()
        #: The last wait for a compile's lines on a terminal ran out (``_in_order``).
        self._late_for_order = False

    @property
    def internal_errors(self) -> int:
        return self.failopen.internal_errors

    # --- lifecycle -------------------------------------------------------------

    def connect(self, route: Route | None) -> None:
        """Deliver through ``route`` (install()'s emitters) from now on, or, with ``None``,
        stop; hooks JAX while anything consumes records."""
        self.settle()
        with self._lock:
            self._installed = route
            self._route = self._compose()
            if route is not None:
                self._hook()
            else:
                self._unhook_if_idle()

    def add_emitter(self, emitter: Emitter) -> None:
        """Also deliver to ``emitter`` (a recorder); hooks JAX on the first consumer."""
        self.settle()  # the records it sees are made in order, after the pending ones
        with self._lock:
            self._added = (*self._added, emitter)
            self._route = self._compose()
            self._hook()

    def remove_emitter(self, emitter: Emitter) -> None:
        """Stop delivering to ``emitter``; unhooks JAX when no consumer is left."""
        with self._lock:
            self._added = tuple(e for e in self._added if e is not emitter)
            self._route = self._compose()
            self._unhook_if_idle()

    def settle(self, timeout: float | None = SETTLE_S) -> bool:
        """Make, on this thread, the records of the compiles seen so far that are still to be
        made (their emission stays the background thread's, ``flush``'s to wait for);
        whether they are all in the history. Waits at most ``timeout`` seconds for a record
        another thread is making."""
        done = self._make_pending(timeout) if self._pending else True
        if self._made:
            self._queue_work()  # a job that found the queue full left them to the next
        return done

    def _compose(self) -> Route:
        installed = self._installed
        if installed is None:
            # Not installed: a storm (while a recorder listens) is still said, to logging.
            installed = Route(self.failopen, None, (STDLIB_WARNINGS,))
        return installed.joined(self._added)

    def _hook(self) -> None:
        if self._hooks is not None:
            return
        hooks = _hooks.Hooks(self._on_time_span, self._on_event, self._on_trace_only)
        hooks.install()
        self._hooks = hooks
        gaps = list(hooks.unavailable)
        with self.failopen.guard("reading what this JAX version offers"):
            gaps += [g for g in _reader_gaps.reader_gaps()
                     if g.capability not in {h.capability for h in gaps}]
        self._unavailable = frozenset(g.capability for g in gaps)
        if gaps:
            self.failopen.warn_once(Topic.JAX_UNAVAILABLE, _capabilities.unavailable_message(
                _jax_version(), sorted(gaps, key=lambda g: list(_capabilities.Capability).index(
                    g.capability))))

    @property
    def unavailable(self) -> frozenset[_capabilities.Capability]:
        """The facts this JAX version's internals do not give (see ``Capability``), as of
        the last time JAX was hooked."""
        return self._unavailable

    def _unhook_if_idle(self) -> None:
        if not self._added and self._installed is None and self._hooks is not None:
            self._hooks.uninstall()
            self._hooks = None

    # --- install()'s policy options -------------------------------------------------

    @property
    def storm_threshold(self) -> int:
        return self.policy.storm_threshold

    @storm_threshold.setter
    def storm_threshold(self, threshold: int) -> None:
        self.policy.storm_threshold = threshold

    @property
    def on_recompile(self) -> OnRecompile:
        return self.policy.on_recompile

    @on_recompile.setter
    def on_recompile(self, action: OnRecompile) -> None:
        self.policy.on_recompile = action

    def configure_warmup(self, steps: int | None) -> None:
        self.policy.configure_warmup(steps)

    # --- JAX listeners -----------------------------------------------------------

    def _on_event(self, event: str, **kwargs: Any) -> None:
        with self.failopen.guard("event listener"):
            self.correlator.cache_event(event)

    def _on_trace_only(self, miss: _miss.Miss) -> None:
        """A trace with no call around it (``f.lower(x)``): read now, kept for its compile."""
        with self.failopen.guard("trace-only listener"):
            traced = _assemble.traced(miss, self.history, self.failopen)
            if traced is not None:
                self.correlator.keep_traced(traced)

    def _enter(self) -> int:
        depth = getattr(self._inside, "depth", 0)
        self._inside.depth = depth + 1
        return depth

    def _leave(self, depth: int) -> None:
        self._inside.depth = depth

    def _on_time_span(self, event: str, start: float, end: float, **kwargs: Any) -> None:
        if event not in _listeners.PHASE_EVENTS:
            return
        depth = self._enter()
        try:
            if depth:
                self._on_nested_compile(event, start, end, kwargs)
            else:
                self._on_compile(event, start, end, kwargs)
        finally:
            self._leave(depth)

    def _on_nested_compile(self, event: str, start: float, end: float,
                           kwargs: dict[str, Any]) -> None:
        """A compile that began inside otel_jax's own work on this thread (a signal handler
        or finalizer that ran there, a user's span processor or log handler that compiles).

        The work it interrupted may hold otel_jax's state half-changed, so nothing is made
        here: what dies with the call is captured (reads only), and its record is left to
        whoever makes records next, after the interrupted work, in order. Appending to a
        deque and queueing a job take no lock this thread could already hold."""
        with self.failopen.guard("compile listener (nested)"):
            name = str(kwargs.get("fun_name", "?"))
            if event != _listeners.BACKEND_COMPILE_EVENT:
                self.correlator.phase(event, name, start, end)
                return
            captured = self._capture(name, start, end, True)
            if not captured.naming.eager_op:
                STEPS.compiled(captured.compile_s)
            self._pending.append(_Later(captured, self._route, contextvars.copy_context()))
            self._queue_work()

    def _on_compile(self, event: str, start: float, end: float, kwargs: dict[str, Any],
                    ) -> None:
        captured: _assemble.Captured | None = None
        with self.failopen.guard("compile listener"):
            name = str(kwargs.get("fun_name", "?"))
            if event != _listeners.BACKEND_COMPILE_EVENT:
                self.correlator.phase(event, name, start, end)
                return
            installed, added = self._installed, self._added
            later = installed is not None and self._explains_later(added)
            captured = self._capture(name, start, end, later)
        if captured is None:
            return
        watch = self.watch
        if watch is not None and installed is not None:
            with self.failopen.guard("provider barrier"):
                if not watch():
                    self.watch = None
        if not captured.naming.eager_op:  # JAX's op-by-op compiles are not the step's program
            with self.failopen.guard("step tally"):
                STEPS.compiled(captured.compile_s)
        if later and installed is not None:
            # Nothing needs this compile's record before the call returns: it is made,
            # and emitted, on the background thread, in this thread's context.
            with self.failopen.guard("compile listener"):
                self._defer(captured, installed)
                if not captured.naming.eager_op:  # an eager op's line is DEBUG: not shown
                    self._in_order(installed)
            return
        if self._pending:  # records of earlier compiles first: numbered in order
            with self.failopen.guard("compile listener"):
                self._make_pending(SETTLE_S)
        route = self._route  # one route for this compile, however install() changes it
        built = self.failopen.call("compile listener",
                                   lambda: self._build_record(captured, route), None)
        if built is None:
            return
        record, storm = built
        if (installed is None or not self.emit_in_background
                or self.cross_rank.on_divergence == "raise"):
            # Everything here and now (the raise policy of the cross-rank check needs the
            # compile span's ids and the peers' verdict before the call returns).
            link = self._deliver(record, route)
            if storm is not None:
                route.storm(storm)
            self._compare_ranks(record, link)
        else:
            self._hand_off(record, storm, installed, added)
        if installed is not None and not record.eager_op:
            with self.failopen.guard("compile listener"):
                self._in_order(installed)
        self.policy.enforce(record)

    def _in_order(self, route: Route) -> None:
        """Where install()'s lines go to a terminal, this compile's lines (and its
        hazards') are written before the call returns, so before the program's next
        output: this thread waits for the background thread to make and emit the record
        and for the line to be written, at most ``ORDER_S`` (a record takes milliseconds,
        a compile far longer). A wait that runs out (an exporter that holds the background
        thread) is not made again until the thread caught up: what holds it costs one
        wait, not one per compile. Elsewhere (a file, a pipe, a collector) nothing waits:
        the order of lines in a log is their timestamps'."""
        if not route.to_terminal:
            return
        if self._late_for_order and WORKER.pending:
            return
        deadline = time.monotonic() + ORDER_S
        done = WORKER.flush(ORDER_S) and route.written(max(0.0, deadline - time.monotonic()))
        self._late_for_order = not done

    def _explains_later(self, added: tuple[Emitter, ...]) -> bool:
        """Whether a compile's record can be made after its jit call returns: nothing of
        the testing kit listens and the policy neither warns nor raises at the call."""
        return (self.emit_in_background and not added
                and self.policy.on_recompile == "log"
                and self.cross_rank.on_divergence != "raise")

    def _capture(self, name: str, start: float, end: float, later: bool,
                 ) -> _assemble.Captured:
        """What of this compile dies with the call, read now (``_assemble.capture``)."""
        guard = self.failopen
        seen = self.correlator.take(name, start, end, guard)
        phases = tuple(PhaseTiming(*p) for p in seen.phases)
        taken = _assemble.Taken(name, start, end, phases, seen.miss, seen.compiled,
                                seen.cache_hit, seen.cache_written, seen.traced,
                                seen.executable)
        return _assemble.capture(taken, self.history, guard, self._devices_of,
                                 self.policy.warmup_done, later, self.hazards,
                                 self.programs, self.programs_dir)

    def _hand_off(self, record: CompileRecord, storm: Storm | None, installed: Route,
                  added: tuple[Emitter, ...]) -> None:
        """The testing kit's emitters now; install()'s on the background thread, in this
        thread's context (the user's current span, structlog's bound variables)."""
        if added:
            now = Route(self.failopen, None, added)
            now.compile(record)
            if storm is not None:
                now.storm(storm)
        # In line with the records made after their calls: one order of emission.
        self._to_emit(_Made(record, storm, installed, contextvars.copy_context()))
        self._queue_work()

    def _defer(self, captured: _assemble.Captured, route: Route) -> None:
        """Leave one compile's record to the background thread, in this thread's context.

        When the thread is backed up (an exporter that holds it), this thread makes the
        pending records itself, oldest first, so that the history stays whole and in
        order; only their emission waits, and past ``WORKER.capacity`` is dropped."""
        self._pending.append(_Later(captured, route, contextvars.copy_context()))
        if len(self._pending) >= WORKER.capacity // 2:
            self._make_pending(SETTLE_S)
        else:
            self._queue_work()
            if self.hazards and self._first_seen(captured.naming.info):
                # Its hazards are said when its record is made: before its next call
                # compiles again only if the thread does not wait for its next poll.
                WORKER.wake()

    def _first_seen(self, info: FunctionInfo) -> bool:
        """Whether this process compiles ``info`` for the first time (one set lookup; the
        set is bounded, and forgetting it only costs a wake-up more)."""
        seen = self._seen_functions
        if info.key in seen:
            return False
        if len(seen) >= _SEEN_FUNCTIONS:
            seen.clear()
        seen.add(info.key)
        return True

    def _make_pending(self, timeout: float | None) -> bool:
        """Make the pending records, oldest first; whether none is left."""
        if not self._making.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return False  # a record being made holds it up (a user's __eq__ that hangs)
        depth = self._enter()
        try:
            while self._pending:
                later = self._pending.popleft()
                with at_site(later.captured.callsite):
                    built = self.failopen.call(
                        "background explanation",
                        functools.partial(self._build_record, later.captured, later.route),
                        None)
                if built is not None:
                    self._to_emit(_Made(*built, later.route, later.context))
        finally:
            self._leave(depth)
            self._making.release()
        if self._made:
            self._queue_work()
        return True

    def _to_emit(self, made: _Made) -> None:
        """Queue a made record for emission; past ``WORKER.capacity`` waiting (an exporter
        that holds the thread), its telemetry is dropped and counted, never waited for."""
        if len(self._made) >= WORKER.capacity:
            WORKER.count_dropped()
        else:
            self._made.append(made)

    def _queue_work(self) -> None:
        if not self._work_queued:
            self._work_queued = True
            # A job that finds the queue full is not needed: the one running drains
            # everything made, and a later compile or flush() queues another.
            if not WORKER.submit(self._work, counted=False):
                self._work_queued = False

    def _work(self) -> None:
        """On the background thread: the pending records made, then all made ones emitted,
        in order."""
        self._work_queued = False
        self._make_pending(None)
        depth = self._enter()
        try:
            while self._made:
                # A processor that compiles at every span keeps this loop going: at the
                # process's exit, once the thread's bound passed, the rest is dropped.
                if WORKER.overdue():
                    lost = len(self._made)
                    self._made.clear()
                    WORKER.drop_at_end(lost)
                    return
                made = self._made.popleft()
                with at_site(made.record.callsite):
                    made.context.run(self._emit_later, made.record, made.storm, made.route)
        finally:
            self._leave(depth)
        if self._pending:  # compiled by a processor or handler during that emission
            self._queue_work()

    def _after_fork(self) -> None:
        """In a forked child: the parent's pending records are not made here (its thread is
        not), and locks held at the fork stay held in the child: made anew."""
        self._pending.clear()
        self._made.clear()
        self._making = threading.RLock()
        self._work_queued = False
        self._inside = threading.local()
        self.history.after_fork()

    def _emit_later(self, record: CompileRecord, storm: Storm | None, route: Route) -> None:
        """On the background thread: what install()'s emitters make of one compile.

        They call the application's code (its span processors and exporters, log
        handlers, metric readers): marked so (``_where.THEIRS``), the exit waits for it
        to its end."""
        with self.failopen.guard("background emission"), THEIRS:
            link = self._deliver(record, route)
            if storm is not None:
                route.storm(storm)
            self._compare_ranks(record, link)

    def _build_record(self, captured: _assemble.Captured, route: Route,
                      ) -> tuple[CompileRecord, Storm | None]:
        """The record of one backend compile, and the storm warning it triggers, if any."""
        guard = self.failopen
        record, entry = _assemble.assemble(captured, self.history, self.ledger, guard)
        info, signature, count = record.function, record.signature, record.count
        fh = guard.call("history", lambda: self.history.finish(
            info, count, signature, entry, record.cause_kind.value, record.is_recompile), None)
        if record.hazards:
            # Decided from this compile and the ones before it, which records are made
            # after, in the order they compiled: never from how far behind this thread
            # is, so a program says the same hazards at the same compiles on every run.
            self._warn_hazards(record, route)
        if record.program_findings:
            self._warn_program(record, route)
        return record, self.policy.storm(record, fh)

    def _warn_program(self, record: CompileRecord, route: Route) -> None:
        """One Python warning per function and pattern that makes its program large,
        located at the line that makes it (else at the call); notes are their events and
        log fields only."""
        info = record.function
        self._warn_each(route, [
            (WarnKey(Topic.PROGRAM, f"{info.qualname}@{info.file}:{info.line}:{f.kind}"),
             f"otel_jax: {info.qualname} compiles a large program ({f.kind}): {f.text}. "
             f"Fix: {f.hint}.", f.line or record.callsite or None)
            for f in record.program_findings if f.warn])

    def _warn_hazards(self, record: CompileRecord, route: Route) -> None:
        """One Python warning per function and hazard kind, located at the user's call
        recorded at the compile (whichever thread says it, whatever its stack); notes
        (hazards not precise enough for a warning) are their log lines and events only."""
        info = record.function
        self._warn_each(route, [
            (WarnKey(Topic.HAZARD, f"{info.qualname}@{info.file}:{info.line}:"
                                   f"{h.kind.value}"),
             f"otel_jax: {info.qualname} will compile again ({h.kind.value}): {h.text}. "
             f"Fix: {h.hint}.", record.callsite or None)
            for h in record.hazards if h.warn and not self._claimed(record, h)])

    def _warn_each(self, route: Route, said: list[tuple[WarnKey, str, str | None]]) -> None:
        """Each ``(key, message, site)`` once as an OtelJaxWarning. Where a WARNING line of
        ``route``'s goes to stderr, that line says it, and the warning is given for the
        filters and test runners only (``told``: ``_failopen._left_to_the_line``)."""
        if not said:
            return
        told = route.says_on_stderr(logging.WARNING)
        for key, message, site in said:
            self.failopen.warn_once(key, message, site=site, told=told)

    def _claimed(self, record: CompileRecord, hazard: Hazard) -> bool:
        """Whether an active gate reports ``hazard`` itself, as a test failure: said there,
        it is not also a warning (pytest's summary, or stderr)."""
        return any(self.failopen.call("hazard gate", functools.partial(
                       gate.claims_hazard, record, hazard), False)
                   for gate in self._added if isinstance(gate, HazardGate))

    def _devices_of(self, miss: _miss.Miss | None) -> Devices:
        devices = _devices.argument_devices(miss.args_flat) if miss is not None else set()
        if self._devices is None:
            self._devices = (_devices.default_device(), _devices.process_index())
        default, process_index = self._devices
        if not devices:
            devices = {default}
        device = min(devices, key=lambda d: getattr(d, "id", 0))
        platform, kind = _devices.device_facts(device)
        # read once per device: a dictionary look-up at every later compile
        limit = _memory.memory_limit(device)
        return Devices(platform, kind, len(devices), process_index, limit)

    # --- delivery ---------------------------------------------------------------------

    def _deliver(self, record: CompileRecord, route: Route) -> SpanLink | None:
        """The record to every emitter of ``route``; the compile span's ids."""
        return route.compile(record)

    # --- the cross-rank check --------------------------------------------------------------

    def _compare_ranks(self, record: CompileRecord, link: SpanLink | None) -> None:
        """Multi-process jobs: hand the compile to the cross-rank check (never blocks, unless
        ``on_divergence="raise"``: then a bounded wait, and the error from the jit call)."""
        divergence = self.failopen.call(
            "rank comparison", lambda: self.cross_rank.on_compile(record, link), None)
        if divergence is not None:
            raise DivergenceError(divergence)


def _jax_version() -> str:
    try:
        import jax

        return str(jax.__version__)
    except Exception:  # pragma: no cover - jax itself is broken: say so in the warning
        return "?"


ENGINE = Engine()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=ENGINE._after_fork)
