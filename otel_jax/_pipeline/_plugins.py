"""What the pipeline asks of the checks that sit above it, and nothing more.

The cross-rank check (``_fleet._ranks``) and the compile ledger (``_fleet._ledger``) are
fed by each compile's record, but the pipeline does not know them: it calls these two
interfaces, and ``_setup._checks`` plugs the real ones into the engine when otel_jax is
imported. Until then (an ``Engine()`` of a unit test) they do nothing, so the pipeline
runs and is tested without the fleet.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._capture._signature import Signature
from .._capture._source import FunctionInfo
from ._record import CompileRecord, Divergence, PersistentCache, SpanLink


class DivergenceError(RuntimeError):
    """Ranks compiled different programs for the same call (``on_divergence="raise"``)."""

    def __init__(self, divergence: Divergence) -> None:
        self.divergence = divergence
        super().__init__(
            f"{divergence.function}: the ranks of this job diverge at compile "
            f"#{divergence.count} ({divergence.kind.value}): {divergence.text}. Every rank "
            "must compile the same program for the same call, or the next collective hangs.")


class RankCheck(Protocol):
    """Compares each compile with the other ranks' of a multi-process job."""

    #: ``"raise"``: the engine emits on the compiling thread and raises the divergence
    #: ``on_compile`` returns from the jit call; ``"off"``: nothing is compared.
    on_divergence: str

    def on_compile(self, record: CompileRecord, link: SpanLink | None,
                   ) -> Divergence | None: ...


class CacheLedger(Protocol):
    """Says why JAX's persistent compilation cache missed, across runs."""

    def note(self, info: FunctionInfo, fingerprint: str, program: str, inputs: Any,
             cache: PersistentCache, compile_s: float, signature: Signature | None = None,
             base: str = "") -> PersistentCache:
        """``base``: the signature's fingerprint without its tracing context, made where
        the signature is fingerprinted (the ledger tells a context change by it)."""


class NoRankCheck:
    """No check plugged in: nothing is compared."""

    on_divergence = "off"

    def on_compile(self, record: CompileRecord, link: SpanLink | None,
                   ) -> Divergence | None:
        return None


class NoLedger:
    """No ledger plugged in: the cache's own facts, unexplained."""

    def note(self, info: FunctionInfo, fingerprint: str, program: str, inputs: Any,
             cache: PersistentCache, compile_s: float, signature: Signature | None = None,
             base: str = "") -> PersistentCache:
        return cache
