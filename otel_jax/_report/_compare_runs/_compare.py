"""``otel-jax diff``'s comparison: two runs' rows matched per function, what changed, and
whether that passes the thresholds CI sets.

Matching.  A function is the same in both runs when its name, its row kind and its *file
key* agree; two functions of one name in one file are told apart by their order of
definition (the first, second … of that name in that file), not by their line, which
moves when code above them changes.  The file key (:func:`file_keys`) lets two checkouts
at different absolute paths compare:

1. a file under ``site-packages``/``dist-packages`` is keyed by its path below that
   directory (``flax/linen/module.py``), the same in every environment;
2. every other file is keyed by its path below its run's *root*.  The roots are the one
   pair of directory prefixes that make the most files of the two runs the same path
   (each pair of files with one base name votes for the prefixes left when their common
   trailing directories are taken off: ``/home/a/proj/train.py`` and
   ``/ci/build/proj/train.py`` vote for ``/home/a`` and ``/ci/build``);
3. then the directory every key of both runs shares is taken off too, so that the keys
   shown are short (``train.py``, ``models/mlp.py``).

A function whose file key has no match (the program's file renamed or moved between the
runs: ``train.py`` then ``train_v2.py``) would read as every function gone and new again.
So, by default (``match="auto"``), a row left unmatched whose name and row kind one
unmatched row of the other run has too is matched with it, whatever its file
(``moved_from`` names BASE's file); ``match="name"`` matches every row left by name and
row kind, in order of file key and line (several functions of one name in moved files);
``match="file"`` keeps them apart.

What changed, per function: compiles, recompiles and recompiles by cause kind; compile
seconds (total, p50, p95); the *new causes*: recompile signatures (cause kind and the
paths the diff changed: ``shape`` of ``batch['x']``, never the values, so the same log
twice has none) seen in NEW and not in BASE; the *new hazards* (kind and path); functions
new in NEW and gone from it.  Rows are sorted by compile seconds gained.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..._core._vocab import RowKind
from ._read import Run

#: Files of one base name paired per side when the roots are voted for (bounds the work
#: on a hostile log whose files all share a name).
_MAX_PAIRED = 64
_LIBRARY_DIRS = ("site-packages", "dist-packages")
#: Rows of one function each (the aggregates ``(other)``/``(eager ops)`` are shown, never
#: gated: what they sum up differs from run to run).
_GATED = (RowKind.FUNCTION.value, RowKind.EAGER_OP.value)
#: How functions are matched across the runs (``otel-jax diff --match``; the first is the
#: default): by file key, then by name for what is left; by file key only; by name only.
MATCHES = ("auto", "file", "name")

RowKey = tuple[str, str, str, int]  # function, row kind, file key, order in that file
Row = dict[str, Any]
#: One matched pair: the row's key (its file key NEW's, or BASE's for a function gone),
#: BASE's row, NEW's row and BASE's file key where it differs from NEW's.
Matched = tuple[RowKey, Row | None, Row | None, str | None]


@dataclass
class Thresholds:
    """What makes NEW a regression (``None``/``False``: not checked)."""

    max_new_recompiles: int | None = None
    #: a ratio: 0.2 for 20 %
    max_compile_time_increase: float | None = None
    #: an increase below this many seconds never fails (timing noise on small totals)
    compile_time_floor_s: float = 1.0
    fail_on_new_hazards: bool = False
    #: a ratio: 0.2 fails a function whose largest program grew by more than 20 % in
    #: operations (deterministic: the same code lowers to the same program)
    max_program_growth: float | None = None


@dataclass
class Comparison:
    """The comparison (see the module's text); :meth:`to_dict` is its JSON shape."""

    base: Run
    new: Run
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    thresholds: Thresholds
    regressions: list[str] = field(default_factory=list)
    match: str = MATCHES[0]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def changed(self) -> bool:
        """Anything but compile seconds differs (seconds always differ a little)."""
        return any(r["changed"] for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        t = self.thresholds
        return {
            "base": {"source": self.base.source, "kind": self.base.kind},
            "new": {"source": self.new.source, "kind": self.new.kind},
            "match": self.match,
            "changed": self.changed,
            "regressed": self.regressed,
            "regressions": list(self.regressions),
            "thresholds": {"max_new_recompiles": t.max_new_recompiles,
                           "max_compile_time_increase": t.max_compile_time_increase,
                           "compile_time_floor_s": t.compile_time_floor_s,
                           "fail_on_new_hazards": t.fail_on_new_hazards,
                           "max_program_growth": t.max_program_growth},
            "summary": self.summary,
            "functions": self.rows,
        }


# -- file keys -------------------------------------------------------------------------


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.replace("\\", "/").split("/") if p not in ("", "."))


def _library(parts: tuple[str, ...]) -> tuple[str, ...] | None:
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _LIBRARY_DIRS:
            return parts[i + 1:]
    return None


def _roots(base: list[tuple[str, ...]], new: list[tuple[str, ...]]
           ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pair of prefixes (BASE's, NEW's) most pairs of same-named files vote for."""
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for parts in new:
        named = by_name.setdefault(parts[-1], [])
        if len(named) < _MAX_PAIRED:
            named.append(parts)
    votes: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    paired: Counter[str] = Counter()
    for a in base:
        if paired[a[-1]] >= _MAX_PAIRED:
            continue
        paired[a[-1]] += 1
        for b in by_name.get(a[-1], ()):
            n = 1
            while n < min(len(a), len(b)) and a[-n - 1] == b[-n - 1]:
                n += 1
            votes[(a[:-n], b[:-n])] += 1
    if not votes:
        return (), ()
    # most votes; then the longer common tail (shorter prefixes); then a fixed order
    return min(votes, key=lambda k: (-votes[k], len(k[0]) + len(k[1]), k))


def file_keys(base_files: set[str], new_files: set[str]
              ) -> tuple[dict[str, str], dict[str, str]]:
    """Each run's file paths mapped to their keys (the rule is in the module's text)."""
    user: list[dict[str, tuple[str, ...]]] = [{}, {}]
    keys: list[dict[str, tuple[str, ...]]] = [{}, {}]
    for side, files in enumerate((base_files, new_files)):
        for path in files:
            parts = _parts(path)
            lib = _library(parts)
            if lib:
                keys[side][path] = ("<lib>", *lib)
            elif parts:
                user[side][path] = parts
    roots = _roots(sorted(user[0].values()), sorted(user[1].values()))
    for side in (0, 1):
        root = roots[side]
        for path, parts in user[side].items():
            keys[side][path] = parts[len(root):] if parts[:len(root)] == root else parts
    user_keys = [k for side in (0, 1) for p, k in keys[side].items() if p in user[side]]
    common = 0
    if user_keys:
        first = user_keys[0]
        common = min(len(k) - 1 for k in user_keys)
        for k in user_keys:
            while common and k[:common] != first[:common]:
                common -= 1
    out: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for side in (0, 1):
        for path, parts in keys[side].items():
            cut = parts[common:] if path in user[side] else parts
            out[side][path] = posixpath.join(*cut) if cut else path
    return out


# -- matching and comparing ------------------------------------------------------------


def _keyed(rows: list[Row], keys: dict[str, str]) -> dict[RowKey, Row]:
    """Rows by (function, row kind, file key, order of definition in that file)."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        fkey = keys.get(r["file"], "") if r["file"] else ""
        groups.setdefault((r["function"], r["row_kind"], fkey), []).append(r)
    out = {}
    for (function, kind, fkey), group in groups.items():
        group.sort(key=lambda r: (-1 if r["line"] is None else r["line"]))
        for i, r in enumerate(group):
            out[(function, kind, fkey, i)] = r
    return out


def _by_name(base: dict[RowKey, Row], new: dict[RowKey, Row], every: bool,
             ) -> list[Matched]:
    """``base``'s and ``new``'s rows matched by function name and row kind, whatever their
    files, in order of file key and line: ``every`` name, or only a name that one row on
    each side has (``auto``: a renamed file, never a guess between several); the rest new
    or gone."""
    names: dict[tuple[str, str], tuple[list[RowKey], list[RowKey]]] = {}
    for side, rows in enumerate((base, new)):
        for key in sorted(rows):
            names.setdefault(key[:2], ([], []))[side].append(key)
    out: list[Matched] = []
    for b_keys, n_keys in names.values():
        if every or len(b_keys) == len(n_keys) == 1:
            for b, n in zip(b_keys, n_keys):
                out.append((n, base[b], new[n], b[2] if b[2] != n[2] else None))
            b_keys, n_keys = b_keys[len(n_keys):], n_keys[len(b_keys):]
        out += [(b, base[b], None, None) for b in b_keys]
        out += [(n, None, new[n], None) for n in n_keys]
    return out


def _match(base: dict[RowKey, Row], new: dict[RowKey, Row], match: str) -> list[Matched]:
    """The rows of both runs paired (the rule of ``match``, in the module's text): by file
    key first (the same file wins), then what is left by name (``auto``, ``name``)."""
    both = set(base) & set(new)
    out: list[Matched] = [(k, base[k], new[k], None) for k in both]
    left = ({k: r for k, r in base.items() if k not in both},
            {k: r for k, r in new.items() if k not in both})
    if match == "file":
        return out + [(k, r, None, None) for k, r in left[0].items()] + [
            (k, None, r, None) for k, r in left[1].items()]
    return out + _by_name(*left, every=match == "name")


def _pair(b: Any, n: Any) -> dict[str, Any]:
    return {"base": b, "new": n}


def _change(b: float | None, n: float | None) -> float | None:
    return None if b is None or n is None else round(n - b, 6)


def _signatures(row: dict[str, Any] | None) -> dict[tuple[str, tuple[str, ...] | None],
                                                   dict[str, Any]]:
    """A row's recompile signatures: (cause kind, paths), or (kind, ``None``) from a report
    JSON without ``cause_paths``."""
    if row is None:
        return {}
    if row.get("cause_paths") is None:
        return {(c["cause"], None): {"cause": c["cause"], "paths": None, "count": c["count"],
                                     "example": None, "callsite": None}
                for c in row["causes"]}
    return {(c["cause"], tuple(c["paths"])): c for c in row["cause_paths"]}


def _new_causes(b: dict[str, Any] | None, n: dict[str, Any], site: dict[str, str]
                ) -> list[dict[str, Any]]:
    old, now = _signatures(b), _signatures(n)
    by_kind = (b is not None and b.get("cause_paths") is None) or n.get("cause_paths") is None
    if by_kind:  # one side has kinds only: compare on kinds
        old_kinds = {k for k, _ in old}
        fresh = [c for (k, _), c in now.items() if k not in old_kinds]
    else:
        fresh = [c for key, c in now.items() if key not in old]
    out = []
    for c in fresh:
        callsite = c.get("callsite")
        out.append({"cause": c["cause"], "paths": c["paths"] if not by_kind else None,
                    "count": c["count"], "example": c.get("example"),
                    "callsite": _site(callsite, site) if callsite else None})
    return sorted(out, key=lambda c: (-c["count"], c["cause"], c["paths"] or []))


def _site(callsite: str, keys: dict[str, str]) -> str:
    """A ``file:line`` call site with its file keyed like the rows' files."""
    path, sep, line = callsite.rpartition(":")
    if sep and line.isdigit() and path in keys:
        return f"{keys[path]}:{line}"
    return keys.get(callsite, callsite)


def _new_hazards(b: dict[str, Any] | None, n: dict[str, Any]) -> list[dict[str, Any]]:
    old = {(h["kind"], h["path"]) for h in (b["hazards"] if b else [])}
    return [dict(h) for h in n["hazards"] if (h["kind"], h["path"]) not in old]


def _by_cause(b: dict[str, Any] | None, n: dict[str, Any] | None) -> list[dict[str, Any]]:
    counts: dict[str, list[int]] = {}
    for side, row in enumerate((b, n)):
        for c in (row["causes"] if row else []):
            counts.setdefault(c["cause"], [0, 0])[side] += c["count"]
    return [{"cause": k, "base": v[0], "new": v[1]}
            for k, v in sorted(counts.items(), key=lambda kv: (-kv[1][1], kv[0]))]


def _ops(row: Row | None) -> int | None:
    """The operations of a row's largest program (``None``: not given)."""
    program = row.get("program") if row is not None else None
    ops = program.get("ops") if isinstance(program, dict) else None
    return ops if type(ops) is int else None


def _compare(key: RowKey, b: Row | None, n: Row | None, sites: dict[str, str],
             moved_from: str | None) -> Row:
    function, kind, fkey, _ = key
    status = "new" if b is None else "gone" if n is None else "both"

    def get(row: dict[str, Any] | None, k: str, default: Any = None) -> Any:
        return row[k] if row is not None else default

    by_cause = _by_cause(b, n)
    new_causes = _new_causes(b, n, sites) if n is not None else []
    new_hazards = _new_hazards(b, n) if n is not None else []
    gained = max(0, get(n, "recompiles", 0) - get(b, "recompiles", 0))
    ops = _pair(_ops(b), _ops(n))
    total = _pair(get(b, "total_s", 0.0), get(n, "total_s", 0.0))
    changed = (status != "both" or get(b, "compiles") != get(n, "compiles")
               or get(b, "recompiles") != get(n, "recompiles")
               or any(c["base"] != c["new"] for c in by_cause)
               or bool(new_causes) or bool(new_hazards)
               or (None not in (ops["base"], ops["new"]) and ops["base"] != ops["new"]))
    return {
        "function": function, "file": fkey or None, "moved_from": moved_from,
        "row_kind": kind, "status": status,
        "line": _pair(get(b, "line"), get(n, "line")),
        "compiles": _pair(get(b, "compiles", 0), get(n, "compiles", 0)),
        "recompiles": _pair(get(b, "recompiles", 0), get(n, "recompiles", 0)),
        "recompiles_gained": gained,
        "recompiles_by_cause": by_cause,
        "total_s": total,
        "total_s_change": round(total["new"] - total["base"], 6),
        "p50_s": _pair(get(b, "p50_s"), get(n, "p50_s")),
        "p95_s": _pair(get(b, "p95_s"), get(n, "p95_s")),
        "new_causes": new_causes,
        "new_hazards": new_hazards,
        # the largest program's operations (``None``: that run's lines gave none)
        "program_ops": ops,
        "program_ops_growth": (round(ops["new"] / ops["base"] - 1, 6)
                               if None not in (ops["base"], ops["new"]) and ops["base"] > 0
                               else None),
        "gated": kind in _GATED,
        "changed": changed,
    }


def compare(base: Run, new: Run, thresholds: Thresholds | None = None,
            match: str = MATCHES[0]) -> Comparison:
    """Match ``base``'s and ``new``'s rows (``match``: one of :data:`MATCHES`) and say what
    changed (see the module's text)."""
    if match not in MATCHES:
        raise ValueError(f"match must be one of {', '.join(MATCHES)}, not {match!r}")
    t = thresholds or Thresholds()
    files = [_files(run) for run in (base, new)]
    bkeys, nkeys = file_keys(files[0], files[1])
    matched = _match(_keyed(base.rows, bkeys), _keyed(new.rows, nkeys), match)
    rows = [_compare(k, b, n, nkeys, moved)
            for k, b, n, moved in sorted(matched, key=lambda m: m[0])]
    rows.sort(key=lambda r: (-r["total_s_change"], -r["recompiles_gained"], r["function"],
                             r["file"] or "", r["line"]["new"] or r["line"]["base"] or 0))
    both = [r for r in rows if r["status"] == "both"]
    gated = [r for r in rows if r["gated"]]
    matched_b = sum(r["total_s"]["base"] for r in both)
    matched_n = sum(r["total_s"]["new"] for r in both)
    increase = matched_n - matched_b
    summary = {
        "functions": {"base": sum(r["status"] != "new" for r in rows),
                      "new": sum(r["status"] != "gone" for r in rows),
                      "both": len(both),
                      "new_only": sum(r["status"] == "new" for r in rows),
                      "gone": sum(r["status"] == "gone" for r in rows),
                      "moved": sum(r["moved_from"] is not None for r in rows)},
        "compiles": _pair(sum(r["compiles"]["base"] for r in rows),
                          sum(r["compiles"]["new"] for r in rows)),
        "recompiles": _pair(sum(r["recompiles"]["base"] for r in rows),
                            sum(r["recompiles"]["new"] for r in rows)),
        "recompiles_gained": sum(r["recompiles_gained"] for r in gated),
        "compile_s": _pair(round(sum(r["total_s"]["base"] for r in rows), 6),
                           round(sum(r["total_s"]["new"] for r in rows), 6)),
        "matched_compile_s": _pair(round(matched_b, 6), round(matched_n, 6)),
        "matched_compile_s_change": round(increase, 6),
        "matched_compile_s_ratio": (round(increase / matched_b, 6) if matched_b > 0
                                    else None),
        "new_causes": sum(len(r["new_causes"]) for r in gated),
        "new_hazards": sum(h["level"] == "warning" for r in gated for h in r["new_hazards"]),
        "new_notes": sum(h["level"] != "warning" for r in gated for h in r["new_hazards"]),
        "steps": _pair(_steps(base), _steps(new)),
    }
    diff = Comparison(base, new, rows, summary, t, match=match)
    diff.regressions = _regressions(diff, t)
    return diff


def _files(run: Run) -> set[str]:
    """The files a run names: its functions', and its recompiles' call sites' (keyed by the
    same roots, so that a new cause's call site reads ``train.py:110``)."""
    files = {r["file"] for r in run.rows if r["file"]}
    for r in run.rows:
        for c in r.get("cause_paths") or ():
            path, sep, line = (c.get("callsite") or "").rpartition(":")
            if sep and line.isdigit() and path:
                files.add(path)
    return files


def _steps(run: Run) -> dict[str, Any] | None:
    s = run.steps
    if s is None:
        return None
    share = s["share"]
    return {"share": round(share, 6) if share is not None else None,
            "compile_s": s["compile_s"], "steps_s": s["steps_s"]}


def _regressions(diff: Comparison, t: Thresholds) -> list[str]:
    """One line per threshold NEW is past; empty when none is."""
    s = diff.summary
    out = []
    if t.max_new_recompiles is not None and s["recompiles_gained"] > t.max_new_recompiles:
        worst = [r for r in diff.rows if r["gated"] and r["recompiles_gained"]]
        worst.sort(key=lambda r: -r["recompiles_gained"])
        names = ", ".join(f"{r['function']} +{r['recompiles_gained']}" for r in worst[:5])
        out.append(f"{s['recompiles_gained']} recompiles gained (at most "
                   f"{t.max_new_recompiles} allowed): {names}")
    ratio = s["matched_compile_s_ratio"]
    change = s["matched_compile_s_change"]
    if t.max_compile_time_increase is not None and change > t.compile_time_floor_s and (
            ratio is None or ratio > t.max_compile_time_increase):
        pct = "from 0 s" if ratio is None else f"{100 * ratio:+.0f}%"
        out.append(f"compile time of the functions in both runs up {change:.3f} s ({pct}; "
                   f"at most {100 * t.max_compile_time_increase:.0f}% allowed, increases "
                   f"under {t.compile_time_floor_s:g} s never fail)")
    if t.fail_on_new_hazards and s["new_hazards"]:
        names = ", ".join(sorted({f"{r['function']} ({h['kind']} {h['path']})".replace(" )", ")")
                                  for r in diff.rows if r["gated"]
                                  for h in r["new_hazards"] if h["level"] == "warning"}))
        out.append(f"{s['new_hazards']} new hazards: {names}")
    if t.max_program_growth is not None:
        grown = [r for r in diff.rows if r["gated"] and r["program_ops_growth"] is not None
                 and r["program_ops_growth"] > t.max_program_growth]
        grown.sort(key=lambda r: -r["program_ops_growth"])
        if grown:
            names = ", ".join(
                f"{r['function']} {r['program_ops']['base']:,} -> "
                f"{r['program_ops']['new']:,} ops ({100 * r['program_ops_growth']:+.0f}%)"
                for r in grown[:5])
            out.append(f"{len(grown)} programs grew by more than "
                       f"{100 * t.max_program_growth:.0f}%: {names}")
    return out
