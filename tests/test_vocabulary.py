"""docs/telemetry.md is the contract and ``otel_jax._core._vocab`` its code: they must agree."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import otel_jax
from otel_jax._core import _vocab
from otel_jax._core._vocab import Attr, CauseKind, Field, Metric

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "telemetry.md").read_text()


def _constants(cls: type) -> set[str]:
    return {v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)}


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end != -1 else None]


def _first_column(section: str) -> set[str]:
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def test_every_attribute_is_documented_and_every_documented_one_exists():
    documented = (_first_column(_section("One span per compilation"))
                  | _first_column(_section("Steps")))
    keys = _constants(Attr) - {Attr.EVENT_NAME, Attr.REASON}
    attributes = {d for d in documented if "." in d}
    assert keys == attributes


def test_cause_kinds_match():
    section = _section("One span per compilation").split("### Cause kinds")[1]
    documented = _first_column(section)
    assert documented == {k.value for k in CauseKind}
    assert tuple(otel_jax.CAUSE_KINDS) == tuple(k.value for k in (
        CauseKind.FIRST_COMPILE, *_vocab.DIFFERENCE_KINDS, CauseKind.UNKNOWN))
    # the table lists the kinds in order of significance
    order = [k for k in re.findall(r"^\| `(\w+)`", section, re.M)]
    assert order[1:5] == [k.value for k in _vocab.DIFFERENCE_KINDS[:4]]


def test_metric_names_match():
    documented = {n for n in _first_column(_section("Metrics")) if not n.endswith(
        ("_total", "_seconds"))}
    assert documented == _constants(Metric)


def test_log_fields_match():
    documented = _first_column(_section("Logs"))
    storm = {Field.RECOMPILES, Field.THRESHOLD, Field.CAUSES, Field.LAST_CAUSE}
    assert _constants(Field) - storm == documented
    for name in storm | {_vocab.EVENT_STORM, _vocab.EVENT_COMPILE}:
        assert f"`{name}`" in _section("Logs")


def test_the_report_names_are_documented():
    bullet = _section("Tests and inspection").split("- `otel-jax report LOG…`")[1]
    bullet = bullet.split("\n- ")[0]
    documented = set(re.findall(r"`([^`]+)`", bullet))
    assert _constants(_vocab.ReportName) <= documented
    assert {k.value for k in _vocab.RowKind} <= documented


def test_span_names_are_documented():
    for name in (_vocab.SPAN_TRACE, _vocab.SPAN_LOWER, _vocab.SPAN_BACKEND_COMPILE,
                 _vocab.SPAN_COMPILE_PREFIX.strip() + " <function>"):
        assert f"`{name}`" in DOC


def test_the_vocabulary_imports_nothing_but_the_standard_library():
    import ast

    tree = ast.parse((ROOT / "otel_jax" / "_core" / "_vocab.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


# Built from parts so that this file does not cite them itself.
_OUTSIDE = "|".join(("SPEC" + r"\.md", r"\.\." + "/shared", "JAX_" + "NOTES"))


def test_the_repository_cites_no_file_outside_it():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".yml", ".yaml", ".json", ""}:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        if re.search(_OUTSIDE, text):
            offenders.append(name)
    assert offenders == []


def test_version_is_written_once():
    assert version("otel_jax") == otel_jax.__version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version\s*=\s*"', pyproject, re.M) is None
    assert (ROOT / "otel_jax" / "py.typed").exists()


def test_a_compile_history_entry_has_the_documented_keys():
    from otel_jax._pipeline._history import CompileEntry

    bullet = _section("Tests and inspection").split("`otel_jax.compile_history(fn)`")[1]
    bullet = bullet.split("\n- ")[0].split("As plain data")[1]
    documented = set(re.findall(r"`([a-z_]+)`", bullet))
    entry = CompileEntry(count=1, cause_kind=CauseKind.FIRST_COMPILE.value, cause="", diff=(),
                         compile_s=0.0, trace_s=None, lower_s=None, backend_compile_s=None,
                         callsite=None, timestamp=0.0)
    keys = set(entry.as_dict())
    assert keys == documented
    assert keys - {_vocab.ENTRY_SIGNATURE} <= _constants(Field)


def test_every_ledger_name_is_documented_beside_the_ledger():
    from otel_jax._core._vocab import LedgerWire

    section = _section("Persistent cache: why a compile was not served")
    names = _constants(LedgerWire)
    assert {LedgerWire.MARK, LedgerWire.FUNCTION, LedgerWire.ENTRIES} <= names
    for name in names:
        # the suffixes are written as a path's end, the keys on their own
        assert (name in section) if name.startswith(".") else (f"`{name}`" in section), name
    assert f"`{LedgerWire.VERSION}`" in section


def test_the_ledger_names_the_cache_key_parts_as_the_jax_boundary_does():
    from otel_jax._capture._jax import _cache_key
    from otel_jax._core._vocab import LedgerWire

    parts = tuple(v for k, v in vars(LedgerWire).items() if k.startswith("PART_"))
    assert parts == _cache_key.CACHE_KEY_PARTS


def test_the_ledger_writes_and_reads_no_key_outside_the_vocabulary():
    import ast

    def keys(tree: ast.AST) -> list[str]:
        found: list[ast.expr | None] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                found += node.keys
            elif isinstance(node, ast.Subscript):
                found.append(node.slice)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in {"get", "pop", "setdefault"} and node.args):
                found.append(node.args[0])
        return [k.value for k in found if isinstance(k, ast.Constant)
                and isinstance(k.value, str)]

    for name in ("_ledger.py", "_ledger_lines.py", "_ledger_remote.py"):
        tree = ast.parse((ROOT / "otel_jax" / "_fleet" / name).read_text())
        assert keys(tree) == [], name
