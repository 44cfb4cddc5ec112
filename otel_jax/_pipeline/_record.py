"""One immutable record per compilation, and its two flat views (span attributes, log fields).

The engine builds a record once, complete; every emitter (span, metrics, log
lines, test recorders) is a function of it. The compile span's identity is not
part of the record: the span emitter returns it as a :class:`SpanLink`, which
is handed to the other emitters as a value, so no emitter depends on another
having run first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._capture._jax._memory import ProgramMemory
from .._capture._signature import Signature
from .._capture._source import FunctionInfo
from .._core._text import clean_text
from .._core._vocab import (
    LOG_DIFF_LIMIT,
    Attr,
    CauseKind,
    DivergenceKind,
    Field,
    MissReason,
    NotWrittenReason,
    Phase,
)
from .._explain._diff import Diff
from .._explain._hazard_parts import Hazard
from .._explain._program import ProgramFacts, ProgramFinding

#: Attribute values as OpenTelemetry accepts them.
AttributeValue = str | bool | int | float


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    """One phase JAX reported, with its own wall-clock start and end (seconds)."""

    phase: Phase
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


class SpanLink(NamedTuple):
    """The compile span's ids, in OpenTelemetry's hex form, for linking logs and exemplars."""

    trace_id: str
    span_id: str
    #: The span's sampled flag: an unsampled span is stored nowhere, so the metrics
    #: recorded in its context carry no exemplar (the SDK's trace-based filter).
    sampled: bool = True


@dataclass(frozen=True, slots=True)
class Devices:
    """Where the compiled computation runs."""

    platform: str = "unknown"
    kind: str = "unknown"
    count: int = 1
    process_index: int = 0
    memory_limit_bytes: int | None = None  # the device's memory limit, where known


@dataclass(frozen=True, slots=True)
class PersistentCache:
    """What JAX's persistent compilation cache did for this compile (when it is enabled)."""

    hit: bool
    written: bool
    not_written_reason: NotWrittenReason | None = None  # a miss that left no entry
    # why the cache did not serve it, from the compile ledger of earlier runs (when kept)
    miss_reason: MissReason | None = None
    miss_detail: str | None = None


@dataclass(frozen=True, slots=True)
class CompileRecord:
    """Everything known about one backend compile, as immutable plain data."""

    function: FunctionInfo
    count: int
    cause_kind: CauseKind
    cause: str
    diff: Diff
    signature: Signature
    start: float  # wall-clock seconds, JAX's own clock
    end: float
    phases: tuple[PhaseTiming, ...] = ()
    callsite: str | None = None
    # the innermost installed library's line between the user's and JAX (Keras's fit)
    library_callsite: str | None = None
    eager_op: bool = False
    after_warmup: bool = False
    hint: str = ""
    devices: Devices = field(default_factory=Devices)
    persistent_cache: PersistentCache | None = None  # None: the persistent cache is off
    compared_with: int | None = None  # the earlier compile (its count) the diff is against
    fingerprint: str = ""  # of the signature, comparable across processes ("" if uncaptured)
    program_fingerprint: str = ""  # of the lowered program, likewise ("" if not read)
    #: recompiles this compile shows are coming (``_explain._hazards``), each said once
    hazards: tuple[Hazard, ...] = ()
    #: XLA's memory analysis of the compiled program (``None``: not given for it)
    memory: ProgramMemory | None = None
    #: sizes that grew past the thresholds since the compile the cause is against
    #: (``temp 1.2 GiB -> 2.5 GiB``; ``""``: none did, or nothing to compare)
    memory_change: str = ""
    #: the lowered program's size by the user's line, its constants and XLA's cost
    #: analysis (``_explain._program``; ``None``: not analysed)
    program: ProgramFacts | None = None
    #: the patterns that program shows (an unrolled loop, a captured constant, growth)
    program_findings: tuple[ProgramFinding, ...] = ()
    #: where the lowered program was kept (``install(programs=DIR)``; ``""``: not kept)
    program_file: str = ""

    @property
    def is_recompile(self) -> bool:
        """A compile of an already-compiled function that XLA really had to redo."""
        return self.count > 1 and not self.persistent_cache_hit

    @property
    def persistent_cache_hit(self) -> bool | None:
        cache = self.persistent_cache
        return None if cache is None else cache.hit

    @property
    def compile_s(self) -> float:
        return max(0.0, self.end - self.start)

    def phase_seconds(self, phase: Phase | str) -> float | None:
        for timing in self.phases:
            if timing.phase == phase:
                return timing.seconds
        return None


def span_attributes(record: CompileRecord) -> dict[str, AttributeValue]:
    """Attributes of the ``jax.compile`` span (and of its OpenTelemetry log record)."""
    info = record.function
    devices = record.devices
    attrs: dict[str, AttributeValue] = {
        Attr.FUNCTION: info.qualname,
        Attr.COUNT: record.count,
        Attr.IS_RECOMPILE: record.is_recompile,
        Attr.CAUSE_KIND: record.cause_kind.value,
        Attr.CAUSE: record.cause,
        Attr.CAUSE_DIFF: record.diff.to_json(),
        Attr.EAGER_OP: record.eager_op,
        Attr.AFTER_WARMUP: record.after_warmup,
        Attr.HINT: record.hint,
        Attr.DURATION_S: record.compile_s,
        Attr.DEVICE_PLATFORM: devices.platform,
        Attr.DEVICE_KIND: devices.kind,
        Attr.DEVICE_COUNT: devices.count,
        Attr.PROCESS_INDEX: devices.process_index,
    }
    if info.file is not None:
        attrs[Attr.FILE] = info.file
    if info.line is not None:
        attrs[Attr.LINE] = info.line
    if record.callsite is not None:
        attrs[Attr.CALLSITE] = record.callsite
    if record.library_callsite is not None:
        attrs[Attr.LIBRARY_CALLSITE] = record.library_callsite
    if record.compared_with is not None:
        attrs[Attr.COMPARED_WITH] = record.compared_with
    if record.fingerprint:
        attrs[Attr.FINGERPRINT] = record.fingerprint
    if record.program_fingerprint:
        attrs[Attr.PROGRAM_FINGERPRINT] = record.program_fingerprint
    for timing in record.phases:
        attrs[timing.phase.attribute] = timing.seconds
    for key, value in _memory_values(record, _MEMORY_ATTRS):
        attrs[key] = value
    if record.memory_change:
        attrs[Attr.MEMORY_CHANGE] = record.memory_change
    program = record.program
    if program is not None:
        attrs[Attr.PROGRAM_OPS] = program.ops
        if not program.complete:
            attrs[Attr.PROGRAM_OPS_AT_LEAST] = True
        if program.lines:
            attrs[Attr.PROGRAM_TOP_LINES] = program.top_lines_text()
        attrs[Attr.PROGRAM_CONSTANT_BYTES] = program.constant_bytes
        if program.constants:
            attrs[Attr.PROGRAM_CONSTANTS] = program.constants_text()
        if program.flops is not None:
            attrs[Attr.PROGRAM_FLOPS] = program.flops
        if program.bytes_accessed is not None:
            attrs[Attr.PROGRAM_BYTES_ACCESSED] = program.bytes_accessed
    if record.program_file:
        attrs[Attr.PROGRAM_FILE] = record.program_file
    cache = record.persistent_cache
    if cache is not None:
        attrs[Attr.PERSISTENT_CACHE_HIT] = cache.hit
        if cache.not_written_reason is not None:
            attrs[Attr.PERSISTENT_CACHE_NOT_WRITTEN_REASON] = cache.not_written_reason.value
        if cache.miss_reason is not None:
            attrs[Attr.PERSISTENT_CACHE_MISS_REASON] = cache.miss_reason.value
            attrs[Attr.PERSISTENT_CACHE_MISS_DETAIL] = cache.miss_detail or ""
    return _encodable(attrs)


def _encodable(values: dict[str, Any]) -> dict[str, Any]:
    """Every text as it may leave the process (``clean_text``): secret-shaped parts (a
    token used as a dict key, in a path, a cause or a hazard) replaced, and made
    encodable, as one lone surrogate (a file name, a dict key) would make the whole batch
    it travels in fail to serialise."""
    for key, value in values.items():
        if isinstance(value, str):
            values[key] = clean_text(value)
        elif isinstance(value, list):
            values[key] = [_encodable(dict(v)) if isinstance(v, dict) else v for v in value]
    return values


def log_fields(record: CompileRecord, link: SpanLink | None) -> dict[str, Any]:
    """Fields of the ``jax.compile`` JSON log line (flat, one line per compile)."""
    fields: dict[str, Any] = {
        **_compile_of(record),
        Field.IS_RECOMPILE: record.is_recompile,
        Field.EAGER_OP: record.eager_op,
        Field.AFTER_WARMUP: record.after_warmup,
        Field.CAUSE_KIND: record.cause_kind.value,
        Field.CAUSE: record.cause,
        Field.DIFF: [c.as_dict() for c in record.diff.changes[:LOG_DIFF_LIMIT]],
        Field.DIFF_TOTAL: record.diff.total,
        Field.COMPARED_WITH: record.compared_with,
        Field.FINGERPRINT: record.fingerprint or None,
        Field.PROGRAM_FINGERPRINT: record.program_fingerprint or None,
        Field.HINT: record.hint,
        Field.COMPILE_S: round(record.compile_s, 6),
    }
    if record.library_callsite is not None:
        fields[Field.LIBRARY_CALLSITE] = record.library_callsite
    for timing in record.phases:
        fields[timing.phase.value] = round(timing.seconds, 6)
    if record.persistent_cache is not None:
        fields[Field.PERSISTENT_CACHE_HIT] = record.persistent_cache.hit
        if record.persistent_cache.miss_reason is not None:
            fields[Field.PERSISTENT_CACHE_MISS_REASON] = record.persistent_cache.miss_reason.value
            fields[Field.PERSISTENT_CACHE_MISS_DETAIL] = record.persistent_cache.miss_detail
    devices = record.devices
    fields[Field.DEVICE_PLATFORM] = devices.platform
    fields[Field.DEVICE_KIND] = devices.kind
    fields[Field.DEVICE_COUNT] = devices.count
    fields[Field.PROCESS_INDEX] = devices.process_index
    for key, value in _memory_values(record, _MEMORY_FIELDS):
        fields[key] = value
    if record.memory_change:
        fields[Field.MEMORY_CHANGE] = record.memory_change
    program = record.program
    if program is not None:
        fields.update(_program_fields(program))
    if record.program_findings:
        fields[Field.PROGRAM_FINDINGS] = [f.as_dict() for f in record.program_findings]
    if record.program_file:
        fields[Field.PROGRAM_FILE] = record.program_file
    return _encodable(_linked(fields, link))


def _program_fields(program: ProgramFacts) -> dict[str, Any]:
    """The program analysis as log fields: numbers, and lists of plain dicts."""
    fields: dict[str, Any] = {Field.PROGRAM_OPS: program.ops}
    if not program.complete:
        fields[Field.PROGRAM_OPS_AT_LEAST] = True
    fields[Field.PROGRAM_TOP_LINES] = [
        {"line": t.line, "ops": t.ops, "share": round(program.share(t), 4)}
        for t in program.top_lines]
    fields[Field.PROGRAM_CONSTANT_BYTES] = program.constant_bytes
    if program.constants:
        fields[Field.PROGRAM_CONSTANTS] = [
            {"line": c.line, "bytes": c.nbytes, "type": c.type} for c in program.constants]
    if program.flops is not None:
        fields[Field.PROGRAM_FLOPS] = program.flops
    if program.bytes_accessed is not None:
        fields[Field.PROGRAM_BYTES_ACCESSED] = program.bytes_accessed
    return fields


#: The memory sizes of a compile, by the ``ProgramMemory`` field (or ``None``: the device's
#: limit) each is read from: span attribute keys, then log field names.
_MEMORY_ATTRS: tuple[tuple[str, str | None], ...] = (
    (Attr.MEMORY_ARGUMENT_BYTES, "argument_bytes"),
    (Attr.MEMORY_OUTPUT_BYTES, "output_bytes"),
    (Attr.MEMORY_TEMP_BYTES, "temp_bytes"),
    (Attr.MEMORY_GENERATED_CODE_BYTES, "generated_code_bytes"),
    (Attr.DEVICE_MEMORY_LIMIT_BYTES, None),
)
_MEMORY_FIELDS: tuple[tuple[str, str | None], ...] = (
    (Field.MEMORY_ARGUMENT_BYTES, "argument_bytes"),
    (Field.MEMORY_OUTPUT_BYTES, "output_bytes"),
    (Field.MEMORY_TEMP_BYTES, "temp_bytes"),
    (Field.MEMORY_GENERATED_CODE_BYTES, "generated_code_bytes"),
    (Field.DEVICE_MEMORY_LIMIT_BYTES, None),
)


def _memory_values(record: CompileRecord, names: tuple[tuple[str, str | None], ...],
                   ) -> list[tuple[str, int]]:
    """The sizes known of ``record``'s program and device, by key: one not known is absent
    (never 0)."""
    memory = record.memory
    out = []
    for key, field_name in names:
        if field_name is None:
            value = record.devices.memory_limit_bytes
        else:
            value = getattr(memory, field_name) if memory is not None else None
        if value is not None:
            out.append((key, value))
    return out


def _compile_of(record: CompileRecord) -> dict[str, Any]:
    """The fields that say which compile a log line is about: the function, where it is
    defined, the user's line that called it, and its count."""
    info = record.function
    return {Field.FUNCTION: info.qualname, Field.FILE: info.file, Field.LINE: info.line,
            Field.CALLSITE: record.callsite, Field.COUNT: record.count}


def _linked(fields: dict[str, Any], link: SpanLink | None) -> dict[str, Any]:
    """``fields`` with the trace and span ids of the compile's span, where there is one."""
    if link is not None:
        fields[Field.TRACE_ID] = link.trace_id
        fields[Field.SPAN_ID] = link.span_id
    return fields


def program_finding_attributes(finding: ProgramFinding) -> dict[str, AttributeValue]:
    """Attributes of a ``jax.compile.program.finding`` span event (on the compile span)."""
    return _encodable({
        Attr.PROGRAM_FINDING_KIND: finding.kind,
        Attr.PROGRAM_FINDING: finding.text,
        Attr.PROGRAM_FINDING_LINE: finding.line,
        Attr.PROGRAM_FINDING_HINT: finding.hint,
        Attr.PROGRAM_FINDING_LEVEL: finding.level,
    })


def hazard_attributes(hazard: Hazard) -> dict[str, AttributeValue]:
    """Attributes of a ``jax.compile.hazard`` span event (on the compile span)."""
    return _encodable({
        Attr.HAZARD_KIND: hazard.kind.value,
        Attr.HAZARD_PATH: hazard.path,
        Attr.HAZARD: hazard.text,
        Attr.HAZARD_HINT: hazard.hint,
        Attr.HAZARD_LEVEL: hazard.level,
    })


def hazard_fields(record: CompileRecord, hazard: Hazard, link: SpanLink | None,
                  ) -> dict[str, Any]:
    """Fields of a ``jax.compile.hazard`` JSON log line (a WARNING, or INFO for a note)."""
    fields: dict[str, Any] = {
        **_compile_of(record),
        Field.HAZARD_KIND: hazard.kind.value,
        Field.PATH: hazard.path,
        Field.HAZARD: hazard.text,
        Field.HINT: hazard.hint,
    }
    return _encodable(_linked(fields, link))


# --- multi-process jobs ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Divergence:
    """Ranks of a multi-process job that compiled different things for one compile of a
    function (its ``count``-th), as this process saw it."""

    function: str  # qualified name
    count: int  # the compile ordinal of the function the ranks are compared at
    kind: DivergenceKind
    text: str  # one line: ``x: f32[4] (rank 0) vs f32[5] (rank 1)``
    ranks: tuple[tuple[int, ...], ...]  # ranks grouped by what they compiled, lowest first
    missing_ranks: tuple[int, ...] = ()  # ranks that did not compile it within the timeout
    diff: tuple[dict[str, str], ...] = ()  # {"path", "kind", "before", "after"}
    process_index: int = 0  # the rank that detected it (this process)
    detected: float = 0.0  # wall-clock seconds
    link: SpanLink | None = None  # this rank's compile span of that compile


@dataclass(frozen=True, slots=True)
class Storm:
    """One function recompiling past ``install(storm_threshold=...)``: said once, with the
    causes seen so far (first compiles left out)."""

    function: FunctionInfo
    recompiles: int
    threshold: int
    causes: dict[str, int]  # cause kind -> recompiles of that kind
    last_cause: str
    hint: str


def storm_fields(storm: Storm) -> dict[str, Any]:
    """Fields of the ``jax.recompile_storm`` log line (a WARNING)."""
    return _encodable({
        Field.FUNCTION: storm.function.qualname,
        Field.FILE: storm.function.file,
        Field.LINE: storm.function.line,
        Field.RECOMPILES: storm.recompiles,
        Field.THRESHOLD: storm.threshold,
        Field.CAUSES: dict(storm.causes),
        Field.LAST_CAUSE: storm.last_cause,
        Field.HINT: storm.hint,
    })


def divergence_attributes(div: Divergence) -> dict[str, AttributeValue]:
    """Attributes of the ``jax.compile.divergence`` span (and its OpenTelemetry log record)."""
    import json

    attrs: dict[str, AttributeValue] = {
        Attr.FUNCTION: div.function,
        Attr.COUNT: div.count,
        Attr.DIVERGENCE_KIND: div.kind.value,
        Attr.DIVERGENCE: div.text,
        Attr.DIVERGENCE_RANKS: json.dumps([list(r) for r in div.ranks]),
        Attr.DIVERGENCE_DIFF: json.dumps(list(div.diff), ensure_ascii=False),
        Attr.PROCESS_INDEX: div.process_index,
    }
    if div.missing_ranks:
        attrs[Attr.DIVERGENCE_MISSING_RANKS] = json.dumps(list(div.missing_ranks))
    return _encodable(attrs)


def divergence_fields(div: Divergence) -> dict[str, Any]:
    """Fields of the ``jax.compile.divergence`` JSON log line (a WARNING)."""
    fields: dict[str, Any] = {
        Field.FUNCTION: div.function,
        Field.COUNT: div.count,
        Field.DIVERGENCE_KIND: div.kind.value,
        Field.DIVERGENCE: div.text,
        Field.RANKS: [list(r) for r in div.ranks],
        Field.MISSING_RANKS: list(div.missing_ranks),
        Field.DIFF: list(div.diff[:LOG_DIFF_LIMIT]),
        Field.DIFF_TOTAL: len(div.diff),
        Field.PROCESS_INDEX: div.process_index,
    }
    if div.link is not None:
        fields[Field.TRACE_ID] = div.link.trace_id
        fields[Field.SPAN_ID] = div.link.span_id
    return _encodable(fields)
