"""Safe, bounded text for telemetry: no repr may raise, hang the user, or grow unbounded."""

from __future__ import annotations

import re
from typing import Any

REPR_LIMIT = 120
_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")


def clean_text(text: str) -> str:
    """``text`` made encodable as UTF-8: lone surrogates become ``\\udcff`` escapes.

    A lone surrogate (from a user's ``__repr__``, a file name decoded with
    ``surrogateescape``, a dict key) is a valid Python string that no exporter
    can encode: one such character would make a whole batch of telemetry fail
    to serialise. Every text otel_jax emits passes through here.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def truncate(text: str, limit: int = REPR_LIMIT) -> str:
    text = clean_text(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 14)] + f"...(+{len(text) - limit + 14} chars)"


def safe_repr(obj: Any, limit: int = REPR_LIMIT, name: str | None = None) -> str:
    """``repr`` that never raises, never shows a memory address, and stays short.

    ``name``: the field, key or parameter name the value is bound to, when
    there is one (accepted for callers that know it; currently unused).

    Addresses are dropped because they change every run (they would make
    every identity-hashed object look new in a log diff) and must never
    become a metric attribute.
    """
    try:
        text = repr(obj)
    except Exception as exc:  # a user's broken __repr__
        text = f"<{type(obj).__name__} (repr failed: {type(exc).__name__})>"
    if not isinstance(text, str):
        text = f"<{type(obj).__name__}>"
    if " at 0x" in text:
        text = _ADDRESS.sub("", text)
    return truncate(text, limit)


def type_name(obj: Any) -> str:
    t = type(obj)
    module = getattr(t, "__module__", "")
    qual = getattr(t, "__qualname__", t.__name__)
    name = qual if module in ("builtins", "__main__", None) else f"{module}.{qual}"
    return clean_text(name) if isinstance(name, str) else str(name)
