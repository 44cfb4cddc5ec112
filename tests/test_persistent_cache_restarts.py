"""Across restarts: why JAX's persistent compilation cache did not serve a compile.

Real restarts: processes run one after another against one cache directory, and the
compile ledger beside it says why each miss missed. Fast tests of the ledger itself
(explanations, rotation, bad lines, location) run in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from conftest import run_persistent_cache_program

from otel_jax._capture._jax import _cache_key, _compile_entry
from otel_jax._core._failopen import FailOpen, OtelJaxWarning
from otel_jax._core._vocab import MissReason
from otel_jax._fleet import _ledger, _ledger_lines

TIMEOUT_S = 180

PROGRAM = """
    @jax.jit
    def step(x):
        return jnp.tanh(x) * SCALE

    step(jnp.ones(3))
    otel_jax.flush()
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    lookups = []
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == "jax.persistent_cache.lookups":
                    lookups += [dict(p.attributes, value=p.value) for p in m.data.data_points]
    print(json.dumps({"lines": [l for l in lines if l["function"] == "step"],
                      "lookups": lookups}))
"""


def _run(tmp_path, cache_dir, *, scale="3", min_compile_time=0.0, env=None):
    result, stderr = run_persistent_cache_program(
        tmp_path, PROGRAM.replace("SCALE", scale), cache_dir, min_compile_time, env,
        timeout=TIMEOUT_S)
    result["stderr"] = stderr
    [line] = result["lines"]
    return result, line


@pytest.mark.slow
def test_restarts_hit_then_flag_change_then_code_change(tmp_path):
    cache = tmp_path / "jax-cache"
    _, first = _run(tmp_path, cache)
    assert first["persistent_cache_hit"] is False
    assert first["persistent_cache_miss_reason"] == "never_seen"
    ledger = tmp_path / ("jax-cache" + _ledger.SUFFIX)
    assert ledger.exists() and not (cache / ledger.name).exists()  # beside, not inside

    out, same = _run(tmp_path, cache)  # unchanged: served from the cache
    assert same["persistent_cache_hit"] is True
    assert "persistent_cache_miss_reason" not in same
    assert [(p["jax.persistent_cache.hit"], p["value"]) for p in out["lookups"]] == [(True, 1)]

    # An XLA flag set between runs: named, with its value.
    out, flag = _run(tmp_path, cache, env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"})
    assert flag["persistent_cache_hit"] is False
    assert flag["persistent_cache_miss_reason"] == "key_changed"
    assert "XLA flags: +--xla_cpu_enable_fast_math=true" in flag["persistent_cache_miss_detail"]
    [lookup] = out["lookups"]
    assert lookup["jax.persistent_cache.miss_reason"] == "key_changed"
    assert lookup["code.function.name"] == "step" and lookup["jax.persistent_cache.hit"] is False

    # The code edited under the same signature (no flag): the program changed.
    _, edited = _run(tmp_path, cache, scale="4")
    assert edited["persistent_cache_miss_reason"] == "key_changed"
    assert edited["persistent_cache_miss_detail"].startswith(
        "program changed under the same signature (code edited at program.py:")
    assert len(ledger.read_text().splitlines()) == 3  # nothing recorded for the hit


@pytest.mark.slow
def test_a_compile_below_the_write_threshold_is_not_written_next_run(tmp_path):
    cache = tmp_path / "jax-cache"
    _, first = _run(tmp_path, cache, min_compile_time=3600.0)
    assert first["persistent_cache_miss_reason"] == "never_seen"
    _, again = _run(tmp_path, cache, min_compile_time=3600.0)
    assert again["persistent_cache_hit"] is False
    assert again["persistent_cache_miss_reason"] == "not_written"
    assert "compile_time_below_minimum" in again["persistent_cache_miss_detail"]
    assert "did not write an entry" in again["persistent_cache_miss_detail"]


@pytest.mark.slow
def test_a_garbage_ledger_costs_one_warning_and_the_run_goes_on(tmp_path):
    cache = tmp_path / "jax-cache"
    ledger = tmp_path / "my-ledger.jsonl"
    ledger.write_bytes(b"\x00\xffgarbage\n{\"otel_jax_ledger\": 1, \"fn\": \n[1, 2]\n"
                       b"{\"other\": \"program\"}\n{\"otel_jax_ledger\":1,\"fn\":\"step@tr")
    out, line = _run(tmp_path, cache, env={"OTEL_JAX_LEDGER": str(ledger)})
    assert line["persistent_cache_miss_reason"] == "never_seen"
    assert out["stderr"].count("unreadable line") == 1, out["stderr"][-2000:]
    assert "skipped 5 unreadable line(s)" in out["stderr"]
    assert not (tmp_path / ("jax-cache" + _ledger.SUFFIX)).exists()  # the variable wins
    # The truncated last line is left as it was; the new record is on a line of its own.
    records = [_ledger_lines.parse_line(raw) for raw in ledger.read_bytes().split(b"\n")]
    assert sum(r is not None for r in records) == 1


CONTEXT_PROGRAM = """
    if sys.argv[3] != "-":
        jax.config.update("jax_default_matmul_precision", sys.argv[3])

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T) * 3

    step(jnp.ones((4, 4)))
    otel_jax.flush()
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    print(json.dumps({"lines": [l for l in lines if l["function"] == "step"]}))
"""


def _run_context(tmp_path, cache_dir, precision):
    import conftest

    script = tmp_path / "program.py"
    script.write_text(conftest.PERSISTENT_CACHE_PREAMBLE + textwrap.dedent(CONTEXT_PROGRAM))
    out = subprocess.run([sys.executable, str(script), str(cache_dir), "0", precision],
                         env=conftest.clean_env(), capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert out.returncode == 0, out.stderr[-3000:]
    [line] = json.loads(out.stdout.strip().splitlines()[-1])["lines"]
    return line


@pytest.mark.slow
def test_a_tracing_context_change_between_runs_names_the_config_value(tmp_path):
    cache = tmp_path / "jax-cache"
    first = _run_context(tmp_path, cache, "-")
    assert first["persistent_cache_miss_reason"] == "never_seen"
    changed = _run_context(tmp_path, cache, "highest")
    assert changed["persistent_cache_hit"] is False
    assert changed["persistent_cache_miss_reason"] == "key_changed", changed
    detail = changed["persistent_cache_miss_detail"]
    assert detail.startswith("tracing context changed: jax_default_matmul_precision None -> ")
    assert "highest" in detail and "; since the run of " in detail
    back = _run_context(tmp_path, cache, "-")  # the first run's entry serves it again
    assert back["persistent_cache_hit"] is True


@pytest.mark.slow
def test_a_ledger_path_that_is_a_directory_costs_one_warning(tmp_path):
    directory = tmp_path / "ledger-dir"
    directory.mkdir()
    out, line = _run(tmp_path, tmp_path / "jax-cache", env={"OTEL_JAX_LEDGER": str(directory)})
    assert line["persistent_cache_hit"] is False
    assert "persistent_cache_miss_reason" not in line
    assert out["stderr"].count("OtelJaxWarning") == 1, out["stderr"][-3000:]
    assert f"the compile ledger {directory} is a directory" in out["stderr"]
    assert list(directory.iterdir()) == []


def test_the_context_that_changed_is_named_and_a_same_key_is_not_a_context_change():
    names, values = _ledger_lines.context_items(
        [("jax_enable_x64", False), ("other", 1), ("mesh", ())])
    assert values == ["False", "1", "()"]
    before = _entry(sig="a", base="b", ctxn=names, ctx=values)
    after = _entry(sig="c", base="b", computation="z", ctxn=names, ctx=["True", "1", "x"])
    reason, detail = _ledger_lines.explain([], after, [before])
    assert reason is MissReason.KEY_CHANGED
    assert detail.startswith("tracing context changed: jax_enable_x64 False -> True, "
                             "mesh () -> x; since the run of ")
    other_names, _ = _ledger_lines.context_items([("jax_enable_x64", False)])
    reason, detail = _ledger_lines.explain([], {**after, "ctxn": other_names}, [before])
    assert detail.startswith("tracing context changed (a config value such as")
    # The context changed nothing JAX's key sees, and the earlier entry was not written.
    reason, detail = _ledger_lines.explain(
        [], _entry(sig="c", base="b", written=False),
        [_entry(sig="a", base="b", written=False, not_written_reason="not_process_0")])
    assert reason is MissReason.NOT_WRITTEN and "not_process_0" in detail
    ledger = _ledger.Ledger(FailOpen())
    ledger._remember(("step@train.py", "a"), before)
    ledger._remember(("step@train.py", "c"), after)
    assert [e["sig"] for e in ledger._alike[("step@train.py", "b")]] == ["a", "c"]


def test_process_lines_explain_other_processes_misses():
    """A miss on process 5 against what process 0 recorded: the same key written means
    process 0's entry is gone; a key that differs only in the device parts is one JAX
    never writes; any other part that differs is named, against process 0's run."""
    mine = {"proc": 5, "run": "now", "pid": 9}
    zero = {"proc": 0, "pid": 1}
    reason, detail = _ledger_lines.explain([_entry(**zero)], _entry(**mine))
    assert reason is MissReason.NOT_WRITTEN
    assert detail.startswith("process 0's run of ") and "it is gone" in detail
    reason, detail = _ledger_lines.explain([_entry(**zero)],
                                           _entry(accelerator_config="x", **mine))
    assert reason is MissReason.NOT_WRITTEN and "only in the accelerator config" in detail
    reason, detail = _ledger_lines.explain(
        [_entry(**zero)], _entry(accelerator_config="x", **{"XLA flags": "y"}, **mine,
                                 xla_flags=["--xla_b=1"]))
    assert reason is MissReason.KEY_CHANGED
    assert detail.startswith("XLA flags: +--xla_b=1; since process 0's run of ")
    reason, detail = _ledger_lines.explain([], _entry(**mine), writer=0)
    assert reason is MissReason.NEVER_SEEN and detail.startswith("process 0 never recorded")


WRITER = textwrap.dedent("""
    import sys
    from otel_jax._fleet import _ledger, _ledger_lines
    from otel_jax._core._failopen import FailOpen
    ledger = _ledger.Ledger(FailOpen())
    who, n = sys.argv[2], int(sys.argv[3])
    for i in range(n):
        ledger._append(sys.argv[1], {
            _ledger_lines.MARK: _ledger_lines.VERSION, "fn": who, "sig": str(i), "key": {},
            "xla_flags": ["--xla_padding_" + who * 3000]})
""")


@pytest.mark.slow
def test_two_processes_writing_at_once_lose_and_interleave_nothing(tmp_path):
    path = tmp_path / "ledger.jsonl"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    n = 400
    procs = [subprocess.Popen([sys.executable, str(script), str(path), who, str(n)])
             for who in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=TIMEOUT_S) == 0
    # About 2.5 MiB in all: one rotation happened meanwhile, and lost nothing.
    rotated = tmp_path / "ledger.jsonl.1"
    assert rotated.exists()
    raw = (rotated.read_bytes() + path.read_bytes()).split(b"\n")
    assert raw[-1] == b""
    records = [_ledger_lines.parse_line(line) for line in raw[:-1]]
    assert all(r is not None for r in records)
    for who in ("a", "b"):
        sigs = [r["sig"] for r in records if r is not None and r["fn"] == who]
        assert sigs == [str(i) for i in range(n)]  # every line, in each writer's order
    assert max(len(line) for line in raw) < _ledger_lines.MAX_LINE


# --- the ledger itself (fast, in-process) ----------------------------------------------

KEY = {p: f"{i:016x}" for i, p in enumerate(_cache_key.CACHE_KEY_PARTS)}


def _entry(**changes):
    entry = {_ledger_lines.MARK: 1, "run": "other", "t": 0, "pid": 7, "fn": "step@train.py",
             "sig": "s", "prog": "p", "key": dict(KEY), "jaxlib": "0.10.2", "jax": "0.10.2",
             "backend": "cpu cpu", "xla_flags": [], "compression": "zlib",
             "devices": "1 x cpu", "code": "train.py:12", "written": True,
             "not_written_reason": None}
    for name, value in changes.items():
        if name in KEY:
            entry["key"] = {**entry["key"], name: value}
        else:
            entry[name] = value
    return entry


def _key_change(before, after):
    reason, detail = _ledger_lines.explain([before], after) or (None, "")
    assert reason is MissReason.KEY_CHANGED
    return detail


def test_each_key_part_is_named_with_before_and_after():
    jaxlib = _key_change(_entry(), _entry(**{"jax_lib version": "x", "jaxlib": "0.10.3"}))
    assert jaxlib.startswith("jaxlib 0.10.2 -> 0.10.3")
    flags = _key_change(_entry(xla_flags=["--xla_a=1"]),
                        _entry(**{"XLA flags": "x", "xla_flags": ["--xla_b=2"]}))
    assert flags.startswith("XLA flags: +--xla_b=2 ---xla_a=1")
    assert _key_change(_entry(), _entry(computation="x")).startswith(
        "program changed under the same signature (code edited at train.py:12?)")
    assert _key_change(_entry(), _entry(compile_options="x")).startswith("compile options")
    assert _key_change(_entry(), _entry(accelerator_config="x", devices="8 x TPU v5")
                       ).startswith("devices 1 x cpu -> 8 x TPU v5")
    assert "backend" in _key_change(_entry(), _entry(**{"backend version": "x"}))
    assert "compression" in _key_change(_entry(), _entry(compression="x"))
    assert "custom hook" in _key_change(_entry(), _entry(custom_hook="x"))
    # The first part that differs, in JAX's order, is the one named.
    assert _key_change(_entry(), _entry(computation="x", compile_options="y")).startswith(
        "program changed")


def test_unknown_parts_are_not_differences_and_the_closest_key_is_compared():
    assert (_ledger_lines.explain([_entry()], _entry(compile_options=""))[0]
            is MissReason.NOT_WRITTEN)
    far = _entry(computation="a", compile_options="b", **{"XLA flags": "c"})
    near = _entry(computation="z")
    detail = _key_change(near, _entry(computation="y"))
    assert _ledger_lines.explain([near, far], _entry(computation="y"))[1] == detail


def test_not_written_and_evicted():
    reason, detail = _ledger_lines.explain(
        [_entry(written=False, not_written_reason="not_process_0")], _entry(written=False))
    assert reason is MissReason.NOT_WRITTEN and "not_process_0" in detail
    reason, detail = _ledger_lines.explain([_entry()], _entry())
    assert reason is MissReason.NOT_WRITTEN and "evicted" in detail
    assert _ledger_lines.explain([], _entry())[0] is MissReason.NEVER_SEEN
    unreadable = _entry(**{p: "" for p in KEY})  # every hash function moved
    assert _ledger_lines.explain([_entry()], unreadable) is None


def test_a_written_entry_is_remembered_over_later_unwritten_ones():
    ledger = _ledger.Ledger(FailOpen())
    key = ("step@train.py", "s")
    ledger._remember(key, _entry(written=True))
    ledger._remember(key, _entry(written=False, not_written_reason="not_process_0"))
    [kept] = ledger._index[key]
    assert kept["written"] is True
    for i in range(_ledger.KEEP_PER_KEY + 3):
        ledger._remember(key, _entry(computation=str(i)))
    assert len(ledger._index[key]) == _ledger.KEEP_PER_KEY


def test_location_argument_variable_and_off(tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_JAX_LEDGER", raising=False)
    cache = str(tmp_path / "cache")
    assert _ledger.resolve(None, cache) == cache + _ledger.SUFFIX
    assert _ledger.resolve(None, None) is None  # the persistent cache is off
    assert _ledger.resolve(str(tmp_path / "x.jsonl"), None) is None
    assert _ledger.resolve(False, cache) is None
    assert _ledger.resolve("off", cache) is None
    # A remote cache: a prefix of objects beside it; a remote setting is kept as given.
    assert _ledger.resolve(None, "gs://bucket/cache/") == "gs://bucket/cache.otel_jax-ledger"
    assert _ledger.resolve("s3://b/ledger/", cache) == "s3://b/ledger"
    assert _ledger.resolve(None, "file://" + cache) == cache + _ledger.SUFFIX
    assert _ledger.resolve(tmp_path / "x.jsonl", cache) == str(tmp_path / "x.jsonl")
    monkeypatch.setenv("OTEL_JAX_LEDGER", str(tmp_path / "env.jsonl"))
    assert _ledger.resolve(None, cache) == str(tmp_path / "env.jsonl")
    assert _ledger.resolve(tmp_path / "x.jsonl", cache) == str(tmp_path / "x.jsonl")
    monkeypatch.setenv("OTEL_JAX_LEDGER", "off")
    assert _ledger.resolve(None, cache) is None


def test_install_checks_the_ledger_argument():
    import otel_jax

    with pytest.raises(ValueError, match="ledger_path"):
        otel_jax.install(ledger_path=3)  # type: ignore[arg-type]


def test_the_ledger_rotates_and_reads_a_bounded_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(_ledger, "MAX_BYTES", 4000)
    path = str(tmp_path / "ledger.jsonl")
    ledger = _ledger.Ledger(FailOpen())
    for i in range(40):
        ledger._append(path, _entry(sig=str(i)))
    assert not os.path.exists(path) or os.path.getsize(path) <= 4000 + _ledger_lines.MAX_LINE
    assert os.path.getsize(path + ".1") <= 4000 + _ledger_lines.MAX_LINE
    reader = _ledger.Ledger(FailOpen())
    reader._load(path)
    sigs = sorted(int(s) for _, s in reader._index)
    assert sigs[-1] == 39 and len(sigs) < 40  # the newest kept, the oldest rotated away
    assert reader.skipped == 0  # a tail cut mid-line drops that line without counting it


def test_a_line_too_long_drops_its_flags_or_is_not_written():
    assert len(_ledger_lines.encode_line(_entry(xla_flags=["--xla_x=" + "y" * 5000]))) < 4096
    assert _ledger_lines.encode_line(_entry(fn="f" * 5000)) is None


def test_an_unwritable_ledger_warns_once(tmp_path):
    warned = []
    ledger = _ledger.Ledger(FailOpen(warn=lambda msg, *a, **k: warned.append(msg)))
    made = tmp_path / "new-dir" / "ledger.jsonl"
    ledger._append(str(made), _entry())  # a directory not there yet is made
    assert made.exists()
    (tmp_path / "a-file").write_text("")
    bad = str(tmp_path / "a-file" / "ledger.jsonl")
    for _ in range(3):
        ledger._append(bad, _entry())
    assert len(warned) == 1 and "cannot write the compile ledger" in warned[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtelJaxWarning)
        ledger._append(bad, _entry())  # nothing more


# --- otel-jax report: the persistent-cache section --------------------------------------

def _log_line(hit, reason=None, detail=None, function="step", eager=False):
    line = {"event": "jax.compile", "function": function, "count": 1, "compile_s": 0.5,
            "eager_op": eager, "persistent_cache_hit": hit}
    if reason is not None:
        line["persistent_cache_miss_reason"] = reason
        line["persistent_cache_miss_detail"] = detail
    return json.dumps(line)


def test_the_report_counts_hits_and_misses_by_reason(tmp_path, capsys):
    from otel_jax import _cli
    from otel_jax._report import _aggregate

    flag = "XLA flags: +--xla_cpu_enable_fast_math=true; since the run of ..."
    lines = [_log_line(True), _log_line(True), _log_line(True, function="other"),
             _log_line(False, "key_changed", flag), _log_line(False, "key_changed", flag),
             _log_line(False, "never_seen", "no earlier run"), _log_line(False),
             _log_line(False, ["not", "a", "reason"]), _log_line(False, "x", eager=True),
             "not json", json.dumps({"event": "jax.compile", "persistent_cache_hit": "yes"})]
    log = tmp_path / "app.log"
    log.write_text("\n".join(lines) + "\n")
    assert _cli.main(["report", str(log)]) == 0
    out = capsys.readouterr().out
    assert "Persistent cache: 8 lookups, 3 hits (38%), 5 misses" in out
    assert f"  key_changed         2  {flag} (x2)" in out
    assert "  unexplained         2" in out  # no reason, and a reason that is not text
    with log.open("rb") as f:
        _, report = _aggregate.summarize(f)
    section = report.persistent_cache()
    assert [(m["reason"], m["count"]) for m in section["misses_by_reason"]] == [
        ("key_changed", 2), ("unexplained", 2), ("never_seen", 1)]
    assert _cli.main(["report", "--format", "markdown", str(log)]) == 0
    assert "| key_changed | 2 |" in capsys.readouterr().out
    assert _cli.main(["report", "--format", "json", str(log)]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)  # rows, as before


def test_no_section_without_miss_reasons(tmp_path, capsys):
    from otel_jax import _cli

    log = tmp_path / "app.log"
    log.write_text(_log_line(True) + "\n" + _log_line(False) + "\n")
    assert _cli.main(["report", str(log)]) == 0
    assert "Persistent cache" not in capsys.readouterr().out


def _compile_inputs(fn, *args):
    import jax
    from jax._src import compiler


    original = compiler.compile_or_get_cached
    compiler.compile_or_get_cached = _compile_entry.wrap_compile_or_get_cached(original)
    try:
        jax.jit(fn)(*args)
    finally:
        compiler.compile_or_get_cached = original
    return _compile_entry.take_compile_inputs()


def test_every_key_part_is_read_with_jax_own_hash_functions_each_compile(monkeypatch):
    import hashlib

    import jax.numpy as jnp
    from jax._src import cache_key

    inputs = _compile_inputs(lambda x: x * 5 + 2, jnp.ones(7))
    first = _cache_key.cache_key_parts(inputs, "0123456789abcdef")
    again = _cache_key.cache_key_parts(inputs, "0123456789abcdef")  # per-process parts kept
    assert first == again
    assert all(first.hashes[p] for p in _cache_key.CACHE_KEY_PARTS), first.hashes
    h = hashlib.sha256()
    cache_key._hash_platform(h, inputs.backend)
    assert first.hashes["backend version"] == h.hexdigest()[:16]  # as JAX's DEBUG log
    assert first.readable["jaxlib"] and first.readable["devices"].startswith("1 x ")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    flagged = _cache_key.cache_key_parts(inputs, "0123456789abcdef")
    assert flagged.hashes["XLA flags"] != first.hashes["XLA flags"]
    # beside those of the machine's own (a TPU host sets LIBTPU_INIT_ARGS)
    assert flagged.readable["xla_flags"] == sorted([*first.readable["xla_flags"],
                                                    "--xla_cpu_enable_fast_math=true"])
    monkeypatch.delattr(cache_key, "_hash_serialized_compile_options")  # moved
    moved = _cache_key.cache_key_parts(inputs, "0123456789abcdef")
    assert moved.hashes["compile_options"] == "" and moved.hashes["XLA flags"]


def test_the_miss_reason_is_on_the_span_and_the_log_line():
    from otel_jax._capture._signature import uncaptured
    from otel_jax._capture._source import FunctionInfo
    from otel_jax._core._vocab import Attr, CauseKind, Field
    from otel_jax._explain._diff import Diff
    from otel_jax._pipeline._record import (
        CompileRecord,
        PersistentCache,
        log_fields,
        span_attributes,
    )

    cache = PersistentCache(False, True, None, MissReason.KEY_CHANGED, "jaxlib 0.10.1 -> 0.10.2")
    record = CompileRecord(function=FunctionInfo("step", "train.py", 3), count=1,
                           cause_kind=CauseKind.FIRST_COMPILE, cause="first", diff=Diff((), 0),
                           signature=uncaptured(), start=0.0, end=1.0, persistent_cache=cache)
    attrs = span_attributes(record)
    assert attrs[Attr.PERSISTENT_CACHE_MISS_REASON] == "key_changed"
    assert attrs[Attr.PERSISTENT_CACHE_MISS_DETAIL] == "jaxlib 0.10.1 -> 0.10.2"
    fields = log_fields(record, None)
    assert fields[Field.PERSISTENT_CACHE_MISS_REASON] == "key_changed"
    assert fields[Field.PERSISTENT_CACHE_MISS_DETAIL] == "jaxlib 0.10.1 -> 0.10.2"
    plain = CompileRecord(function=FunctionInfo("step"), count=1,
                          cause_kind=CauseKind.FIRST_COMPILE, cause="first", diff=Diff((), 0),
                          signature=uncaptured(), start=0.0, end=1.0,
                          persistent_cache=PersistentCache(True, False))
    assert Attr.PERSISTENT_CACHE_MISS_REASON not in span_attributes(plain)
    assert Field.PERSISTENT_CACHE_MISS_REASON not in log_fields(plain, None)


@pytest.mark.slow
def test_a_failing_ledger_fails_open(tmp_path):
    boom = """
    from otel_jax._capture._jax import _cache_key
    def boom(*a, **k):
        raise RuntimeError('boom')
    _cache_key.cache_key_parts = boom
    """
    result, stderr = run_persistent_cache_program(
        tmp_path, textwrap.dedent(boom) + textwrap.dedent(PROGRAM.replace("SCALE", "3")),
        tmp_path / "cache", timeout=TIMEOUT_S)
    [line] = result["lines"]
    assert line["persistent_cache_hit"] is False
    assert "persistent_cache_miss_reason" not in line  # no reason, and the compile reported
    assert stderr.count("internal error in compile ledger") == 1


def test_lines_of_processes_started_beside_this_one_are_not_earlier_runs(tmp_path):
    """The ranks of a job on one host share a ledger: a sibling's line is not an earlier
    run's (its key differs by the device assignment); a run that started later and ended
    while this process lived (a notebook kernel's neighbour) still is."""
    import time

    start = _ledger_lines._STARTED
    path = str(tmp_path / "ledger.jsonl")
    earlier = _entry(t=start - 3600, started=start - 3700, sig="s")
    later_run = _entry(t=time.time(), started=start + 10 * _ledger_lines.SIBLING_START_S, pid=9,
                       sig="s", computation="y")
    sibling = _entry(t=time.time(), started=start + 1, sig="s", compile_options="x", pid=8)
    old_line = _entry(t=time.time(), sig="s", pid=6, compression="z")  # no start time
    with open(path, "w", encoding="utf-8") as f:
        for line in (earlier, later_run, sibling, old_line):
            f.write(json.dumps(line) + "\n")
    ledger = _ledger.Ledger(FailOpen())
    ledger._load(path)
    assert sorted(e["pid"] for e in ledger._index[("step@train.py", "s")]) == [6, 7, 9]
    assert _ledger_lines.is_concurrent(sibling)
    assert not any(map(_ledger_lines.is_concurrent, (earlier, later_run, old_line)))
    # this process's own
    assert not _ledger_lines.is_concurrent({**sibling, "run": _ledger_lines._RUN})
