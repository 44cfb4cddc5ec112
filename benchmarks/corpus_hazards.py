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

    python benchmarks/corpus_hazards.py test-output/corpus/otel.json [more runs' otel.json]

Over the project's own training programs (``benchmarks/hazard_programs/``: flax linen and
nnx, equinox, optax and plain JAX; loops, schedules, evaluation splits, caches), each run
in its own process with otel_jax installed and read from its JSON log lines, it also
gives the recall: of the recompiles a program's ``EXPECT`` names (function, cause kind,
and the compile from which the pattern the docs promise a warning for has shown), how
many a warning of that kind preceded, at an earlier compile of the function. Each Python
warning must be located at the call line the compile recorded.

    python benchmarks/corpus_hazards.py --programs            # every program
    python benchmarks/corpus_hazards.py --programs --python .venv-latest/bin/python
    python benchmarks/corpus_hazards.py --programs --jobs 8   # 8 programs at a time

A program says the same warnings and hazards however late its compiles' telemetry is
made (each span 0.3 s to export: most records are then made after the program returned):

    python benchmarks/corpus_hazards.py --programs --late     # every program, twice
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from otel_jax._report._hazards import came_true

OUTSIDE_TESTS = "<outside tests>"


def _key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["qualname"], record.get("file"), record.get("line"))


def predicted(hazard: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether ``record`` (a later compile of the same function) is the recompile
    ``hazard`` named: the report's own rule (``otel-jax report`` marks a hazard as come
    true by it)."""
    return came_true(hazard, record)


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


#: The cause kinds a hazard can name before the recompile (docs/causes.md).
HAZARD_KINDS = ("weak_type", "static_argument", "function_identity", "shape")


def warned_recompiles(run: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per cause kind a hazard can name: the recompiles of that kind in the run, and how
    many a warning of the kind, said at an earlier compile of the same function, came
    before. Unlike ``recall`` this counts every such recompile, also those whose pattern
    had not shown (a test calling a function with a second shape on purpose): a floor."""
    records = [r for test in run["tests"].values() for r in test["records"]]
    warned_at: dict[tuple[Any, ...], dict[str, int]] = defaultdict(dict)
    counts = {kind: {"recompiles": 0, "warned": 0} for kind in HAZARD_KINDS}
    for record in records:  # in the run's order
        key, kind = _key(record), record.get("cause_kind")
        if kind in counts and record["count"] > 1:
            counts[kind]["recompiles"] += 1
            if kind in warned_at[key]:
                counts[kind]["warned"] += 1
        for hazard in record.get("hazards", ()):
            if hazard["level"] == "warning":
                warned_at[key].setdefault(hazard["kind"], record["count"])
    return counts


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


ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).with_name("hazard_programs")
#: What runs one program: otel_jax installed, its JSON log lines to a file, the program as
#: ``__main__``, then everything emitted before the process ends. With a third argument,
#: each compile's telemetry is made late, as behind a slow exporter or on a loaded
#: machine: every span takes that many seconds to export, on otel_jax's emitting thread,
#: so the compiles after the first are made once the program returned (at ``flush()``).
_RUNNER = """
import runpy, sys, time, otel_jax
provider = None
if len(sys.argv) > 3:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (SimpleSpanProcessor, SpanExporter,
                                                SpanExportResult)
    class SlowExporter(SpanExporter):
        def export(self, spans):
            time.sleep(float(sys.argv[3]))
            return SpanExportResult.SUCCESS
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SlowExporter()))
log = open(sys.argv[2], "w")
otel_jax.install(log_output=log, tracer_provider=provider)
runpy.run_path(sys.argv[1], run_name="__main__")
otel_jax.flush(None if provider is not None else 10.0)
otel_jax.uninstall()
"""
#: How long each span takes to export in a late run.
LATE_SPAN_S = 0.3
_WARNING = re.compile(r"^(?P<file>.+?):(?P<line>\d+): OtelJaxWarning: otel_jax: (?P<fn>\S+) "
                      r"will compile again \((?P<kind>\w+)\)")


def expected(program: Path) -> list[tuple[str, str, int]]:
    """A program's ``EXPECT``: (function, cause kind, first compile the pattern predicts)."""
    for node in ast.parse(program.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXPECT":
            return [(e[0], e[1], e[2] if len(e) > 2 else 2)
                    for e in ast.literal_eval(node.value)]
    return []


def run_program(program: Path, python: str = sys.executable,
                timeout: float = 300.0, late: bool = False) -> dict[str, Any]:
    """One program run with otel_jax: its compile records (with their hazards, as the
    corpus keeps them) and where each Python warning was located. ``late``: each
    compile's telemetry made late (each span ``LATE_SPAN_S`` to export)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "otel.jsonl"
        argv = [_RUNNER, str(program), str(log), *([str(LATE_SPAN_S)] if late else [])]
        # From this checkout's root: the otel_jax measured is the one beside this file.
        done = subprocess.run([python, "-c", *argv],
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, "JAX_PLATFORMS": "cpu",
                                   "OTEL_JAX_HAZARDS": "on"})
        lines = log.read_text().splitlines() if log.exists() else []
    records: list[dict[str, Any]] = []
    by_compile: dict[tuple[Any, ...], dict[str, Any]] = {}
    for text in lines:
        try:
            line = json.loads(text)
        except ValueError:
            continue
        key = (line.get("function"), line.get("file"), line.get("line"), line.get("count"))
        if line.get("event") == "jax.compile" and not line.get("eager_op"):
            record = {"qualname": line["function"], "file": line.get("file"),
                      "line": line.get("line"), "count": line["count"],
                      "callsite": line.get("callsite"), "cause_kind": line["cause_kind"],
                      "diff": line.get("diff", []), "hazards": []}
            records.append(record)
            by_compile[key] = record
        elif line.get("event") == "jax.compile.hazard" and key in by_compile:
            by_compile[key]["hazards"].append({
                "kind": line["hazard_kind"], "path": line.get("path", ""),
                "text": line.get("hazard", ""), "level": line["level"]})
    warned = [m.groupdict() for m in map(_WARNING.match, done.stderr.splitlines()) if m]
    return {"records": records, "warnings": warned, "returncode": done.returncode,
            "stderr": done.stderr[-4000:]}


def recall(runs: dict[str, dict[str, Any]],
           expect: dict[str, list[tuple[str, str, int]]]) -> dict[str, Any]:
    """Of the recompiles each program's ``EXPECT`` names, how many a warning of their kind
    preceded (said at an earlier compile of the same function); and the Python warnings
    not located at the call line their compile recorded."""
    due = warned = 0
    missed: list[str] = []
    mislocated: list[str] = []
    for name, run in runs.items():
        records = run["records"]
        for function, kind, first in expect.get(name, ()):
            for record in records:
                if record["qualname"] != function or record["cause_kind"] != kind \
                        or record["count"] < first:
                    continue
                due += 1
                if any(_key(r) == _key(record) and r["count"] < record["count"]
                       and any(h["kind"] == kind and h["level"] == "warning"
                               for h in r["hazards"]) for r in records):
                    warned += 1
                else:
                    missed.append(f"{name}: {function} #{record['count']} {kind}")
        sites = {(r["qualname"], r["callsite"]) for r in records
                 if any(h["level"] == "warning" for h in r["hazards"])}
        for w in run["warnings"]:
            if (w["fn"], f"{w['file']}:{w['line']}") not in sites:
                mislocated.append(f"{name}: {w['fn']} at {w['file']}:{w['line']}")
    return {"due": due, "warned": warned, "recall": round(warned / due, 3) if due else None,
            "missed": missed, "mislocated": mislocated}


def run_programs(python: str = sys.executable, only: list[str] | None = None,
                 jobs: int = 1) -> dict[str, Any]:
    """Every program (or those named), run, ``jobs`` at a time (each in its own process);
    the corpus form ``precision`` reads, with each program as a test, and the recall."""
    programs = sorted(p for p in PROGRAMS.glob("*.py") if not only or p.stem in only)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        runs = dict(zip((p.stem for p in programs),
                        pool.map(lambda p: run_program(p, python), programs)))
    failed = {k: v["stderr"] for k, v in runs.items() if v["returncode"]}
    corpus = {"tests": {k: {"records": v["records"]} for k, v in runs.items()}}
    return {"precision": precision(corpus),
            "recall": recall(runs, {p.stem: expected(p) for p in programs}),
            "failed": failed, "programs": len(programs)}


def said(run: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """What a program run said: its Python warnings (file, line, function, kind) and its
    hazards (function, compile, kind, level), each sorted."""
    return {"warnings": sorted((w["file"], int(w["line"]), w["fn"], w["kind"])
                               for w in run["warnings"]),
            "hazards": sorted((r["qualname"], r["count"], h["kind"], h["level"])
                              for r in run["records"] for h in r["hazards"])}


def compare_late(python: str = sys.executable, only: list[str] | None = None,
                 ) -> dict[str, dict[str, Any]]:
    """Each program run as it comes and with its telemetry made late: what each said, for
    the programs where the two differ (or either run failed)."""
    differ: dict[str, dict[str, Any]] = {}
    for program in sorted(p for p in PROGRAMS.glob("*.py") if not only or p.stem in only):
        now, late = run_program(program, python), run_program(program, python, late=True)
        if now["returncode"] or late["returncode"] or said(now) != said(late):
            differ[program.stem] = {"now": said(now), "late": said(late),
                                    "failed": [r["stderr"][-300:] for r in (now, late)
                                               if r["returncode"]]}
    return differ


def warning_precision(result: dict[str, Any]) -> tuple[int, int, float | None]:
    """Warnings said, followed, and their precision over every kind."""
    rows = [v for k, v in result["kinds"].items() if k.endswith("/warning")]
    said, followed = sum(r["said"] for r in rows), sum(r["followed"] for r in rows)
    return said, followed, round(followed / said, 3) if said else None


def render_programs(result: dict[str, Any]) -> str:
    said, followed, prec = warning_precision(result["precision"])
    rec = result["recall"]
    lines = [render(result["precision"], limit=200), "",
             f"programs {result['programs']}: warnings said {said}, followed {followed}: "
             f"precision {prec}; recompiles due a warning {rec['due']}, warned in time "
             f"{rec['warned']}: recall {rec['recall']}"]
    lines += [f"  missed: {m}" for m in rec["missed"]]
    lines += [f"  warning not at its call line: {m}" for m in rec["mislocated"]]
    lines += [f"  program failed: {k}: {v[-300:]}" for k, v in result["failed"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--programs":
        rest = args[1:]
        python = sys.executable
        if len(rest) >= 2 and rest[0] == "--python":
            python, rest = rest[1], rest[2:]
        jobs = 1
        if len(rest) >= 2 and rest[0] == "--jobs":
            jobs, rest = int(rest[1]), rest[2:]
        if rest and rest[0] == "--late":
            only = rest[1:] or None
            differ = compare_late(python, only)
            count = len(only) if only else len(list(PROGRAMS.glob("*.py")))
            for name, runs in differ.items():
                print(f"{name}: as it comes {runs['now']}\n  made late {runs['late']}"
                      + "".join(f"\n  failed: {f}" for f in runs["failed"]))
            print(f"programs {count}, each run as it comes and with every span "
                  f"{LATE_SPAN_S} s late: {count - len(differ)} said the same, "
                  f"{len(differ)} differ")
            return 1 if differ else 0
        print(render_programs(run_programs(python, rest or None, jobs)))
        return 0
    # One or more runs (a suite run in shards side by side): their tests, together.
    paths = [Path(a) for a in args] or [Path("test-output/corpus/otel.json")]
    tests: dict[str, Any] = {}
    for path in paths:
        for test, value in json.loads(path.read_text())["tests"].items():
            tests[test if test not in tests else f"{path}:{test}"] = value
    result = precision({"tests": tests})
    print(render(result, limit=200))
    for kind, row in warned_recompiles({"tests": tests}).items():
        print(f"  recompiles {kind:<18} {row['recompiles']:>5}, a warning of the kind "
              f"said before: {row['warned']:>4}")
    said, followed, prec = warning_precision(result)
    compiles = sum(len(t["records"]) for t in tests.values())
    print(f"runs {len(paths)}, tests {len(tests)}, compiles {compiles}: warnings said "
          f"{said}, followed {followed}: precision {prec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
