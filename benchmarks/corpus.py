"""Differential check over a peer library's own test suite: plain JAX vs otel_jax installed.

Runs the tests a library ships in its wheel (optax's, chex's) twice with pytest, in
subprocesses of one interpreter: once plain, once with ``otel_jax.install()``; both with
``jax_explain_cache_misses`` on and a ``jax.monitoring`` backend-compile listener of the
harness's own (``benchmarks/corpus_plugin.py``). Then prints:

- the passed/failed/skipped counts of both runs, and every test whose outcome differs;
- backend compiles counted by the listener vs otel_jax's records, per test (and the
  listener's compiles of the two runs, per test and function: those of JAX's own eager
  operations are listed apart, as garbage collection decides when JAX compiles them again);
- every recompile where otel_jax's cause is vaguer than JAX's explanation of the same
  compile (definition below), and every ``unknown`` cause, with its test id;
- the wall-time ratio of the two runs.

Exit status 1 when any outcome differs, a count differs or a cause is vaguer; 0 otherwise.

Vaguer, mechanically. JAX's explanation of a compile is the last non-nested "TRACING CACHE
MISS" it logged for the same function name before the backend compile (nested traces, of
a function traced inside another jit, are never compiled on their own). "never seen
function" and "cache miss explanation unavailable" explain nothing, unless JAX adds that it
saw another function defined on the same line (a re-created function: the identity
category). Otherwise JAX's explanation has a category (tracing context, input pytree, debug
info, input types) and
names items: a config name, an input path (``[0][1]['w']``, with the key set of a dict whose
keys changed), or an argument name with its new type (``p['w']`` now ``i32[2]``). otel_jax's
cause is vaguer when

- its kind is ``unknown`` while JAX explains; or
- its kind falls in JAX's category and an item JAX names is missing from its diff: a config
  name not among its paths; an argument name not among its paths, or that path's ``after``
  without JAX's new type; an input path whose part below the argument (``['w']``) no
  path ends with, or whose changed dict keys no path names.

A record is wrong when it says ``first_compile`` for a function (qualified name, file,
line) it recorded before. A first compile JAX explains (against a trace made inside another
jit, never compiled on its own) is listed, not counted.

When otel_jax's kind falls in another category, the two compared against different earlier
calls (JAX prefers a key whose pytree differs over one whose types differ): listed as a
different view, not counted as vaguer.

Usage::

    python benchmarks/corpus.py                      # the subset (a few minutes)
    python benchmarks/corpus.py --all --python .venv-corpus/bin/python

Suites that their wheels do not ship run from their source trees (``--files DIR``):
equinox's ``tests/`` at its release tag, flax's ``tests/nnx`` from its sdist
(``pip download --no-binary :all: --no-deps flax==VERSION``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

try:  # run as a script (its folder first on sys.path) or imported as benchmarks.corpus
    import corpus_hazards
    import corpus_hints
    import corpus_names
except ImportError:
    from benchmarks import corpus_hazards, corpus_hints, corpus_names

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = ROOT / "test-output" / "corpus"
MODES = ("plain", "otel")
OUTSIDE_TESTS = "<outside tests>"

#: Test files of optax (relative to its package) that together run in one to two minutes per
#: run on a busy 2-core machine, with no dependency beyond optax's own: updates, injected
#: hyperparameters, conditional and noisy transformations, tree math, losses.
SUBSET = (
    "optax:_src/update_test.py",
    "optax:schedules/_inject_test.py",
    "optax:transforms/_conditionality_test.py",
    "optax:transforms/_adding_test.py",
    "optax:tree_utils/_tree_math_test.py",
    "optax:losses/_regression_test.py",
)
DEFAULT_PACKAGES = ("optax", "chex")

EXPLAIN_NONE = ("never_seen", "unavailable")
CATEGORY_OF_KIND = {
    "tracing_context": "context",
    "pytree_structure": "pytree",
    "static_argument": "pytree",
    "function_identity": "identity",
    "dtype": "types",
    "shape": "types",
    "weak_type": "types",
    "sharding": "types",
    "jit_options": "options",
    "device_placement": "placement",
}


# --- running ---------------------------------------------------------------------------

def package_dir(python: str, package: str) -> Path | None:
    code = f"import os, {package}; print(os.path.dirname({package}.__file__))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    return Path(done.stdout.strip().splitlines()[-1])


def find_tests(python: str, selectors: list[str], everything: bool,
               packages: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    if everything:
        for package in packages:
            where = package_dir(python, package)
            if where is None:
                print(f"corpus: {package} is not installed in {python}: left out")
                continue
            files += sorted(where.rglob("*_test.py"))
        return files
    for selector in selectors:
        path = Path(selector)
        if path.is_dir():  # a suite from a source tree (equinox's, flax's tests/nnx)
            files += sorted({*path.rglob("*_test.py"), *path.rglob("test_*.py")})
            continue
        if path.is_file():
            files.append(path.resolve())
            continue
        package, _, rel = selector.partition(":")
        where = package_dir(python, package)
        if where is None:
            raise SystemExit(f"corpus: {package} is not installed in {python}")
        files.append(where / rel)
    return [f.resolve() for f in files]


def run_suite(python: str, mode: str, files: list[Path], out: Path, timeout: float,
              extra: list[str]) -> dict[str, Any]:
    result = out / f"{mode}.json"
    if result.exists():
        result.unlink()
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OTEL_JAX_CORPUS_MODE"] = mode
    env["OTEL_JAX_CORPUS_OUT"] = str(result)
    env.setdefault("JAX_PLATFORMS", "cpu")
    # test ids relative to site-packages: optax/_src/alias_test.py::AliasTest::test_x
    rootdir = Path(os.path.commonpath([str(f.parent) for f in files]))
    while (rootdir / "__init__.py").exists():
        rootdir = rootdir.parent
    cmd = [python, "-m", "pytest", "-q", "-p", "corpus_plugin", "-p", "no:cacheprovider",
           "-c", str(ini), "--rootdir", str(rootdir), *extra, *map(str, files)]
    started = time.perf_counter()
    log = out / f"{mode}.log"
    with open(log, "w", encoding="utf-8") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                cwd=str(out), timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    wall = time.perf_counter() - started
    if not result.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"corpus: the {mode} run wrote no result (exit {rc}):\n{tail}")
    data: dict[str, Any] = json.loads(result.read_text())
    data["process_wall_s"] = wall
    data["exit"] = rc
    result.write_text(json.dumps(data))
    return data


# --- JAX's explanations -----------------------------------------------------------------

@dataclasses.dataclass
class Explanation:
    func_name: str
    category: str  # never_seen, unavailable, context, pytree, debug, types, other
    items: list[dict[str, str]]
    text: str


_FOR = re.compile(r"^\s*for (.+?)(?: defined at .*)?$", re.M)
_NEVER = re.compile(r"never seen function:\s*\n\s*(.+?) id=", re.M)
_TYPE = re.compile(r"^\s*\* at (.+?), now (.+?) and before (.+)$", re.M)
_TREE = re.compile(r"^\s*\* at input path (.*?), now (.+?) and before (.+?), so (.*)$", re.M)
_CONTEXT = re.compile(r"^\s*\* (\S+) differs: now (.*) and before (.*)$", re.M)
_KEYSET = re.compile(r"symmetric difference of key sets: \{(.*)\}")


def parse_explanation(text: str) -> Explanation:
    never = _NEVER.search(text)
    if never:
        # "but seen another function defined on the same line": a re-created function
        again = "seen another function defined on the same line" in text
        return Explanation(never.group(1).strip(), "identity" if again else "never_seen", [],
                           text)
    name_match = _FOR.search(text)
    name = name_match.group(1).strip() if name_match else ""
    if "cache miss explanation unavailable" in text:
        return Explanation(name, "unavailable", [], text)
    if "Tracing context doesn't match" in text:
        items = [{"name": m.group(1), "now": m.group(2)} for m in _CONTEXT.finditer(text)]
        return Explanation(name, "context", items, text)
    if "different input pytree" in text:
        items = []
        for m in _TREE.finditer(text):
            keys = _KEYSET.search(m.group(4))
            items.append({"path": m.group(1), "now": m.group(2),
                          "keys": keys.group(1) if keys else ""})
        return Explanation(name, "pytree", items, text)
    if "Debug info doesn't match" in text:
        return Explanation(name, "debug", [], text)
    if "different input types" in text:
        items = [{"name": m.group(1), "now": m.group(2)} for m in _TYPE.finditer(text)]
        return Explanation(name, "types", items, text)
    return Explanation(name, "other", [], text)


def short_name(name: str) -> str:
    """``jit(f)`` and ``Outer.<locals>.f`` alike to ``f``."""
    if name.startswith("jit(") and name.endswith(")"):
        name = name[4:-1]
    return name.rsplit(".", 1)[-1]


def explanations_of_compiles(events: list[dict[str, Any]]) -> list[Explanation | None]:
    """JAX's explanation of each backend compile of a test, in order (None: none logged)."""
    pending: list[Explanation] = []
    out: list[Explanation | None] = []
    for event in events:
        if event["type"] == "explain":
            if not event.get("nested"):
                pending.append(parse_explanation(event["text"]))
            continue
        name = short_name(event["fun_name"])
        found = None
        for i in range(len(pending) - 1, -1, -1):
            if short_name(pending[i].func_name) == name:
                found = pending[i]
                # older traces of the same function were never compiled
                pending = [p for j, p in enumerate(pending)
                           if j > i or short_name(p.func_name) != name]
                break
        out.append(found)
    return out


# --- comparing ----------------------------------------------------------------------------

def _norm(path: str) -> str:
    return path.replace('"', "'").replace(" ", "")


_FIRST_KEY = re.compile(r"^\[(\d+|'[^']*')\]")


def _below_argument(path: str) -> tuple[str, str]:
    """JAX's input path ``[0][1]['w']`` (args, then index) as (argument, the part below)."""
    path = _norm(path)
    top = _FIRST_KEY.match(path)
    if top is None:
        return "", path
    rest = path[top.end():]
    arg = _FIRST_KEY.match(rest)
    if arg is None:
        return "", ""
    name = arg.group(1).strip("'")
    return (name if top.group(1) == "1" else ""), rest[arg.end():]


def _core_type(text: str) -> str:
    """``f32[3]{weak_type=True}`` or ``f32[3] (weak)`` as ``f32[3]``."""
    match = re.match(r"\s*([a-z]+\d*\[[^\]]*\])", text)
    return match.group(1) if match else text.strip()


def key_names(text: str) -> list[str]:
    """The keys of JAX's key set as it prints it: ``'a', 'b'`` or, on the JAX versions that
    join them with spaces, ``'a' 'b'``; unquoted keys (integers) split on both."""
    quoted = re.findall(r"'([^']*)'|\"([^\"]*)\"", text)
    if quoted:
        return [single or double for single, double in quoted]
    return [k for k in re.split(r"[,\s]+", text) if k]


def missing_items(explanation: Explanation, record: dict[str, Any]) -> list[str]:
    """What JAX's explanation names that the record's diff does not (empty: none)."""
    changes = record["diff"]
    paths = {_norm(c["path"]): c for c in changes}
    missing = []
    for item in explanation.items:
        if explanation.category == "context":
            if item["name"] not in paths:
                missing.append(f"config {item['name']}")
        elif explanation.category == "types":
            change = paths.get(_norm(item["name"]))
            now = _core_type(item["now"])
            if change is None:
                missing.append(f"argument {item['name']}")
            elif now not in change["after"]:
                missing.append(f"{item['name']} now {now} (otel_jax: {change['after']})")
        elif explanation.category == "pytree":
            arg, rest = _below_argument(item["path"])
            keys = key_names(item["keys"])
            if rest and not any(p.endswith(rest) for p in paths):
                missing.append(f"input path {item['path']}")
            elif arg and not any(p.startswith(arg) for p in paths):
                missing.append(f"keyword argument {arg}")
            for key in keys:
                if not any(f"['{key}']" in p or p == key or p.startswith(key + "[")
                           or p.startswith(key + ".") or p.endswith("." + key)
                           for p in paths):
                    missing.append(f"key {key!r} at input path {item['path']}")
    return missing


def compare(plain: dict[str, Any] | None, otel: dict[str, Any]) -> dict[str, Any]:
    """The two runs compared; without a plain run, otel_jax's records against the
    listener and JAX's explanations of the same run only."""
    with_plain = plain is not None
    if plain is None:
        plain = {"tests": {}, "wall_s": float("nan")}
    tests_plain, tests_otel = plain["tests"], otel["tests"]
    ids = [t for t in tests_plain if t != OUTSIDE_TESTS]
    ids += [t for t in tests_otel if t != OUTSIDE_TESTS and t not in tests_plain]
    outcomes = {m: Counter(d["tests"][t]["outcome"] for t in d["tests"] if t != OUTSIDE_TESTS)
                for m, d in (("plain", plain), ("otel", otel))}
    outcome_diffs, count_diffs, listener_diffs, eager_diffs = [], [], [], []
    # JAX keeps an eager primitive's executable only while objects it keys weakly live: when
    # a garbage collection falls differs between runs, and so do those compiles (plain runs
    # differ from each other there too). They are told apart by otel_jax's records.
    eager_names = {short_name(r["qualname"]) for t in tests_otel.values()
                   for r in t["records"] if r["eager_op"]}
    vaguer, views, unknowns, misnamed, only_otel = [], [], [], [], []
    wrong_first, first_explained = [], []
    seen_functions: set[tuple[Any, ...]] = set()
    explained = compiles = records_total = 0
    for test_id in [OUTSIDE_TESTS, *ids]:  # collection's compiles came first
        p = tests_plain.get(test_id)
        o = tests_otel.get(test_id)
        if test_id != OUTSIDE_TESTS:
            po = p["outcome"] if p else "absent"
            oo = o["outcome"] if o else "absent"
            if with_plain and po != oo:
                outcome_diffs.append({"test": test_id, "plain": po, "otel": oo,
                                      "error": (o or p or {}).get("error", "")})
        p_events = p["events"] if p else []
        o_events = o["events"] if o else []
        p_names = Counter(short_name(e["fun_name"]) for e in p_events if e["type"] == "compile")
        o_compiles = [e for e in o_events if e["type"] == "compile"]
        records = o["records"] if o else []
        compiles += len(o_compiles)
        records_total += len(records)
        o_names = Counter(short_name(e["fun_name"]) for e in o_compiles)
        if with_plain and p_names != o_names:
            changed = {n for n in p_names.keys() | o_names.keys() if p_names[n] != o_names[n]}
            entry = {"test": test_id, "plain": sum(p_names.values()),
                     "otel": sum(o_names.values()),
                     "functions": {n: [p_names[n], o_names[n]] for n in sorted(changed)}}
            (eager_diffs if changed <= eager_names else listener_diffs).append(entry)
        if len(records) != len(o_compiles):
            count_diffs.append({"test": test_id, "listener": len(o_compiles),
                                "records": len(records),
                                "listener_names": Counter(short_name(e["fun_name"])
                                                          for e in o_compiles),
                                "record_names": Counter(short_name(r["qualname"])
                                                        for r in records)})
        for record in records:
            key = (record["qualname"], record.get("file"), record.get("line"))
            if record["cause_kind"] == "first_compile" and key in seen_functions:
                wrong_first.append({"test": test_id, "function": record["qualname"],
                                    "count": record["count"], "cause": record["cause"]})
            seen_functions.add(key)
            if record["cause_kind"] == "unknown":
                unknowns.append({"test": test_id, "function": record["qualname"],
                                 "count": record["count"], "cause": record["cause"]})
        if len(records) != len(o_compiles):
            continue  # pairing by order would be meaningless
        for event, record, explanation in zip(o_compiles, records,
                                              explanations_of_compiles(o_events)):
            if short_name(event["fun_name"]) != short_name(record["qualname"]):
                misnamed.append({"test": test_id, "listener": event["fun_name"],
                                 "record": record["qualname"]})
                continue
            if explanation is None or record["eager_op"]:
                continue
            entry = {"test": test_id, "function": record["qualname"],
                     "count": record["count"], "kind": record["cause_kind"],
                     "otel_jax": record["cause"], "otel_jax_diff": record["diff"][:6],
                     "jax": explanation.text}
            if explanation.category in EXPLAIN_NONE:
                if record["cause_kind"] not in ("first_compile", "function_identity"):
                    only_otel.append(entry)
                continue
            kind = record["cause_kind"]
            if kind == "first_compile":
                first_explained.append(entry)
                continue
            explained += 1
            if kind == "unknown":
                vaguer.append({**entry, "missing": ["a cause (unknown)"]})
                continue
            if explanation.category in ("debug", "identity"):
                continue  # nothing named beyond the category
            if CATEGORY_OF_KIND.get(kind) != explanation.category:
                views.append({**entry, "jax_category": explanation.category})
                continue
            missing = missing_items(explanation, record)
            if missing and record["diff_total"] <= len(record["diff"]):
                vaguer.append({**entry, "missing": missing})
    ratio = otel["wall_s"] / plain["wall_s"] if plain["wall_s"] else float("nan")
    return {"jax": otel.get("jax"), "modes": list(MODES) if with_plain else ["otel"],
            "finished": bool(otel.get("finished", True) and plain.get("finished", True)),
            "outcomes": {m: dict(c) for m, c in outcomes.items()},
            "outcome_diffs": outcome_diffs, "count_diffs": count_diffs,
            "listener_diffs": listener_diffs, "eager_count_diffs": eager_diffs,
            "vaguer": vaguer, "different_views": views,
            "unknowns": unknowns, "misnamed": misnamed, "wrong_first_compile": wrong_first,
            "first_compiles_jax_explains": first_explained, "only_otel_explains": only_otel,
            "compiles": compiles, "records": records_total, "explained_by_jax": explained,
            "wall_s": {"plain": plain["wall_s"], "otel": otel["wall_s"]}, "wall_ratio": ratio,
            "install_error": otel.get("install_error"),
            **corpus_hints.check(tests_otel),
            "records_dropped": otel.get("records_dropped", 0),
            "names": corpus_names.check(tests_otel, [OUTSIDE_TESTS, *ids]),
            "failed": {m: sorted(t for t, v in d["tests"].items()
                                 if v["outcome"] == "failed")
                       for m, d in (("plain", plain), ("otel", otel))}}


# --- printing -----------------------------------------------------------------------------

def _indent(text: str, prefix: str = "      ") -> str:
    return "\n".join(prefix + line for line in text.strip().splitlines())


def render(result: dict[str, Any], limit: int) -> str:
    lines = [f"JAX {result['jax']}"]
    if not result.get("finished", True):
        lines.append("a run was cut short: these are the tests it finished")
    if result["install_error"]:
        lines.append(f"otel_jax.install() FAILED: {result['install_error']}")
    for mode in result.get("modes", MODES):
        counts = result["outcomes"][mode]
        lines.append(f"{mode:6s} run: " + ", ".join(f"{counts[k]} {k}" for k in sorted(counts))
                     + f"  ({result['wall_s'][mode]:.1f} s)")
        for test in result["failed"][mode][:limit]:
            lines.append(f"    failed: {test}")
    sections = [
        ("tests whose outcome differs", result["outcome_diffs"],
         lambda d: f"{d['test']}: plain {d['plain']}, otel {d['otel']}  {d['error']}"),
        ("tests where the listener's compiles differ from otel_jax's records",
         result["count_diffs"],
         lambda d: f"{d['test']}: listener {d['listener']}, records {d['records']}"
                   f"  listener {dict(d['listener_names'])} records {dict(d['record_names'])}"),
        ("tests whose compiles of user functions differ between the two runs",
         result["listener_diffs"],
         lambda d: f"{d['test']}: plain {d['plain']}, otel {d['otel']}  {d['functions']}"),
        ("compiles paired with a record of another function", result["misnamed"],
         lambda d: f"{d['test']}: listener {d['listener']}, record {d['record']}"),
        ("first compiles of a function recorded before", result["wrong_first_compile"],
         lambda d: f"{d['test']}: {d['function']} #{d['count']}: {d['cause']}"),
        ("recompiles where otel_jax is vaguer than JAX", result["vaguer"],
         lambda d: f"{d['test']}\n      otel_jax: {d['function']} #{d['count']} {d['kind']}: "
                   f"{d['otel_jax']}\n      missing: {'; '.join(d['missing'])}\n"
                   f"      JAX:\n{_indent(d['jax'], '        ')}"),
        (corpus_hints.SECTION_TITLE, result.get("hints_contradicted", []),
         corpus_hints.format_entry),
        ("unknown causes", result["unknowns"],
         lambda d: f"{d['test']}: {d['function']} #{d['count']}: {d['cause']}"),
    ] + corpus_names.sections(result)
    for title, items, fmt in sections:
        lines.append(f"{title}: {len(items)}")
        for item in items[:limit]:
            lines.append("  " + fmt(item))
        if len(items) > limit:
            lines.append(f"  ... and {len(items) - limit} more (corpus.json)")
    lines.append(f"tests whose eager-op compiles differ between the runs (not counted: "
                 f"garbage collection decides them): {len(result['eager_count_diffs'])}")
    lines.append(f"compiles where JAX and otel_jax compared with different earlier calls "
                 f"(not counted): {len(result['different_views'])}; "
                 f"recompiles only otel_jax explains: {len(result['only_otel_explains'])}; "
                 f"first compiles JAX compares with a trace never compiled on its own: "
                 f"{len(result['first_compiles_jax_explains'])}")
    lines.append(summary(result))
    return "\n".join(lines)


def problems(result: dict[str, Any]) -> int:
    return (len(result["outcome_diffs"]) + len(result["count_diffs"])
            + len(result["listener_diffs"]) + len(result["misnamed"]) + len(result["vaguer"])
            + len(result["wrong_first_compile"]) + len(result.get("hints_contradicted", []))
            + corpus_names.problems(result)
            + (1 if result["install_error"] else 0) + (1 if result["records_dropped"] else 0))


def summary(result: dict[str, Any]) -> str:
    o = result["outcomes"]
    return (f"corpus: {sum(o['otel'].values())} tests; outcome differences "
            f"{len(result['outcome_diffs'])}; compiles {result['compiles']} (listener) vs "
            f"{result['records']} (otel_jax), tests with unequal counts "
            f"{len(result['count_diffs']) + len(result['listener_diffs'])}; "
            f"{result['explained_by_jax']} recompiles JAX explains, otel_jax vaguer on "
            f"{len(result['vaguer'])}; unknown causes {len(result['unknowns'])}; "
            f"hints contradicted {len(result.get('hints_contradicted', []))}; "
            f"wall time otel/plain {result['wall_ratio']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter whose environment holds JAX, otel_jax and the corpus")
    parser.add_argument("--all", action="store_true",
                        help="every *_test.py the packages ship (default: the subset)")
    parser.add_argument("--package", action="append", dest="packages",
                        help=f"with --all: packages whose tests run (default: "
                             f"{', '.join(DEFAULT_PACKAGES)})")
    parser.add_argument("--files", nargs="*", default=list(SUBSET),
                        help="package:relative/path_test.py selectors, test files, or folders "
                             "of a suite's source tree (its *_test.py and test_*.py) "
                             "(default: the subset)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=4 * 3600,
                        help="seconds each run may take")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="runs to make (otel alone: counts and causes, no outcomes)")
    parser.add_argument("--compare-only", action="store_true",
                        help="compare the results of the last runs in --out again")
    parser.add_argument("--limit", type=int, default=200, help="items printed per section")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    if os.sep in args.python:  # the runs start in --out; a venv's python is not resolved
        args.python = os.path.abspath(args.python)
    out.mkdir(parents=True, exist_ok=True)
    if args.compare_only:
        runs = {m: json.loads((out / f"{m}.json").read_text()) for m in MODES
                if (out / f"{m}.json").exists()}
    else:
        files = find_tests(args.python, args.files, args.all,
                           tuple(args.packages or DEFAULT_PACKAGES))
        print(f"corpus: {len(files)} test files, {args.python}", flush=True)
        runs = {}
        for mode in args.modes:
            runs[mode] = run_suite(args.python, mode, files, out, args.timeout,
                                   args.pytest_args)
            print(f"corpus: {mode} run done in {runs[mode]['process_wall_s']:.0f} s",
                  flush=True)
    if "otel" not in runs:
        raise SystemExit("corpus: no otel run to compare")
    result = compare(runs.get("plain"), runs["otel"])
    result["hazards"] = corpus_hazards.precision(runs["otel"])
    (out / "corpus.json").write_text(json.dumps(result, indent=1, default=str))
    # the hazards first: the summary stays the last line
    text = corpus_hazards.render(result["hazards"], args.limit) + "\n" + render(result,
                                                                                args.limit)
    (out / "corpus.txt").write_text(text + "\n")
    print(text)
    return 1 if problems(result) else 0


if __name__ == "__main__":
    sys.exit(main())
