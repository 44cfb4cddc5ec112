"""Hints checked against what happened (a part of the differential corpus check).

Every hint otel_jax writes is a claim a user will act on. Two of them can be caught out by
what the same test does next, and are checked here:

- "later calls with the same type and an equal value hit the cache" (a static argument's
  new value): false when the same function later compiles again for that argument alone
  while its value is ``==`` to one of the same type it compiled with before in the same
  test (of another type, ``==`` is no claim: ``jnp.bfloat16``, ``x.dtype`` and
  ``"bfloat16"`` are equal and keyed apart; a hint without "the same type" is held to
  all). The record that says it is listed, with the compile that shows otherwise.
- "never hits the cache" / "every new instance compiles again" (a static value not equal
  to itself, or compared by identity): false when the value it is said of is ``==`` to
  itself and its type compares by value (an equal new instance hits).

What the check needs is read while the values live, as each record is delivered
(:class:`Recorder`, loaded by ``corpus_plugin``): for each static argument, the earlier
compiles of the same function whose value of it is ``==`` to this one, and whether the
value is compared by value. :func:`check` then reads the per-test records only.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from otel_jax.testing import CompileRecorder

EQUAL_HITS = "equal value hit the cache"
#: The claim narrowed to values of one type (2.0 after 2 is == yet compiles again).
SAME_TYPE = "the same type and an"
NEVER_HITS = ("never hits the cache", "every new instance compiles again")
_KEPT_PER_FUNCTION = 64  # static values remembered per function (held weakly)
_MAX_FUNCTIONS = 4096


def _equal(a: Any, b: Any) -> bool:
    try:
        result = a == b
    except Exception:
        return False
    return result if type(result) is bool else False


def _compares_by_value(value: Any) -> bool:
    return type(value).__eq__ is not object.__eq__ and _equal(value, value)


class Recorder(CompileRecorder):
    """A compile recorder that also notes, while the values live, which static values of a
    record are ``==`` to those of earlier compiles of the same function."""

    def __init__(self, *, include_eager: bool = False) -> None:
        super().__init__(include_eager=include_eager)
        self._values: dict[Any, deque[tuple[int, str, Any]]] = {}
        self.facts: dict[int, dict[str, Any]] = {}  # by id(record): kept records only

    def compile(self, record: Any, link: Any) -> None:
        try:
            facts = self._read(record)
        except Exception:  # never fails the run: the facts are left out
            facts = None
        super().compile(record, link)
        if facts is not None:
            with self._lock:
                self.facts[id(record)] = facts

    def _read(self, record: Any) -> dict[str, Any] | None:
        if record.eager_op:
            return None
        from otel_jax._capture._signature import StaticKind

        statics = [s for s in record.signature.statics
                   if s.kind is StaticKind.STATIC_ARGUMENT and s.value is not None]
        if len(self._values) >= _MAX_FUNCTIONS and record.function.key not in self._values:
            self._values.clear()
        seen = self._values.setdefault(record.function.key, deque(maxlen=_KEPT_PER_FUNCTION))
        equal: list[list[Any]] = []
        by_value: list[str] = []
        for s in statics:
            value = s.value.get()
            if value is None:
                continue
            if _compares_by_value(value):
                by_value.append(s.name)
            for count, name, held in seen:
                before = held.get() if name == s.name else None
                if before is not None and _equal(before, value):
                    equal.append([s.name, count, type(before) is type(value)])
        seen.extend((record.count, s.name, s.value) for s in statics)
        return {"equal_to_earlier": equal, "compared_by_value": by_value}


def record_facts(recorder: Any, record: Any) -> dict[str, Any]:
    """What the check reads of one record besides what the corpus keeps of it."""
    facts = getattr(recorder, "facts", {}).pop(id(record), None) or {}
    return {"hint": record.hint, "equal_to_earlier": facts.get("equal_to_earlier", []),
            "compared_by_value": facts.get("compared_by_value", [])}


def _about(path: str, name: str) -> bool:
    return path == name or path.startswith((name + ".", name + "["))


def _only_about(record: dict[str, Any], name: str) -> bool:
    """Whether the record compiled for argument ``name`` alone (every change is of it)."""
    diff = record.get("diff") or []
    return bool(diff) and record.get("diff_total", len(diff)) <= len(diff) and all(
        _about(c["path"], name) for c in diff)


def check(tests: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every hint a later compile of the same test contradicts (``hints_contradicted``)."""
    found: list[dict[str, Any]] = []
    for test_id, test in tests.items():
        by_function: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in test.get("records", []):
            if not r.get("eager_op"):
                by_function.setdefault((r["qualname"], r.get("file"), r.get("line")),
                                       []).append(r)
        for records in by_function.values():
            found += _contradicted(test_id, records)
    return {"hints_contradicted": found}


def _contradicted(test_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    counts = {r["count"] for r in records}
    for said in records:
        hint = said.get("hint", "")
        if EQUAL_HITS in hint:
            typed = SAME_TYPE in hint
            for later in records:
                if later["count"] < said["count"]:
                    continue
                missed = [(name, count) for name, count, *same in later.get(
                              "equal_to_earlier", [])
                          if count in counts and count < later["count"]
                          and _only_about(later, name) and not (typed and same == [False])]
                if missed:
                    name, count = missed[0]
                    out.append(_entry(test_id, said, EQUAL_HITS, later,
                                      f"{name} == its value at compile #{count}, yet "
                                      f"compile #{later['count']} was made for it"))
                    break
        if any(claim in hint for claim in NEVER_HITS):
            top = (said.get("diff") or [{}])[0].get("path", "")
            named = [n for n in said.get("compared_by_value", []) if _about(top, n)]
            if named:
                out.append(_entry(test_id, said, "never hits the cache", said,
                                  f"{named[0]} equals itself and is compared by value: an "
                                  "equal value hits"))
    return out


def _entry(test_id: str, said: dict[str, Any], claim: str, shown: dict[str, Any],
           why: str) -> dict[str, Any]:
    return {"test": test_id, "function": said["qualname"], "count": said["count"],
            "claim": claim, "cause": said.get("cause", ""), "by": shown["count"], "why": why}


def format_entry(d: dict[str, Any]) -> str:
    return (f"{d['test']}: {d['function']} #{d['count']} says \"{d['claim']}\" "
            f"({d['cause']}); #{d['by']}: {d['why']}")


#: The section ``corpus.render`` prints.
SECTION_TITLE = "hints contradicted by what happened later in the same test"
