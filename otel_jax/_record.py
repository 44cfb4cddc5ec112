"""One record per compilation: the single source every span, metric and log line is built from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._diff import Diff
from ._signature import Signature
from ._source import FunctionInfo

# Phase names of the child spans, keyed by the attribute holding their duration.
PHASES: tuple[tuple[str, str], ...] = (
    ("trace_s", "jax.trace"),
    ("lower_s", "jax.lower"),
    ("backend_compile_s", "jax.backend_compile"),
)


@dataclass(slots=True)
class Phase:
    """One phase JAX reported, with its own wall-clock start and end (seconds)."""

    name: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(slots=True)
class CompileRecord:
    """Everything known about one backend compile, as plain data."""

    function: FunctionInfo
    count: int
    cause_kind: str
    cause: str
    diff: Diff
    signature: Signature
    start: float  # wall-clock seconds, JAX's own clock
    end: float
    phases: dict[str, Phase] = field(default_factory=dict)  # by "trace_s" / "lower_s" / ...
    callsite: str | None = None
    eager_op: bool = False
    persistent_cache_hit: bool | None = None  # None: the persistent cache is not in use
    persistent_cache_written: bool | None = None
    persistent_cache_skip_reason: str | None = None  # why a miss was not written
    after_warmup: bool = False
    hint: str = ""
    device_platform: str = "unknown"
    device_kind: str = "unknown"
    device_count: int = 1
    process_index: int = 0
    trace_id: str | None = None
    span_id: str | None = None
    compared_with: int | None = None  # the earlier compile (its count) the diff is against

    @property
    def is_recompile(self) -> bool:
        """A compile of an already-compiled function that XLA really had to redo."""
        return self.count > 1 and not self.persistent_cache_hit

    @property
    def compile_s(self) -> float:
        return max(0.0, self.end - self.start)

    def phase_seconds(self, key: str) -> float | None:
        phase = self.phases.get(key)
        return None if phase is None else phase.seconds

    def span_attributes(self) -> dict[str, Any]:
        """Attributes of the ``jax.compile`` span, named as SPEC.md fixes them."""
        attrs: dict[str, Any] = {
            "code.function.name": self.function.qualname,
            "jax.compile.count": self.count,
            "jax.compile.is_recompile": self.is_recompile,
            "jax.compile.cause.kind": self.cause_kind,
            "jax.compile.cause": self.cause,
            "jax.compile.cause.diff": self.diff.to_json(),
            "jax.compile.eager_op": self.eager_op,
            "jax.compile.after_warmup": self.after_warmup,
            "jax.compile.hint": self.hint,
            "jax.compile.duration_s": self.compile_s,
            "jax.device.platform": self.device_platform,
            "jax.device.kind": self.device_kind,
            "jax.device.count": self.device_count,
            "jax.process.index": self.process_index,
        }
        if self.function.file is not None:
            attrs["code.file.path"] = self.function.file
        if self.function.line is not None:
            attrs["code.line.number"] = self.function.line
        if self.callsite is not None:
            attrs["jax.compile.callsite"] = self.callsite
        if self.compared_with is not None:
            attrs["jax.compile.compared_with"] = self.compared_with
        for key, _ in PHASES:
            seconds = self.phase_seconds(key)
            if seconds is not None:
                attrs[f"jax.compile.{key}"] = seconds
        if self.persistent_cache_hit is not None:
            attrs["jax.persistent_cache.hit"] = self.persistent_cache_hit
        if self.persistent_cache_skip_reason is not None:
            attrs["jax.persistent_cache.not_written_reason"] = self.persistent_cache_skip_reason
        return attrs

    def log_fields(self) -> dict[str, Any]:
        """Fields of the ``jax.compile`` JSON log line (flat, one line per compile)."""
        fields: dict[str, Any] = {
            "function": self.function.qualname,
            "file": self.function.file,
            "line": self.function.line,
            "callsite": self.callsite,
            "count": self.count,
            "is_recompile": self.is_recompile,
            "eager_op": self.eager_op,
            "after_warmup": self.after_warmup,
            "cause_kind": self.cause_kind,
            "cause": self.cause,
            "diff": [c.as_dict() for c in self.diff.changes[:50]],
            "diff_total": self.diff.total,
            "compared_with": self.compared_with,
            "hint": self.hint,
            "compile_s": round(self.compile_s, 6),
        }
        for key, _ in PHASES:
            seconds = self.phase_seconds(key)
            if seconds is not None:
                fields[key] = round(seconds, 6)
        if self.persistent_cache_hit is not None:
            fields["persistent_cache_hit"] = self.persistent_cache_hit
        fields.update(
            device_platform=self.device_platform,
            device_kind=self.device_kind,
            device_count=self.device_count,
            process_index=self.process_index,
        )
        if self.trace_id is not None:
            fields["trace_id"] = self.trace_id
            fields["span_id"] = self.span_id
        return fields
