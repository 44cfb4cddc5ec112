"""A recompile whose program needs more device memory than the compile it is compared with:
said beside its cause (``jax.compile.memory.change``: ``temp 1.2 GiB -> 2.5 GiB``).

Its own field, not part of the cause: the cause says why JAX compiled again, and keeps its
meaning; this says what the new program costs, from XLA's memory analysis of both programs
(``_capture._jax._memory``). Only growth is said, and only when it matters: a size that grew
by at least ``GROWTH_RATIO`` and by at least ``GROWTH_MIN_BYTES``.
"""

from __future__ import annotations

from .._capture._jax._memory import ProgramMemory
from .._core._units import human_bytes  # the report's units: a change reads as its sizes do

#: A size is said to have grown when the new one is at least this much of the old one...
GROWTH_RATIO = 1.10
#: ... and at least this many bytes more (a few kilobytes more of a small program is noise).
GROWTH_MIN_BYTES = 1 << 20

#: The sizes compared, in the order they are said, with the word each is said with.
_SIZES = (("temp_bytes", "temp"), ("argument_bytes", "arguments"),
          ("output_bytes", "outputs"), ("generated_code_bytes", "code"))


def growth(before: ProgramMemory | None, after: ProgramMemory | None) -> str:
    """What of ``after`` grew past the thresholds since ``before``, one line
    (``temp 1.2 GiB -> 2.5 GiB, arguments 8.0 MiB -> 16.0 MiB``); ``""`` when nothing did,
    or either analysis is missing."""
    if before is None or after is None:
        return ""
    parts = []
    for field, word in _SIZES:
        old, new = getattr(before, field), getattr(after, field)
        if old is None or new is None:
            continue
        if new - old >= GROWTH_MIN_BYTES and new >= old * GROWTH_RATIO:
            parts.append(f"{word} {human_bytes(old)} -> {human_bytes(new)}")
    return ", ".join(parts)
