"""Safe, bounded text for telemetry: no repr may raise, hang, grow unbounded or leak a secret.

Every value text otel_jax emits is made here: ``safe_repr`` takes the repr,
drops memory addresses, applies the scrubbing rules of ``_scrub`` and cuts
the result to a limit.
"""

from __future__ import annotations

import re
from typing import Any

from . import _scrub

REPR_LIMIT = 120
#: Characters past the limit that the scrubbing rules still read, so that a
#: secret cut by the limit is recognised (and a quoted value is seen whole).
_SCRUB_CONTEXT = 256
_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")


def clean_text(text: str) -> str:
    """``text`` as it may leave the process: secret-shaped parts replaced, encodable as
    UTF-8. Every text otel_jax emits passes through here (span attributes, log fields,
    ``compile_history``, warnings), so a secret used as a dict key, a parameter name or
    any other part of an argument path is replaced however the path was rendered (by
    JAX's key paths, by the diff's tree walk, by a wrapper library's layout).

    A lone surrogate (from a user's ``__repr__``, a file name decoded with
    ``surrogateescape``, a dict key) is a valid Python string that no exporter
    can encode: one such character would make a whole batch of telemetry fail
    to serialise; it becomes a ``\\udcff`` escape.
    """
    rules = _scrub.active()
    if rules is not None:
        text = rules.scrub_shaped(text)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def truncate(text: str, limit: int = REPR_LIMIT, hidden: int = 0) -> str:
    """``text`` cut to ``limit`` characters; ``hidden``: characters already cut before."""
    text = clean_text(text)
    if len(text) <= limit and not hidden:
        return text
    if len(text) <= limit:
        return text + f"...(+{hidden} chars)"
    return text[: max(0, limit - 14)] + f"...(+{len(text) + hidden - limit + 14} chars)"


def raw_repr(obj: Any) -> str:
    """``repr`` that never raises and shows no memory address; neither scrubbed nor cut.

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
    return text


def emitted(text: str, limit: int = REPR_LIMIT, name: str | None = None,
            type_label: str | None = None) -> str:
    """A value's repr as it may leave the process: scrubbed, then cut to ``limit``.

    ``name``: the argument, field, key or keyword the value is bound to;
    under a sensitive name the whole value is scrubbed, and with
    ``ScrubRules(hide_values=True)`` every named value shows only its type
    (``type_label``) and a digest.
    """
    rules = _scrub.active()
    if rules is None:
        return truncate(text, limit)
    if name is not None and rules.hide_values:
        mark = f" #{_scrub.digest(text)}" if rules.digest else ""
        return truncate(f"<{type_label or 'value'}{mark}>", limit)
    head = text[: limit + _SCRUB_CONTEXT]
    return truncate(rules.scrub(head, name), limit, len(text) - len(head))


def safe_repr(obj: Any, limit: int = REPR_LIMIT, name: str | None = None) -> str:
    """``repr`` that never raises, never shows a memory address or a secret, and stays short.

    ``name``: the name the value is bound to (a static argument, a dataclass
    field, a dict key, a keyword), when there is one: a value under a name
    that looks sensitive (``api_key``, ``password``, ...) is scrubbed whole.
    Secret-shaped values and sensitive ``name=value`` pairs inside the repr
    are scrubbed whatever the name (see ``_scrub``).
    """
    return emitted(raw_repr(obj), limit, name, type_name(obj) if name is not None else None)


def type_name(obj: Any) -> str:
    t = type(obj)
    module = getattr(t, "__module__", "")
    qual = getattr(t, "__qualname__", t.__name__)
    name = qual if module in ("builtins", "__main__", None) else f"{module}.{qual}"
    return clean_text(name) if isinstance(name, str) else str(name)
