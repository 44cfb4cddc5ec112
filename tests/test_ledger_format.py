"""The compile ledger's format is read by later runs and later versions: its bytes stay put.

A line spelled out here, as earlier versions wrote it, must be what this version writes for
the same compile, and must be read (a miss explained against it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from otel_jax._capture._jax import _cache_key, _persistent_cache
from otel_jax._capture._source import FunctionInfo
from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import MissReason, NotWrittenReason
from otel_jax._fleet import _ledger, _ledger_lines, _ledger_remote
from otel_jax._pipeline._record import PersistentCache

PARTS = ("computation", "jax_lib version", "backend version", "XLA flags", "compile_options",
         "accelerator_config", "compression", "custom_hook")

LINE = (
    b'{"otel_jax_ledger":1,"t":1700000000.5,"run":"0123456789ab","pid":4242,'
    b'"started":1699999990.0,"proc":0,"fn":"step@train.py","sig":"sigfp","prog":"progfp",'
    b'"key":{"computation":"progfp","jax_lib version":"a1","backend version":"b1",'
    b'"XLA flags":"c1","compile_options":"d1","accelerator_config":"e1","compression":"f1",'
    b'"custom_hook":"g1"},"jaxlib":"0.10.2","jax":"0.10.2","backend":"cpu 0.1",'
    b'"xla_flags":["--xla_a=1"],"compression":"zlib","devices":"1 x cpu",'
    b'"code":"train.py:12","written":false,"not_written_reason":"compile_time_below_minimum",'
    b'"compile_s":0.1235,"base":"basefp","ctxn":"1bfa2a4a","ctx":["True","None"]}\n')


@dataclass(frozen=True)
class _Signature:
    captured: bool = True
    context: tuple[tuple[str, object], ...] = (("jax_enable_x64", True), ("prec", None))


def _parts(flags_hash: str = "c1", flags: str = "--xla_a=1") -> _cache_key.CacheKeyParts:
    hashes = dict(zip(PARTS, ("progfp", "a1", "b1", flags_hash, "d1", "e1", "f1", "g1")))
    readable = {"jaxlib": "0.10.2", "jax": "0.10.2", "backend": "cpu 0.1",
                "xla_flags": [flags], "compression": "zlib", "devices": "1 x cpu"}
    return _cache_key.CacheKeyParts(hashes, readable)


def _note(monkeypatch, tmp_path, parts, cache):
    monkeypatch.setattr(_persistent_cache, "persistent_cache_dir", lambda: str(tmp_path / "cache"))
    monkeypatch.setattr(_cache_key, "cache_key_parts", lambda inputs, program: parts)
    monkeypatch.setattr(_ledger, "_process_index", lambda: 0)
    monkeypatch.setattr(_ledger_lines.time, "time", lambda: 1700000000.5)
    monkeypatch.setattr(_ledger_lines.os, "getpid", lambda: 4242)
    return _ledger.Ledger(FailOpen()).note(
        FunctionInfo("step", "/src/train.py", 12), "sigfp", "progfp", object(), cache,
        0.123456, _Signature(), "basefp")


def test_a_compile_is_written_as_the_line_earlier_versions_wrote(monkeypatch, tmp_path):
    monkeypatch.setattr(_ledger_lines, "_RUN", "0123456789ab")
    monkeypatch.setattr(_ledger_lines, "_STARTED", 1699999990.0)
    monkeypatch.setattr(_ledger_lines, "_CONTEXT_NAMES", {})
    _note(monkeypatch, tmp_path, _parts(), PersistentCache(
        hit=False, written=False,
        not_written_reason=NotWrittenReason.COMPILE_TIME_BELOW_MINIMUM))
    assert (tmp_path / "cache.otel_jax-ledger.jsonl").read_bytes() == LINE


def test_a_line_of_an_earlier_version_explains_a_miss(monkeypatch, tmp_path):
    (tmp_path / "cache.otel_jax-ledger.jsonl").write_bytes(LINE)
    monkeypatch.setattr(_ledger_lines, "_STARTED", 1800000000.0)  # a later run
    same = _note(monkeypatch, tmp_path, _parts(), PersistentCache(hit=False, written=True))
    assert same.miss_reason is MissReason.NOT_WRITTEN
    assert "(compile_time_below_minimum: it compiled faster than" in (same.miss_detail or "")
    assert "(pid 4242)" in (same.miss_detail or "")
    (tmp_path / "cache.otel_jax-ledger.jsonl").write_bytes(LINE)
    flags = _note(monkeypatch, tmp_path, _parts("c2", "--xla_b=2"),
                  PersistentCache(hit=False, written=True))
    assert flags.miss_reason is MissReason.KEY_CHANGED
    assert (flags.miss_detail or "").startswith("XLA flags: +--xla_b=2 ---xla_a=1; since the run")


def test_a_remote_object_of_an_earlier_version_is_read():
    line = json.loads(LINE)
    data = b'{"otel_jax_ledger":1,"entries":[' + LINE.rstrip(b"\n") + b"]}"
    entries, ours = _ledger_remote.decode_bucket(data, _ledger_lines.MARK, _ledger_lines.VERSION)
    assert ours and [_ledger_lines.parse_entry(e) for e in entries] == [line]
    written, dropped = _ledger_remote.encode_bucket(
        [line], _ledger_lines.MARK, _ledger_lines.VERSION, _ledger_lines.key_of,
        _ledger.KEEP_PER_KEY)
    assert (written, dropped) == (data, 0)
