"""Sizes as a person reads them, in one place for the library and the report (standard
library only: the report imports nothing else of otel_jax's but the vocabulary)."""

from __future__ import annotations

_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(size: int) -> str:
    """``size`` bytes as a person reads it: ``512 B``, ``1.5 KiB``, ``2.5 GiB`` (powers of
    1024, one decimal)."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in _BYTE_UNITS:
        value /= 1024
        if value < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{value:.1f} {unit}"
    return f"{size} B"  # pragma: no cover - the loop always returns
