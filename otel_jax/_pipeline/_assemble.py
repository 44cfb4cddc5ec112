"""One backend compile assembled into its record: naming -> signature -> cause, hazards ->
record.

Two steps. :func:`capture`, on the compiling thread inside the user's jit call, reads
what dies with the call (the dispatch miss's signature, the caller's frame, the
configuration of the moment) into :class:`Captured`. :func:`assemble` turns that into
the frozen ``CompileRecord`` and the history entry kept for ``compile_history``
(fingerprint, history, cause and its text, devices, the persistent cache's story):
at once when something needs the record before the call returns (the testing kit,
``on_recompile="warn"``/``"raise"``), else later, on the background thread. Either
reads the function's history (the latest signature, the earlier ones to compare
with) and never decides policy.

Each step runs under the one fail-open guard, and a failure degrades the explanation
(``unknown`` at worst) instead of reaching the user.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._capture import _build, _detached, _fingerprint, _naming, _signature
from .._capture._correlate import Traced
from .._capture._jax import (
    _coordination,
    _memory,
    _names,
    _persistent_cache,
    _program,
    _program_walk,
)
from .._capture._jax._compile_entry import CompileInputs
from .._capture._jax._miss import Miss
from .._capture._jax._outputs import Outputs, outputs_of
from .._capture._source import (
    FunctionInfo,
    is_library_file,
    returns_its_own,
    user_callsites,
    user_callsites_and_caller,
)
from .._core._failopen import FailOpen
from .._core._text import clean_text
from .._core._vocab import Phase
from .._explain import _causes, _hazards
from .._explain import _memory as _memory_change
from .._explain import _program as _program_facts
from .._explain._hazard_parts import Hazard
from . import _program_store
from ._history import CompileEntry, History
from ._plugins import CacheLedger
from ._record import CompileRecord, Devices, PersistentCache, PhaseTiming

#: The devices a compile's arguments live on (the engine caches the process's default).
DevicesOf = Callable[[Miss | None], Devices]


def traced(miss: Miss, history: History, guard: FailOpen) -> Traced | None:
    """What a trace-only miss tells a later compile of it (``None`` if it cannot be read)."""
    naming = guard.call("function name", lambda: _naming.name_compile(miss, ""), None)
    if naming is None:
        return None
    latest = guard.call("history", lambda: history.latest(naming.info), None)
    signature = guard.call(
        "signature capture",
        lambda: _build.from_miss(miss, naming.stands_for, latest), None)
    # Kept until its compile, or until later traces push it out: plain data only (the
    # user's function that a library's jitted function stands for is in the signature).
    return Traced(_names.event_name(miss.fun), naming._replace(stands_for=None),
                  signature, miss.started)


@dataclass(frozen=True, slots=True)
class Taken:
    """What the listeners took off JAX for one backend compile."""

    name: str  # what JAX's event calls the function (``jit(f)``)
    start: float  # the backend compile's own start and end (wall clock)
    end: float
    phases: tuple[PhaseTiming, ...]  # trace, lower, backend compile: those JAX reported
    miss: Miss | None  # the dispatch miss that led here, if one was seen
    compiled: CompileInputs | None  # the lowered program, if the compile was seen
    cache_hit: bool  # JAX's persistent cache served it
    cache_written: bool  # JAX wrote it to the persistent cache
    traced: Traced | None = None  # without a miss: the trace it compiles (AOT), if seen
    #: what the backend compile returned, held until the record reads its memory analysis
    #: (``_memory``: tens of microseconds, so not on the compiling thread by default)
    executable: Any = None


@dataclass(frozen=True, slots=True)
class Captured:
    """What one backend compile leaves that dies with the jit call, read on the compiling
    thread before the call returns; the rest of its record (:func:`assemble`) can be made
    later, on another thread.

    The argument avals, tree, statics, bound values and placements are read into the
    signature here (a static value or a closure cell may change once the call returns),
    except for JAX's own eager ops, whose arguments are arrays and whose parameters are
    JAX's: what their signature is made of is read here into plain data and weak
    references (``detached``: ``_detached.detach``), its texts made later. Nothing of
    the user's or of JAX's is held past the call (``taken`` has no miss): JAX's caches
    hold functions and their parameters weakly, and one kept alive until the record is
    made (a function, the ``HashablePartial`` JAX jits per primitive under ``pmap``)
    would turn a compile JAX would have made next into a cache hit.
    """

    taken: Taken
    naming: _naming.Naming
    signature: _signature.Signature | None  # None: made from ``detached`` later
    detached: _detached.Detached | None  # an eager op's signature, to be made later
    devices: Devices
    callsite: str | None  # the user's frame that made the jit call
    library_callsite: str | None  # an installed library's frame below it, if any
    warmup_done: bool  # as of the compile, not of when the record is made
    cache_enabled: bool  # JAX's persistent cache, as configured at the compile
    #: the outputs' abstract values and tree, for the hazard analysis (``None``: not
    #: read, or hazards are off)
    outputs: Outputs | None = None
    hazards: bool = False  # look for hazards when the record is made
    #: the user's line that called the function holding the call site (a helper's
    #: caller), read only for the hazard analysis
    caller: str | None = None
    #: analyse the lowered program (its size by line, constants, cost) when the record is
    #: made: ``taken.compiled`` is kept until then
    programs: bool = False
    programs_dir: str | None = None  # the folder to keep the lowered program in

    @property
    def compile_s(self) -> float:
        """What the record's ``compile_s`` will be: from the first phase to the end."""
        phases = self.taken.phases
        return max(0.0, self.taken.end - min((p.start for p in phases),
                                             default=self.taken.start))


def capture(taken: Taken, history: History, guard: FailOpen, devices_of: DevicesOf,
            warmup_done: bool, later: bool, hazards: bool = False,
            programs: bool = False, programs_dir: str | None = None) -> Captured:
    """What of ``taken`` must be read now, on the compiling thread (``later``: the record is
    assembled on another thread, so an eager op's signature waits for it; ``hazards``:
    keep what the hazard analysis reads, which it does when the record is made;
    ``programs``: keep the lowered program for its analysis, made then too;
    ``programs_dir``: and to keep it in that folder)."""
    miss, name = taken.miss, taken.name
    signature: _signature.Signature | None = None
    detached: _detached.Detached | None = None
    if miss is None and taken.traced is not None:  # an AOT compile of a lowering
        naming, signature = taken.traced.naming, taken.traced.signature
    else:
        naming = guard.call("function name", lambda: _naming.name_compile(miss, name),
                            _naming.fallback(name))
    if miss is not None:
        if later and naming.eager_op:
            stands_for = naming.stands_for
            detached = guard.call("signature capture",
                                  lambda: _detached.detach(miss, stands_for), None)
        if detached is None:
            signature = _signature_of(miss, naming, history, guard)
            if signature is None:
                signature = _signature.uncaptured()
    compiled = taken.compiled
    if compiled is not None and signature is not None and signature.captured:
        # what the backend compile was asked for: Lowered.compile's options among them
        with_options, inputs = signature, compiled
        signature = guard.call("compiler options",
                               lambda: _build.with_compiler_options(with_options, inputs),
                               signature)
    outputs = None
    if hazards and miss is not None and not naming.eager_op:
        params = miss.params  # a few references JAX already computed: nothing traced again
        returned = taken.executable
        outputs = guard.call("hazard outputs", lambda: outputs_of(params, returned), None)
        if outputs is not None:
            # read here, while the function is surely alive (``Serials.alive`` says why
            # otel_jax's thread never takes it from its weak reference)
            fun, info = miss.fun, naming.info
            outputs = outputs._replace(own=guard.call(
                "hazard outputs", lambda: returns_its_own(fun, info), True))
    cache_enabled = guard.call("persistent cache",
                               _persistent_cache.persistent_cache_enabled, False)
    analyse = programs and not naming.eager_op and not taken.cache_hit
    programs_dir = None if naming.eager_op else programs_dir
    if compiled is not None and (naming.eager_op or not (
            analyse or programs_dir or cache_enabled
            or _coordination.coordination() is not None)):
        # The lowered program is read only for its fingerprint and its analysis (see
        # ``assemble``): not kept while the record waits to be made, it can be large.
        compiled = None
    # Let go of the user's and JAX's objects: what is kept is plain data (the signature,
    # or what an eager op's is made of) and weak references, and the executable JAX's
    # own cache holds anyway (none for JAX's eager ops: their memory is not reported).
    executable = None if naming.eager_op else taken.executable
    taken = dataclasses.replace(taken, miss=None, traced=None, compiled=compiled,
                                executable=executable)
    naming = naming._replace(stands_for=None)
    # From the listener: the walk finds the innermost user frame above JAX and otel_jax.
    unknown: tuple[str | None, str | None, str | None] = (None, None, None)
    look_for_hazards = hazards and not naming.eager_op
    sites = guard.call("callsite", lambda: user_callsites_and_caller(skip=4)
                       if look_for_hazards else (*user_callsites(skip=4), None), unknown)
    return Captured(
        taken, naming, signature, detached,
        devices=guard.call("device info", lambda: devices_of(miss), Devices()),
        callsite=sites[0], library_callsite=sites[1],
        warmup_done=warmup_done,
        cache_enabled=cache_enabled,
        outputs=outputs,
        hazards=look_for_hazards, caller=sites[2], programs=analyse,
        programs_dir=programs_dir)


def _shown(cause: _causes.Cause, found: tuple[Hazard, ...],
           ) -> tuple[_causes.Cause, tuple[Hazard, ...]]:
    """The cause and hazards as the record shows them: every text (paths, keys, values,
    the wording made of them) as it may leave the process (``clean_text``: a secret used
    as a dict key or a parameter name replaced). Done here, where a compile's texts
    become its record, so that every view of the record (span, log line, warning,
    ``compile_history``, the testing kit) shows the same texts; the signature itself
    keeps the paths as they are, for the diffs and fingerprints of later compiles."""
    diff = cause.diff
    changes = tuple(dataclasses.replace(
        c, path=clean_text(c.path), before=clean_text(c.before), after=clean_text(c.after),
        subject=clean_text(c.subject)) for c in diff.changes)
    cause = dataclasses.replace(cause, text=clean_text(cause.text),
                                hint=clean_text(cause.hint),
                                diff=dataclasses.replace(diff, changes=changes))
    found = tuple(dataclasses.replace(h, path=clean_text(h.path), text=clean_text(h.text),
                                      hint=clean_text(h.hint)) for h in found)
    return cause, found


def _signature_of(miss: Miss, naming: _naming.Naming, history: History, guard: FailOpen,
                  ) -> _signature.Signature | None:
    info = naming.info
    latest = guard.call("history", lambda: history.latest(info), None)
    signature = guard.call(
        "signature capture",
        lambda: _build.from_miss(miss, naming.stands_for, latest), None)
    if signature is None and latest is not None:  # built on its own, sharing nothing
        signature = guard.call(
            "signature capture", lambda: _build.from_miss(miss, naming.stands_for), None)
    return signature


def _signature_later(detached: _detached.Detached, info: FunctionInfo,
                     history: History, guard: FailOpen) -> _signature.Signature | None:
    """The signature of an eager op, made from what was read of it in the call."""
    latest = guard.call("history", lambda: history.latest(info), None)
    signature = guard.call(
        "signature capture", lambda: _build.from_detached(detached, latest), None)
    if signature is None and latest is not None:  # built on its own, sharing nothing
        signature = guard.call(
            "signature capture", lambda: _build.from_detached(detached), None)
    return signature


def _base(info: FunctionInfo, fingerprint: str, signature: _signature.Signature) -> str:
    """The signature's fingerprint without its tracing context: two lines of the compile
    ledger alike but for it were missed for a context change (``_fleet._ledger``)."""
    if not (fingerprint and signature.captured):
        return ""
    return _fingerprint.of_signature(info, dataclasses.replace(signature, context=()))


def assemble(captured: Captured, history: History, ledger: CacheLedger, guard: FailOpen,
             ) -> tuple[CompileRecord, CompileEntry]:
    """The record of one backend compile, and the entry its function's history keeps.

    Begins the compile in ``history`` (its count); the caller finishes it with the
    entry, after deciding policy. Runs on the compiling thread or, after it, on the
    background thread: it reads only what ``captured`` kept and what does not change.
    """
    taken, naming = captured.taken, captured.naming
    info = naming.info
    signature = captured.signature
    if signature is None and captured.detached is not None:
        signature = _signature_later(captured.detached, info, history, guard)
    if signature is None:
        signature = _signature.uncaptured()
    captured_signature = signature

    fingerprint = "" if naming.eager_op else guard.call(
        "fingerprint", lambda: _fingerprint.of_signature(info, captured_signature), "")
    program = ""
    cache_enabled = captured.cache_enabled
    compiled = taken.compiled
    # The program's fingerprint tells ranks and restarts apart; one process on its
    # own has nothing to compare it with, and it costs a serialisation of the program.
    if compiled is not None and not naming.eager_op and (
            cache_enabled or captured.programs_dir
            or _coordination.coordination() is not None):
        digest = guard.call("program fingerprint",
                            lambda: _program.program_digest(compiled.computation), None)
        program = digest.hex() if digest else ""
    try:
        count, earlier = history.begin(info)
    except Exception as exc:  # the compile is still reported, with what is known
        guard.failed("history", exc)
        count, earlier = 0, []
    try:
        cause = (_causes.explain(info, count, earlier, signature) if count
                 else _causes.history_failed())
    except Exception as exc:
        guard.failed("cause diff", exc)
        cause = _causes.diff_failed(exc, len(earlier))
    found: tuple[Hazard, ...] = ()
    if captured.hazards and count:
        outputs = captured.outputs
        explained = cause
        found = guard.call("hazards", lambda: _hazards.hazards(
            info, count, captured_signature, outputs, earlier, explained.kind,
            explained.diff, captured.callsite, captured.caller), ())
    unshown = (cause, found)
    cause, found = guard.call("scrubbing", lambda: _shown(*unshown), unshown)
    devices = captured.devices
    executable = taken.executable
    memory = None if executable is None else guard.call(
        "memory analysis", lambda: _memory.program_memory(executable), None)
    earlier_memory = None
    if memory is not None and cause.compared_with is not None:
        compared = cause.compared_with
        earlier_memory = guard.call("history", lambda: history.memory(info, compared), None)
    compile_s = taken.end - taken.start
    program_facts: _program_facts.ProgramFacts | None = None
    program_findings: tuple[_program_facts.ProgramFinding, ...] = ()
    if captured.programs and compiled is not None:
        analysed = guard.call("program analysis", lambda: _analyse(
            compiled.computation, executable, info, cause.compared_with, history), None)
        if analysed is not None:
            program_facts, program_findings = analysed
    program_file = ""
    if captured.programs_dir and compiled is not None and program:
        folder, fingerprint = captured.programs_dir, program
        program_file = guard.call("program file", lambda: _keep_program(
            folder, info.qualname, fingerprint, compiled.computation), "")
    cache = None
    if cache_enabled:
        reason = None
        if not taken.cache_hit and not taken.cache_written:
            reason = _persistent_cache.persistent_cache_skip_reason(
                compile_s, devices.process_index)
        cache = PersistentCache(taken.cache_hit, taken.cache_written, reason)
        if not taken.cache_hit and not naming.eager_op:
            unexplained = cache
            cache = guard.call("compile ledger", lambda: ledger.note(
                info, fingerprint, program, compiled, unexplained, compile_s,
                captured_signature, _base(info, fingerprint, captured_signature)), cache)
    record = CompileRecord(
        function=info, count=count, cause_kind=cause.kind, cause=cause.text,
        diff=cause.diff, signature=signature,
        start=min(p.start for p in taken.phases), end=taken.end, phases=taken.phases,
        callsite=captured.callsite, library_callsite=captured.library_callsite,
        eager_op=naming.eager_op,
        after_warmup=captured.warmup_done and not naming.eager_op,
        hint=cause.hint, devices=devices, persistent_cache=cache,
        compared_with=cause.compared_with, fingerprint=fingerprint,
        program_fingerprint=program, hazards=found, memory=memory,
        program=program_facts, program_findings=program_findings,
        program_file=program_file,
        memory_change=guard.call("memory change",
                                 lambda: _memory_change.growth(earlier_memory, memory), ""),
    )
    entry = CompileEntry(
        count=count, cause_kind=cause.kind.value, cause=cause.text,
        diff=tuple(c.as_dict() for c in cause.diff.changes),
        compile_s=record.compile_s, trace_s=record.phase_seconds(Phase.TRACE),
        lower_s=record.phase_seconds(Phase.LOWER),
        backend_compile_s=record.phase_seconds(Phase.BACKEND_COMPILE),
        callsite=record.callsite, timestamp=record.start,
        persistent_cache_hit=record.persistent_cache_hit,
        _signature=signature, _memory=memory, _program=program_facts,
    )
    return record, entry


def _analyse(computation: Any, executable: Any, info: FunctionInfo, compared_with: int | None,
             history: History,
             ) -> tuple[_program_facts.ProgramFacts,
                        tuple[_program_facts.ProgramFinding, ...]] | None:
    """The lowered program's size by the user's line, its constants and XLA's cost
    analysis, and the patterns they show (``_explain._program``)."""
    import os

    walk = _program_walk.walk_program(computation, _is_user_file)
    if walk is None:  # bindings that do not walk: nothing said, never a wrong count
        return None
    cost = None if executable is None else _program_walk.program_cost(executable)
    facts = _program_facts.facts(walk, cost)
    earlier = None if compared_with is None else history.program(info, compared_with)
    try:
        cwd = os.getcwd()
    except OSError:  # removed under the program
        cwd = ""
    found = _program_facts.findings(facts, earlier, compared_with, cwd)
    # as every text of the record, as it may leave the process (the warning's too)
    return facts, tuple(dataclasses.replace(f, line=clean_text(f.line), text=clean_text(f.text),
                                            hint=clean_text(f.hint)) for f in found)


def _is_user_file(filename: str) -> bool:
    """A file of the user's, not JAX's, a wrapper library's, the standard library's or
    otel_jax's: where an operation of the program is put."""
    return not is_library_file(filename)


def _keep_program(folder: str, function: str, fingerprint: str, computation: Any) -> str:
    """The lowered program kept in ``folder`` (``_program_store``), its path or ``""``."""
    text = _program_walk.program_text(computation)
    if text is None:
        return ""
    return _program_store.keep(folder, function, fingerprint, text)
