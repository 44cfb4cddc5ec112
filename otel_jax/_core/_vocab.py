"""The one vocabulary of otel_jax: cause kinds, span and metric names, attribute keys, log fields.

``docs/telemetry.md`` is the contract; this module is its code. The library,
the testing kit and ``otel-jax report`` all import their names from here, so a
name is written once. Standard library only: ``otel-jax report`` imports it on
machines where only a log file is available.
"""

from __future__ import annotations

import enum
from typing import Final


class CauseKind(str, enum.Enum):
    """Why a compile happened (``jax.compile.cause.kind``).

    A ``str`` enum: members compare equal to their values, so records, log
    lines and user code may use either.
    """

    FIRST_COMPILE = "first_compile"
    TRANSFORM_PARAMS = "transform_params"
    FUNCTION_IDENTITY = "function_identity"
    JIT_OPTIONS = "jit_options"
    TRACING_CONTEXT = "tracing_context"
    PYTREE_STRUCTURE = "pytree_structure"
    STATIC_ARGUMENT = "static_argument"
    DTYPE = "dtype"
    SHAPE = "shape"
    WEAK_TYPE = "weak_type"
    SHARDING = "sharding"
    DEVICE_PLACEMENT = "device_placement"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


#: Kinds a difference between two signatures can have, most significant first:
#: the one a user has to fix before the others matter.
DIFFERENCE_KINDS: Final[tuple[CauseKind, ...]] = (
    CauseKind.TRANSFORM_PARAMS,
    CauseKind.FUNCTION_IDENTITY,
    CauseKind.JIT_OPTIONS,
    CauseKind.TRACING_CONTEXT,
    CauseKind.PYTREE_STRUCTURE,
    CauseKind.STATIC_ARGUMENT,
    CauseKind.DTYPE,
    CauseKind.SHAPE,
    CauseKind.WEAK_TYPE,
    CauseKind.SHARDING,
    CauseKind.DEVICE_PLACEMENT,
)
#: Every cause kind, as plain strings, in the order the contract lists them.
CAUSE_KINDS: Final[tuple[str, ...]] = (
    CauseKind.FIRST_COMPILE.value, *(k.value for k in DIFFERENCE_KINDS), CauseKind.UNKNOWN.value)
#: The kinds a hazard can have (``jax.compile.hazard.kind``): the cause kind of the
#: recompile it predicts, so that a hazard and the recompile it names share one word.
HAZARD_KINDS: Final[tuple[CauseKind, ...]] = (
    CauseKind.WEAK_TYPE,
    CauseKind.STATIC_ARGUMENT,
    CauseKind.FUNCTION_IDENTITY,
    CauseKind.SHAPE,
    CauseKind.PYTREE_STRUCTURE,
    CauseKind.DTYPE,
    CauseKind.SHARDING,
)

# --- spans -------------------------------------------------------------------------

SPAN_COMPILE_PREFIX: Final = "jax.compile "  # + the function's qualified name
SPAN_TRACE: Final = "jax.trace"
SPAN_LOWER: Final = "jax.lower"
SPAN_BACKEND_COMPILE: Final = "jax.backend_compile"
#: Ranks of a multi-process job compiled different programs for the same call.
SPAN_DIVERGENCE: Final = "jax.compile.divergence"
INSTRUMENTATION_SCOPE: Final = "otel_jax"


class Attr:
    """Attribute keys of the ``jax.compile`` span, its metrics and OTel log records."""

    FUNCTION: Final = "code.function.name"
    FILE: Final = "code.file.path"
    LINE: Final = "code.line.number"
    CALLSITE: Final = "jax.compile.callsite"
    LIBRARY_CALLSITE: Final = "jax.compile.library_callsite"
    COUNT: Final = "jax.compile.count"
    IS_RECOMPILE: Final = "jax.compile.is_recompile"
    CAUSE_KIND: Final = "jax.compile.cause.kind"
    CAUSE: Final = "jax.compile.cause"
    CAUSE_DIFF: Final = "jax.compile.cause.diff"
    COMPARED_WITH: Final = "jax.compile.compared_with"
    FINGERPRINT: Final = "jax.compile.fingerprint"
    PROGRAM_FINGERPRINT: Final = "jax.compile.program_fingerprint"
    EAGER_OP: Final = "jax.compile.eager_op"
    AFTER_WARMUP: Final = "jax.compile.after_warmup"
    HINT: Final = "jax.compile.hint"
    DURATION_S: Final = "jax.compile.duration_s"
    TRACE_S: Final = "jax.compile.trace_s"
    LOWER_S: Final = "jax.compile.lower_s"
    BACKEND_COMPILE_S: Final = "jax.compile.backend_compile_s"
    DEVICE_PLATFORM: Final = "jax.device.platform"
    DEVICE_KIND: Final = "jax.device.kind"
    DEVICE_COUNT: Final = "jax.device.count"
    PROCESS_INDEX: Final = "jax.process.index"
    DEVICE_MEMORY_LIMIT_BYTES: Final = "jax.device.memory_limit_bytes"
    # XLA's memory analysis of the compiled program, and its growth since the compile
    # the cause is against
    MEMORY_ARGUMENT_BYTES: Final = "jax.compile.memory.argument_bytes"
    MEMORY_OUTPUT_BYTES: Final = "jax.compile.memory.output_bytes"
    MEMORY_TEMP_BYTES: Final = "jax.compile.memory.temp_bytes"
    MEMORY_GENERATED_CODE_BYTES: Final = "jax.compile.memory.generated_code_bytes"
    MEMORY_CHANGE: Final = "jax.compile.memory.change"
    # the lowered program: its size by the user's line, constants, XLA's cost analysis
    PROGRAM_OPS: Final = "jax.compile.program.ops"
    PROGRAM_OPS_AT_LEAST: Final = "jax.compile.program.ops_at_least"
    PROGRAM_TOP_LINES: Final = "jax.compile.program.top_lines"
    PROGRAM_CONSTANT_BYTES: Final = "jax.compile.program.constant_bytes"
    PROGRAM_CONSTANTS: Final = "jax.compile.program.constants"
    PROGRAM_FLOPS: Final = "jax.compile.program.flops"
    PROGRAM_BYTES_ACCESSED: Final = "jax.compile.program.bytes_accessed"
    PROGRAM_FILE: Final = "jax.compile.program.file"
    # the jax.compile.program.finding span event (what makes the program large)
    PROGRAM_FINDING_KIND: Final = "jax.compile.program.finding.kind"
    PROGRAM_FINDING: Final = "jax.compile.program.finding"
    PROGRAM_FINDING_LINE: Final = "jax.compile.program.finding.line"
    PROGRAM_FINDING_HINT: Final = "jax.compile.program.finding.hint"
    PROGRAM_FINDING_LEVEL: Final = "jax.compile.program.finding.level"
    PERSISTENT_CACHE_HIT: Final = "jax.persistent_cache.hit"
    PERSISTENT_CACHE_NOT_WRITTEN_REASON: Final = "jax.persistent_cache.not_written_reason"
    STEP_NAME: Final = "jax.step.name"
    STEP_NUMBER: Final = "jax.step.number"
    STEP_COMPILED: Final = "jax.step.compiled"
    STEP_COMPILES: Final = "jax.step.compiles"
    STEP_COMPILE_S: Final = "jax.step.compile_s"
    PERSISTENT_CACHE_MISS_REASON: Final = "jax.persistent_cache.miss_reason"
    PERSISTENT_CACHE_MISS_DETAIL: Final = "jax.persistent_cache.miss_detail"
    EVENT_NAME: Final = "event.name"
    # the jax.compile.divergence span (multi-process jobs)
    DIVERGENCE_KIND: Final = "jax.compile.divergence.kind"
    DIVERGENCE: Final = "jax.compile.divergence"
    DIVERGENCE_RANKS: Final = "jax.compile.divergence.ranks"
    DIVERGENCE_MISSING_RANKS: Final = "jax.compile.divergence.missing_ranks"
    DIVERGENCE_DIFF: Final = "jax.compile.divergence.diff"
    # the jax.compile.hazard span event (a recompile named before it happens)
    HAZARD_KIND: Final = "jax.compile.hazard.kind"
    HAZARD: Final = "jax.compile.hazard"
    HAZARD_PATH: Final = "jax.compile.hazard.path"
    HAZARD_HINT: Final = "jax.compile.hazard.hint"
    HAZARD_LEVEL: Final = "jax.compile.hazard.level"
    # metric-only label: why a persistent-cache miss was not written
    REASON: Final = "reason"


# --- metrics -----------------------------------------------------------------------

class Metric:
    """OpenTelemetry instrument names (Prometheus adds ``_total`` / unit suffixes)."""

    COMPILATIONS: Final = "jax.compilations"
    COMPILE_DURATION: Final = "jax.compile.duration"
    AFTER_WARMUP: Final = "jax.compilations.after_warmup"
    CACHE_REQUESTS: Final = "jax.persistent_cache.requests"
    CACHE_HITS: Final = "jax.persistent_cache.hits"
    CACHE_MISSES: Final = "jax.persistent_cache.misses"
    CACHE_WRITES: Final = "jax.persistent_cache.writes"
    CACHE_NOT_WRITTEN: Final = "jax.persistent_cache.not_written"
    STEP_DURATION: Final = "jax.step.duration"
    DIVERGENCES: Final = "jax.compile.divergences"
    CACHE_LOOKUPS: Final = "jax.persistent_cache.lookups"
    DROPPED: Final = "jax.compile.dropped"
    FUNCTIONS_DROPPED: Final = "jax.compile.functions_dropped"
    HAZARDS: Final = "jax.compile.hazards"


# --- logs --------------------------------------------------------------------------

EVENT_COMPILE: Final = "jax.compile"
EVENT_STORM: Final = "jax.recompile_storm"
EVENT_DIVERGENCE: Final = "jax.compile.divergence"
#: One ``otel_jax.step()`` step (every step that compiled, a sample of the others).
EVENT_STEP: Final = "jax.step"
#: A recompile named at the compile before it (a span event of that compile, a log line).
EVENT_HAZARD: Final = "jax.compile.hazard"
#: What makes a compile's program large (a span event of that compile).
EVENT_PROGRAM_FINDING: Final = "jax.compile.program.finding"
LOGGER_NAME: Final = "otel_jax"


class Field:
    """Fields of the ``jax.compile`` JSON log line (flat)."""

    TIMESTAMP: Final = "timestamp"
    LEVEL: Final = "level"
    EVENT: Final = "event"
    LOGGER: Final = "logger"
    FUNCTION: Final = "function"
    FILE: Final = "file"
    LINE: Final = "line"
    CALLSITE: Final = "callsite"
    LIBRARY_CALLSITE: Final = "library_callsite"
    COUNT: Final = "count"
    IS_RECOMPILE: Final = "is_recompile"
    EAGER_OP: Final = "eager_op"
    AFTER_WARMUP: Final = "after_warmup"
    CAUSE_KIND: Final = "cause_kind"
    CAUSE: Final = "cause"
    DIFF: Final = "diff"
    DIFF_TOTAL: Final = "diff_total"
    COMPARED_WITH: Final = "compared_with"
    FINGERPRINT: Final = "fingerprint"
    PROGRAM_FINGERPRINT: Final = "program_fingerprint"
    HINT: Final = "hint"
    COMPILE_S: Final = "compile_s"
    TRACE_S: Final = "trace_s"
    LOWER_S: Final = "lower_s"
    BACKEND_COMPILE_S: Final = "backend_compile_s"
    PERSISTENT_CACHE_HIT: Final = "persistent_cache_hit"
    PERSISTENT_CACHE_MISS_REASON: Final = "persistent_cache_miss_reason"
    PERSISTENT_CACHE_MISS_DETAIL: Final = "persistent_cache_miss_detail"
    DEVICE_PLATFORM: Final = "device_platform"
    DEVICE_KIND: Final = "device_kind"
    DEVICE_COUNT: Final = "device_count"
    PROCESS_INDEX: Final = "process_index"
    DEVICE_MEMORY_LIMIT_BYTES: Final = "device_memory_limit_bytes"
    MEMORY_ARGUMENT_BYTES: Final = "memory_argument_bytes"
    MEMORY_OUTPUT_BYTES: Final = "memory_output_bytes"
    MEMORY_TEMP_BYTES: Final = "memory_temp_bytes"
    MEMORY_GENERATED_CODE_BYTES: Final = "memory_generated_code_bytes"
    MEMORY_CHANGE: Final = "memory_change"
    PROGRAM_OPS: Final = "program_ops"
    PROGRAM_OPS_AT_LEAST: Final = "program_ops_at_least"
    PROGRAM_TOP_LINES: Final = "program_top_lines"
    PROGRAM_CONSTANT_BYTES: Final = "program_constant_bytes"
    PROGRAM_CONSTANTS: Final = "program_constants"
    PROGRAM_FLOPS: Final = "program_flops"
    PROGRAM_BYTES_ACCESSED: Final = "program_bytes_accessed"
    PROGRAM_FINDINGS: Final = "program_findings"
    PROGRAM_FILE: Final = "program_file"
    TRACE_ID: Final = "trace_id"
    SPAN_ID: Final = "span_id"
    # the storm warning's own fields
    RECOMPILES: Final = "recompiles"
    THRESHOLD: Final = "threshold"
    CAUSES: Final = "causes"
    LAST_CAUSE: Final = "last_cause"
    # the divergence warning's own fields (multi-process jobs)
    DIVERGENCE_KIND: Final = "divergence_kind"
    DIVERGENCE: Final = "divergence"
    RANKS: Final = "ranks"
    MISSING_RANKS: Final = "missing_ranks"
    # the hazard line's own fields (``hint`` is shared; the line's ``level`` is the
    # hazard's: ``warning``, or ``info`` for a note)
    HAZARD_KIND: Final = "hazard_kind"
    HAZARD: Final = "hazard"
    PATH: Final = "path"
    # the step line's own fields (``compile_s``, ``trace_id`` and ``span_id`` are shared)
    STEP_NAME: Final = "step_name"
    STEP_NUMBER: Final = "step_number"
    DURATION_S: Final = "duration_s"
    COMPILED: Final = "compiled"
    COMPILES: Final = "compiles"
    NESTED: Final = "nested"
    STEPS: Final = "steps"
    STEPS_S: Final = "steps_s"


class DiffKey:
    """Keys of one change in ``jax.compile.cause.diff`` and the log line's ``diff``."""

    PATH: Final = "path"
    KIND: Final = "kind"
    BEFORE: Final = "before"
    AFTER: Final = "after"


#: A change's ``before`` or ``after`` where that side has no such path (a dict's key
#: added): the same word in a compile's diff and in a divergence named across ranks.
ABSENT: Final = "<absent>"


#: The key of a ``compile_history`` entry's signature (its other keys are log fields).
ENTRY_SIGNATURE: Final = "signature"

#: The ``kind`` of the last diff entry when the list was cut short.
DIFF_TRUNCATED: Final = "truncated"
#: How many changes a log line lists (``diff_total`` counts them all).
LOG_DIFF_LIMIT: Final = 50


class Phase(str, enum.Enum):
    """The compile phases JAX reports: the record's key, and the child span's name."""

    TRACE = "trace_s"
    LOWER = "lower_s"
    BACKEND_COMPILE = "backend_compile_s"

    @property
    def span_name(self) -> str:
        return _PHASE_SPANS[self]

    @property
    def attribute(self) -> str:
        return f"jax.compile.{self.value}"


_PHASE_SPANS: Final = {
    Phase.TRACE: SPAN_TRACE,
    Phase.LOWER: SPAN_LOWER,
    Phase.BACKEND_COMPILE: SPAN_BACKEND_COMPILE,
}


class NotWrittenReason(str, enum.Enum):
    """Why JAX did not write a persistent-cache entry for a compile it had to do."""

    NOT_PROCESS_0 = "not_process_0"
    COMPILE_TIME_BELOW_MINIMUM = "compile_time_below_minimum"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


class DivergenceKind(str, enum.Enum):
    """How the ranks of a job differ on one compile (``jax.compile.divergence.kind``)."""

    SIGNATURE = "signature"  # they compiled the call for different signatures
    PROGRAM = "program"  # same signature, different lowered program
    MISSING = "missing"  # some ranks never compiled what the others did, within the timeout

    def __str__(self) -> str:
        return self.value
class MissReason(str, enum.Enum):
    """Why JAX's persistent compilation cache did not serve a compile, from the compile
    ledger of earlier runs (``jax.persistent_cache.miss_reason``)."""

    NEVER_SEEN = "never_seen"  # no earlier run recorded this function and signature
    KEY_CHANGED = "key_changed"  # recorded, under another cache key: a key part changed
    NOT_WRITTEN = "not_written"  # recorded under this key, but no entry was written (or kept)

    def __str__(self) -> str:
        return self.value


class ReportName:
    """Names ``otel-jax report`` gives to what no log line names: the aggregate rows, a
    compile line without a function name, a persistent-cache miss without a reason."""

    EAGER_OPS: Final = "(eager ops)"  # the one row of every eager-op compile
    OTHER: Final = "(other)"  # the row (and the cause) of what is past a cap
    UNKNOWN_FUNCTION: Final = "(unknown)"  # a compile line that names no function
    UNEXPLAINED: Final = "unexplained"  # a miss the compile ledger did not explain (it was off)


class RowKind(str, enum.Enum):
    """What a row of ``otel-jax report`` sums up (its ``row_kind``)."""

    FUNCTION = "function"  # one user function (name, file, line)
    EAGER_OP = "eager_op"  # one eager op, with --include-eager
    EAGER_OPS = "eager_ops"  # the (eager ops) row: every eager-op compile
    OTHER = "other"  # the (other) row: functions past --max-functions

    def __str__(self) -> str:
        return self.value


#: Environment variable: the compile ledger's path, or ``off``.
LEDGER_ENV: Final = "OTEL_JAX_LEDGER"
#: Environment variable: what is scrubbed while ``install(scrub=...)`` is left ``None``.
SCRUB_ENV: Final = "OTEL_JAX_SCRUB"
#: Environment variable: ``install(log_format=...)``: ``auto``, ``json`` or ``console``.
LOG_FORMAT_ENV: Final = "OTEL_JAX_LOG_FORMAT"
#: Environment variable (https://no-color.org): set to anything, the console lines of
#: ``log_format="console"`` have no colors, even on a terminal.
NO_COLOR_ENV: Final = "NO_COLOR"


class RunEnv:
    """The environment ``otel-jax run`` hands to the program it starts (besides the
    ``OTEL_JAX_*`` variables of ``install()``'s options, which its flags set)."""

    #: The folder where each process of the run writes its JSON log lines (``<pid>.jsonl``).
    DIR: Final = "OTEL_JAX_RUN_DIR"
    #: ``auto`` (only when something recompiled), ``always`` or ``never``.
    SUMMARY: Final = "OTEL_JAX_RUN_SUMMARY"
    #: Where the top process writes the HTML page at exit (unset: none).
    HTML: Final = "OTEL_JAX_RUN_HTML"
    #: The program's name (``train`` for ``train.py``, a directory's or a zip's name, the
    #: module of ``-m``): the service name of every process of the run, spawned workers
    #: included, where nothing else names it (unset: a program with no name, ``-c``).
    PROGRAM: Final = "OTEL_JAX_RUN_PROGRAM"


class RankWire:
    """Keys and fields of the cross-rank check on JAX's coordination service
    (``_ranks_protocol``).

    Short on purpose: every rank reads a verdict at every compile, so each byte of a
    name is paid once per rank per compile.
    """

    PREFIX: Final = "otel_jax/compiles"  # + /<function digest>/<compile ordinal>/...
    ENTRIES: Final = "e"  # .../e/<rank>: "<signature fingerprint> <program fingerprint>"
    ARRIVED: Final = "n"  # arrival counter (key_value_increment): 1 is the comparer
    ALL: Final = "all"  # e/all: set by the rank whose arrival completes the count
    VERDICT: Final = "v"  # the comparer's verdict (JSON), read by every rank in one read
    NAMED: Final = "d"  # a signature divergence named with paths and values (JSON)
    SUMMARIES: Final = "s"  # .../s/<rank>: a signature summary, published on request
    TAKEOVER: Final = "t"  # counter: who compares when the comparer never answered
    GENERATION: Final = "~"  # v~1, v~2: a shared key again, after a rank closed reading it
    # the tree (``_ranks_gather``: more ranks than its fan-in), keys under
    # TREE_PREFIX/<digest of function and ordinal>/: <index> (a group's counter: its
    # ranks' presence bits and digests), e<index>/<arrival> (an entry of a rank unlike
    # one before it), e<index>/a (all arrived), t<index> (takeover) at level 0; above,
    # <level>.<index>/<slot> (a child's summary), <level>.<index>n (arrival counter),
    # <level>.<index>t, <level>.<index>/a
    TREE_PREFIX: Final = "oj"
    NODE_ALL: Final = "a"  # set by the last to arrive at a node
    # a tree's verdict without GROUPS: every rank that arrived compiled one program, each
    # knows which (its own); {} when none is missing. The whole verdict, for late ranks:
    FULL: Final = "f"
    AGREE: Final = "a"  # the value of NODE_ALL when the arrivals' programs sum as one
    DISAGREE: Final = "x"  # ... and when they do not (not "-": that ends a read, WAKE)
    # fields of the verdict and of the named divergence
    GROUPS: Final = "g"  # [[signature fp, program fp, ranks as ranges], ...]
    MISSING: Final = "m"  # ranks as ranges
    KIND: Final = "k"  # a DivergenceKind value, when one is reported
    WANTED: Final = "w"  # ranks asked for their summary
    COMPARER: Final = "r"  # the rank that wrote the verdict
    TEXT: Final = "x"
    DIFF: Final = "y"
    # fields of a signature summary
    LEAVES: Final = "l"  # [[path, type, placement], ...]
    NUM_LEAVES: Final = "n"
    STATICS: Final = "st"
    OPTIONS: Final = "o"
    CONTEXT: Final = "c"
    TREE: Final = "t"  # a digest of the pytree structure


class LedgerWire:
    """Names of the compile ledger's lines and objects (``_fleet._ledger``, ``_ledger_remote``).

    Written by one run of a job and read by the next (and by other processes, other hosts
    and other versions of otel_jax sharing the ledger), so a name, once written, is read
    forever: a name here never changes its string, and short ones stay short (each line is
    at most ``PIPE_BUF`` bytes).
    """

    SUFFIX: Final = ".otel_jax-ledger.jsonl"  # the file: <cache dir> + this (+ ".1" rotated)
    ROTATED: Final = ".1"  # the file before the last rotation: <file> + this
    LOCK: Final = ".lock"  # the rotation's lock file: <file> + this
    REMOTE_SUFFIX: Final = ".otel_jax-ledger"  # a remote cache's: <cache dir> + this + /NNNN.json
    MARK: Final = "otel_jax_ledger"  # every line and object: MARK: VERSION; others are foreign
    VERSION: Final = 1
    ENTRIES: Final = "entries"  # a remote object's list of lines
    # the writer
    TIME: Final = "t"  # wall clock of the compile, seconds since the epoch
    RUN: Final = "run"  # a random id of the writing process's run
    PID: Final = "pid"
    STARTED: Final = "started"  # wall clock the writing process started at
    PROCESS: Final = "proc"  # JAX's process index of the writer (None outside a job)
    # what was compiled
    FUNCTION: Final = "fn"  # qualified name @ file name
    SIGNATURE: Final = "sig"  # the signature fingerprint
    PROGRAM: Final = "prog"  # the program fingerprint
    BASE: Final = "base"  # the signature fingerprint without its tracing context
    CONTEXT_NAMES: Final = "ctxn"  # a digest of the tracing context's value names
    CONTEXT: Final = "ctx"  # the tracing context's values, as bounded text
    CODE: Final = "code"  # file name:line of the function
    # the persistent cache
    KEY: Final = "key"  # {part: hash} for each part of JAX's cache key (below)
    WRITTEN: Final = "written"  # JAX wrote an entry
    NOT_WRITTEN_REASON: Final = "not_written_reason"  # a NotWrittenReason value, or None
    COMPILE_S: Final = "compile_s"
    # readable values of the key's parts
    JAX: Final = "jax"
    JAXLIB: Final = "jaxlib"
    BACKEND: Final = "backend"  # platform and platform version
    XLA_FLAGS: Final = "xla_flags"  # the flags in the key, scrubbed
    DEVICES: Final = "devices"  # "<count> x <kind>"
    COMPRESSION: Final = "compression"
    # the parts of JAX's cache key, as jax._src.cache_key.get names them, in its order
    PART_COMPUTATION: Final = "computation"  # hashed as the program fingerprint
    PART_JAXLIB: Final = "jax_lib version"
    PART_BACKEND: Final = "backend version"
    PART_XLA_FLAGS: Final = "XLA flags"
    PART_COMPILE_OPTIONS: Final = "compile_options"
    PART_ACCELERATOR_CONFIG: Final = "accelerator_config"
    PART_COMPRESSION: Final = "compression"
    PART_CUSTOM_HOOK: Final = "custom_hook"
