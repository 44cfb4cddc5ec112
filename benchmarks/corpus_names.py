"""The differential corpus check's test of names: one function, one name.

otel_jax files each compile under a function (qualified name, file, line) and compares it
with an earlier compile of that function. JAX's own name for a compile (the ``fun_name``
of its backend-compile event, ``jit(f)``) is a second opinion: a record compared with an
earlier compile that JAX names differently was compared with another function's compile
(a false comparison), and one otel_jax function whose compiles JAX names differently is a
name shared by several functions (their counts run on across them, a storm is counted
over all of them).

A test's compiles are paired with its records in order, only when the counts agree (as
``corpus.compare`` does); the earlier compile a record is compared with may come from an
earlier test. JAX's own eager ops are left out: JAX names each after its primitive. So is
JAX's placeholder for a callable it cannot name (``jit(<unnamed function>)``, a callable
object's compile): it names no function, so it is no second opinion on which one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from otel_jax._capture._jax._names import PLACEHOLDER_NAMES, function_name_from_event

#: (qualified name, file, line): what otel_jax files a compile under
Function = tuple[Any, Any, Any]


def function_of(record: dict[str, Any]) -> Function:
    return (record["qualname"], record.get("file"), record.get("line"))


def check(tests: dict[str, dict[str, Any]], order: list[str]) -> dict[str, Any]:
    """False comparisons and shared names in an otel run's ``tests``, read in ``order``."""
    jax_name: dict[tuple[Function, int], str] = {}
    names: dict[Function, dict[str, str]] = defaultdict(dict)  # JAX name -> first test
    false: list[dict[str, Any]] = []
    paired = 0
    for test_id in order:
        test = tests.get(test_id)
        if not test:
            continue
        compiles = [e for e in test["events"] if e["type"] == "compile"]
        records = test["records"]
        if len(compiles) != len(records):
            continue
        for event, record in zip(compiles, records):
            if record.get("eager_op"):
                continue
            paired += 1
            function = function_of(record)
            name = str(event["fun_name"])
            if function_name_from_event(name) in PLACEHOLDER_NAMES:
                continue
            names[function].setdefault(name, test_id)
            jax_name[(function, record["count"])] = name
            earlier = record.get("compared_with")
            before = jax_name.get((function, earlier)) if earlier else None
            if before is not None and before != name:
                false.append({"test": test_id, "function": record["qualname"],
                              "count": record["count"], "compared_with": earlier,
                              "jax": name, "jax_before": before,
                              "kind": record["cause_kind"], "cause": record["cause"]})
    shared = [{"function": f[0], "file": f[1], "line": f[2], "jax_names": sorted(by_name),
               "tests": sorted(set(by_name.values()))[:4]}
              for f, by_name in names.items() if len(by_name) > 1]
    return {"false_comparisons": false, "shared_names": shared, "paired": paired}


def sections(result: dict[str, Any]) -> list[tuple[str, list[Any], Any]]:
    """The report's sections: (title, items, how one item reads)."""
    names = result.get("names") or {"false_comparisons": [], "shared_names": []}
    return [
        ("records compared with a compile JAX names after another function",
         names["false_comparisons"],
         lambda d: f"{d['test']}: {d['function']} #{d['count']} vs #{d['compared_with']}: "
                   f"JAX {d['jax']} vs {d['jax_before']}  ({d['kind']}: {d['cause']})"),
        ("functions whose compiles JAX names differently", names["shared_names"],
         lambda d: f"{d['function']} ({d['file']}:{d['line']}): {', '.join(d['jax_names'])}"
                   f"  in {', '.join(d['tests'])}"),
    ]


def problems(result: dict[str, Any]) -> int:
    names = result.get("names") or {}
    return len(names.get("false_comparisons", ())) + len(names.get("shared_names", ()))
