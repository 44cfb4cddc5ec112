"""The hazards a log said, per function, and whether each came true.

A hazard (a ``jax.compile.hazard`` line, said at one compile of a function) names a
recompile before it happens. It *came true* when a later compile of the same function
(in the log's order, of the same process) has the cause it predicted: the cause kind it
named and, but for a new function object (``function_identity``, whose change is the
function itself), a change of that kind at the argument path it named (``lr``, or below
it: ``state['lr']``, ``lr.value``). :func:`came_true` is that rule, the one the hazard
benchmark (``benchmarks/corpus_hazards.py``) judges precision by. One not followed yet is
*not (yet)*: the program may not have run long enough.

Bounded like the rest of the report: at most :data:`MAX_PER_FUNCTION` hazards kept per
function (the rest counted), and the functions the report keeps rows for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._core._vocab import EVENT_HAZARD, CauseKind, DiffKey, Field
from ._read import _is_rank, _text, event_marker

MAX_PER_FUNCTION = 16
_MAX_FUNCTIONS = 10_000
_MAX_TEXT = 400
_MAX_NAME = 200
_MAX_FILE = 400

HAZARD_MARKER = event_marker(EVENT_HAZARD)

#: (function, file, line): the row a hazard belongs to
FunctionKey = tuple[str, Any, Any]


def _names(path: str, changed: str) -> bool:
    return bool(path) and (changed == path or changed.startswith((path + "[", path + ".")))


def came_true(hazard: Mapping[str, Any], compile_: Mapping[str, Any]) -> bool:
    """Whether ``compile_`` (a later compile of the hazard's function: its ``cause_kind``
    and ``diff``, as a log line or a record's dict has them) is the recompile ``hazard``
    (its ``kind`` and ``path``) named."""
    kind = hazard.get("kind")
    if not kind or compile_.get(Field.CAUSE_KIND) != kind:
        return False
    if kind == CauseKind.FUNCTION_IDENTITY.value:
        return True
    path = hazard.get("path")
    diff = compile_.get(Field.DIFF)
    if not isinstance(path, str) or not isinstance(diff, list):
        return False
    return any(isinstance(change, dict) and change.get(DiffKey.KIND) == kind
               and isinstance(change.get(DiffKey.PATH), str)
               and _names(path, change[DiffKey.PATH]) for change in diff)


def function_key(ev: Mapping[str, Any]) -> FunctionKey | None:
    """The row a compile or hazard line belongs to, as the report keys its rows."""
    function = ev.get(Field.FUNCTION)
    if type(function) is not str or not function:
        return None
    file = ev.get(Field.FILE)
    line = ev.get(Field.LINE)
    return (_text(function, _MAX_NAME) or function,
            _text(file, _MAX_FILE) if file is not None else None,
            line if type(line) is int else None)


class Hazards:
    """The hazards of a log per function, each marked when a later compile made it true."""

    def __init__(self, functions: Iterable[str] | None = None) -> None:
        self.functions = frozenset(functions) if functions else None
        self._said: dict[FunctionKey, list[dict[str, Any]]] = {}
        self._more: dict[FunctionKey, int] = {}  # hazards past MAX_PER_FUNCTION
        self._pending = 0  # hazards not come true yet: compiles are checked only then

    def said(self, ev: Mapping[str, Any]) -> bool:
        """Take one ``jax.compile.hazard`` line; whether it was one."""
        if ev.get(Field.EVENT) != EVENT_HAZARD:
            return False
        key = function_key(ev)
        kind = _text(ev.get(Field.HAZARD_KIND), _MAX_NAME)
        if key is None or kind is None:
            return False
        if self.functions is not None and key[0] not in self.functions:
            return True
        kept = self._said.get(key)
        if kept is None:
            if len(self._said) >= _MAX_FUNCTIONS:
                return True
            kept = self._said[key] = []
        if len(kept) >= MAX_PER_FUNCTION:
            self._more[key] = self._more.get(key, 0) + 1
            return True
        count = ev.get(Field.COUNT)
        rank = ev.get(Field.PROCESS_INDEX)
        path = ev.get(Field.PATH)
        kept.append({
            "kind": kind,
            # a path is the argument's text; anything else names none
            "path": (_text(path, _MAX_NAME) or "") if isinstance(path, str) else "",
            # as the line has it: ``warning``, or ``info`` for a note
            "level": "warning" if ev.get(Field.LEVEL) == "warning" else "info",
            "count": count if type(count) is int else None,
            "callsite": _text(ev.get(Field.CALLSITE), _MAX_FILE),
            "hazard": _text(ev.get(Field.HAZARD), _MAX_TEXT) or "",
            "hint": _text(ev.get(Field.HINT), _MAX_TEXT),
            "came_true_at": None,
            "_rank": rank if _is_rank(rank) else None,
        })
        self._pending += 1
        return True

    def compiled(self, ev: Mapping[str, Any]) -> None:
        """Take one ``jax.compile`` line: the hazards of its function said before it (at an
        earlier compile, of the same process) that it makes true are marked."""
        if not self._pending:
            return
        key = function_key(ev)
        kept = self._said.get(key) if key is not None else None
        if not kept:
            return
        count = ev.get(Field.COUNT)
        rank = ev.get(Field.PROCESS_INDEX)
        rank = rank if _is_rank(rank) else None
        for hazard in kept:
            said_by = hazard["_rank"]
            # a hazard line may not say its process (a one-process log): any then
            if hazard["came_true_at"] is not None or (
                    said_by is not None and rank is not None and said_by != rank):
                continue
            said_at = hazard["count"]
            if type(count) is int and said_at is not None and count <= said_at:
                continue
            if came_true(hazard, ev):
                hazard["came_true_at"] = count if type(count) is int else 0
                self._pending -= 1

    def of(self, key: FunctionKey) -> dict[str, Any] | None:
        """The hazards said of one function (``None``: none): each one with the compile it
        was said at and the one that made it true (``came_true_at``, ``None``: not yet)."""
        kept = self._said.get(key)
        if not kept:
            return None
        listed = [{k: v for k, v in h.items() if not k.startswith("_")} for h in kept]
        true = sum(h["came_true_at"] is not None for h in kept)
        return {"said": len(kept) + self._more.get(key, 0), "came_true": true,
                "not_yet": len(kept) - true, "more": self._more.get(key, 0),
                "list": listed}

    def total(self) -> dict[str, int]:
        """Hazards said in the log, come true, and not (yet)."""
        said = sum(len(v) for v in self._said.values())
        true = sum(h["came_true_at"] is not None for v in self._said.values() for h in v)
        return {"said": said + sum(self._more.values()), "came_true": true,
                "not_yet": said - true}
