"""What each fact read off JAX internals is (a :class:`Capability`), what is reported without
it, and the one warning that says which a JAX version lacks.

Its own module: the vocabulary of the boundary, imported by ``import otel_jax`` (the
public ``otel_jax.Capability``): it imports no JAX. Checked on JAX 0.8.0, 0.10.2 and
0.12.0.1 (the oldest, default and newest test venvs), on each of which every capability is
available. Fallback: none needed; a reader that fails on its first real input after
install is said lost here, once (``say_lost``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple


class Capability(enum.Enum):
    """A fact otel_jax reads off JAX internals rather than public API.

    On a JAX version where those internals moved the fact is unavailable and its
    fallback is reported instead. Compile counts, durations and phases come from
    JAX's monitoring events and are always kept.
    """

    #: The call's function, arguments and jit options on a dispatch miss: the cause diff.
    CAUSES = "causes"
    #: The same for a jitted function called under grad/vmap/jvp outside jit.
    TRANSFORMED_CAUSES = "transformed_causes"
    #: The lowered program's digest (``jax.compile.program_fingerprint``).
    PROGRAM_FINGERPRINTS = "program_fingerprints"
    #: The persistent-cache key part by part: why the persistent cache missed.
    CACHE_MISS_REASONS = "cache_miss_reasons"

    @property
    def lost(self) -> str:
        """What is reported without it."""
        return _LOST[self]


_LOST = {
    Capability.CAUSES: "recompile causes (cause 'unknown')",
    Capability.TRANSFORMED_CAUSES:
        "causes of jitted functions called under grad/vmap outside jit (cause 'unknown')",
    Capability.PROGRAM_FINGERPRINTS: "program fingerprints (none)",
    Capability.CACHE_MISS_REASONS: "why the persistent cache missed (reason not told)",
}


class Unavailable(NamedTuple):
    """One capability this JAX version lacks, and which internal moved."""

    capability: Capability
    reason: str


def unavailable_message(jax_version: str, unavailable: Sequence[Unavailable]) -> str:
    """The one warning that says what this JAX version costs (causes and what moved)."""
    lost = {u.capability for u in unavailable}
    shown = [u for u in unavailable if not (u.capability is Capability.TRANSFORMED_CAUSES
                                            and Capability.CAUSES in lost)]
    listed = "; ".join(f"{u.capability.lost} [{u.reason}]" for u in shown)
    return (f"otel_jax: on jax {jax_version} some facts are unavailable: {listed}. "
            "Compile counts, durations and phases are kept; the jit calls are unaffected.")


def say_lost(capability: str, reason: str) -> None:
    """One warning, worded as install()'s, for a fact whose reader failed on its first real
    input after install (install could not try it: the probe program could not be built,
    or the reader needs a compile's backend)."""
    from ..._core._failopen import Topic, WarnKey, warn_once

    lost = Unavailable(Capability(capability), reason)
    warn_once(WarnKey(Topic.JAX_UNAVAILABLE, capability),
              unavailable_message(_jax_version(), [lost]))


def _jax_version() -> str:
    try:
        import jax

        return str(jax.__version__)
    except Exception:  # pragma: no cover - jax itself is broken: say so in the warning
        return "?"
