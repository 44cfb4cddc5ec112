"""How precise otel_jax's hazards are over the differential corpus (``corpus.py``).

A hazard names a recompile before it happens. Over one run of a peer library's suite with
otel_jax installed (the records ``corpus_plugin.py`` keeps, each with its hazards), each
hazard is *followed* when a later compile of the same function (qualified name, file,
line) in the run has the cause it predicted:

- ``weak_type``: a ``weak_type`` change at the hazard's path;
- ``static_argument``: a ``static_argument`` cause whose diff names the argument;
- ``function_identity``: a ``function_identity`` cause;
- ``shape``: a ``shape`` change at the hazard's path.

For each kind and level (``warning``, ``info`` for a note): how many were said, how many
were followed (and how many of those in the same test), and the precision. A kind said as
a warning should be followed nearly always; one that is not is to be a note.

    python benchmarks/corpus_hazards.py test-output/corpus/otel.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

OUTSIDE_TESTS = "<outside tests>"


def _key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["qualname"], record.get("file"), record.get("line"))


def _names(hazard: dict[str, Any], change: dict[str, Any]) -> bool:
    path, changed = hazard["path"], change.get("path", "")
    return bool(path) and (changed == path or changed.startswith((path + "[", path + ".")))


def predicted(hazard: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether ``record`` (a later compile of the same function) is the recompile
    ``hazard`` named."""
    kind = hazard["kind"]
    if record["cause_kind"] != kind:
        return False
    if kind == "function_identity":
        return True
    return any(change.get("kind") == kind and _names(hazard, change)
               for change in record.get("diff", ()))


def precision(run: dict[str, Any]) -> dict[str, Any]:
    """Per ``kind/level``: said, followed, followed in the same test, precision; and the
    hazards not followed (for reading)."""
    tests = run["tests"]
    order = [OUTSIDE_TESTS, *(t for t in tests if t != OUTSIDE_TESTS)]
    flat = [(t, r) for t in order if t in tests for r in tests[t]["records"]]
    later: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, (_, record) in enumerate(flat):
        later[_key(record)].append(i)
    counts: dict[str, dict[str, int]] = defaultdict(
        lambda: {"said": 0, "followed": 0, "same_test": 0})
    unfollowed: list[dict[str, Any]] = []
    for i, (test, record) in enumerate(flat):
        for hazard in record.get("hazards", ()):
            row = counts[f"{hazard['kind']}/{hazard['level']}"]
            row["said"] += 1
            hit = next((j for j in later[_key(record)]
                        if j > i and predicted(hazard, flat[j][1])), None)
            if hit is None:
                unfollowed.append({"test": test, "function": record["qualname"],
                                   "count": record["count"], **hazard})
                continue
            row["followed"] += 1
            if flat[hit][0] == test:
                row["same_test"] += 1
    table = {k: {**v, "precision": round(v["followed"] / v["said"], 3) if v["said"] else None}
             for k, v in sorted(counts.items())}
    return {"kinds": table, "unfollowed": unfollowed}


def render(result: dict[str, Any], limit: int = 20) -> str:
    lines = ["hazards (said at a compile; followed: a later compile of the function had "
             "the predicted cause)"]
    if not result["kinds"]:
        lines.append("  none said")
    for kind, row in result["kinds"].items():
        lines.append(f"  {kind:<28} said {row['said']:>4}  followed {row['followed']:>4} "
                     f"(same test {row['same_test']:>4})  precision {row['precision']}")
    unfollowed = result["unfollowed"]
    if unfollowed:
        lines.append(f"  not followed ({len(unfollowed)}; first {min(limit, len(unfollowed))}):")
        for h in unfollowed[:limit]:
            lines.append(f"    {h['test']}: {h['function']} #{h['count']} {h['kind']} "
                         f"[{h['level']}] {h['path']!r}: {h['text'][:160]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "test-output/corpus/otel.json")
    result = precision(json.loads(path.read_text()))
    print(render(result, limit=200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
