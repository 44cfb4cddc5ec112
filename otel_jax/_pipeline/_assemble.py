"""One backend compile assembled into its record: naming -> signature -> cause -> record.

One entry point, :func:`assemble`. The engine's listeners take what JAX left for a
compile (:class:`Taken`: the event's times, the phases, the dispatch miss, the
lowered program, the persistent-cache events); this module turns it into the frozen
``CompileRecord`` and the history entry kept for ``compile_history``. It reads the
function's history (the latest signature, the earlier ones to compare with) and
never decides policy.

Everything here runs on the compiling thread inside the user's jit call: each step
runs under the one fail-open guard, and a failure degrades the explanation
(``unknown`` at worst) instead of reaching the user.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .._capture import _fingerprint, _jax_read, _naming, _signature
from .._capture._correlate import Traced
from .._capture._jax_hooks import CompileInputs, Miss
from .._capture._source import user_callsite
from .._core._failopen import FailOpen
from .._core._vocab import Phase
from .._explain import _causes
from .._fleet._ledger import Ledger
from ._history import CompileEntry, History
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
        lambda: _signature.from_miss(miss, naming.stands_for, latest), None)
    return Traced(_jax_read.event_name(miss.fun), naming, signature, miss.started)


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


def assemble(taken: Taken, history: History, ledger: Ledger, guard: FailOpen,
             devices_of: DevicesOf, warmup_done: bool) -> tuple[CompileRecord, CompileEntry]:
    """The record of one backend compile, and the entry its function's history keeps.

    Begins the compile in ``history`` (its count); the caller finishes it with the
    entry, after deciding policy.
    """
    miss, name = taken.miss, taken.name
    signature: _signature.Signature | None = None
    if miss is None and taken.traced is not None:  # an AOT compile of a lowering
        naming, signature = taken.traced.naming, taken.traced.signature
    else:
        naming = guard.call("function name", lambda: _naming.name_compile(miss, name),
                            _naming.fallback(name))
    info = naming.info
    if miss is not None:
        latest = guard.call("history", lambda: history.latest(info), None)
        signature = guard.call(
            "signature capture",
            lambda: _signature.from_miss(miss, naming.stands_for, latest), None)
        if signature is None and latest is not None:  # built on its own, sharing nothing
            signature = guard.call(
                "signature capture", lambda: _signature.from_miss(miss, naming.stands_for),
                None)
    if signature is None:
        signature = _signature.uncaptured()
    captured = signature

    fingerprint = "" if naming.eager_op else guard.call(
        "fingerprint", lambda: _fingerprint.of_signature(info, captured), "")
    program = ""
    cache_enabled = _jax_read.persistent_cache_enabled()
    compiled = taken.compiled
    # The program's fingerprint tells ranks and restarts apart; one process on its
    # own has nothing to compare it with, and it costs a serialisation of the program.
    if compiled is not None and not naming.eager_op and (
            cache_enabled or _jax_read.coordination() is not None):
        digest = guard.call("program fingerprint",
                            lambda: _jax_read.program_digest(compiled.computation), None)
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
    devices = guard.call("device info", lambda: devices_of(miss), Devices())
    compile_s = taken.end - taken.start
    cache = None
    if cache_enabled:
        reason = None
        if not taken.cache_hit and not taken.cache_written:
            reason = _jax_read.persistent_cache_skip_reason(compile_s, devices.process_index)
        cache = PersistentCache(taken.cache_hit, taken.cache_written, reason)
        if not taken.cache_hit and not naming.eager_op:
            cache = guard.call("compile ledger", functools.partial(
                ledger.note, info, fingerprint, program, compiled, cache, compile_s,
                captured), cache)
    record = CompileRecord(
        function=info, count=count, cause_kind=cause.kind, cause=cause.text,
        diff=cause.diff, signature=signature,
        start=min(p.start for p in taken.phases), end=taken.end, phases=taken.phases,
        callsite=guard.call("callsite", lambda: user_callsite(skip=4), None),
        eager_op=naming.eager_op,
        after_warmup=warmup_done and not naming.eager_op,
        hint=cause.hint, devices=devices, persistent_cache=cache,
        compared_with=cause.compared_with, fingerprint=fingerprint,
        program_fingerprint=program,
    )
    entry = CompileEntry(
        count=count, cause_kind=cause.kind.value, cause=cause.text,
        diff=tuple(c.as_dict() for c in cause.diff.changes),
        compile_s=record.compile_s, trace_s=record.phase_seconds(Phase.TRACE),
        lower_s=record.phase_seconds(Phase.LOWER),
        backend_compile_s=record.phase_seconds(Phase.BACKEND_COMPILE),
        callsite=record.callsite, timestamp=record.start,
        persistent_cache_hit=record.persistent_cache_hit,
        _signature=signature,
    )
    return record, entry
