"""How Python would take a warning given now, read from ``warnings`` and never changed:
what its filters do with it, and whether Python itself writes it to ``sys.stderr``.

The filters and ``showwarning`` are the application's (and a test runner's): otel_jax
reads them to know whether a warning that one of its own lines says too would be written
twice (``_failopen._left_to_the_line``). Standard library only.
"""

from __future__ import annotations

import warnings
from typing import Any


def module_of(filename: str) -> str:
    """The module name Python gives a warning located in ``filename`` with none given."""
    module = filename or "<unknown>"
    return module[:-3] if module[-3:].lower() == ".py" else module


def _matches(pattern: Any, text: str) -> bool:
    if pattern is None:
        return True
    if isinstance(pattern, str):  # CPython compares a plain string whole
        return pattern == text
    return bool(pattern.match(text))


def filter_action(category: type[Warning], message: str, module: str, lineno: int) -> str:
    """What the ``warnings`` filters do with ``message`` of ``category`` given from
    ``module`` at ``lineno``, decided as Python decides it: the first filter that matches,
    else the default action (``ignore``, ``error``, ``default``, ``always``...). The filters
    are read, never changed: they are the application's."""
    try:
        for action, text, kind, mod, line in warnings.filters:
            if (_matches(text, message) and issubclass(category, kind)
                    and _matches(mod, module) and (line == 0 or line == lineno)):
                return str(action)
        return str(getattr(warnings, "defaultaction", "default"))
    except Exception:
        return "error"  # not known: the warning is given, for Python to decide


def _of_warnings(fn: Any) -> bool:
    return getattr(fn, "__module__", None) == "warnings"


def python_writes_warnings() -> bool:
    """Whether a warning shown now is written by Python's own ``warnings`` code to
    ``sys.stderr``: neither the application (``warnings.showwarning`` replaced,
    ``logging.captureWarnings``) nor a test runner (``catch_warnings(record=True)``,
    pytest's capture and ``pytest.warns``) routes it elsewhere. A Python whose
    ``warnings`` has none of these names is taken to route it elsewhere."""
    try:
        return (warnings.showwarning is getattr(warnings, "_showwarning_orig")
                and _of_warnings(getattr(warnings, "_showwarnmsg"))
                and _of_warnings(getattr(warnings, "_showwarnmsg_impl")))
    except Exception:
        return False
