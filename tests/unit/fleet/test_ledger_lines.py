"""``_fleet._ledger_lines``: what one ledger line holds, how it is parsed and encoded, and
what the earlier lines say about a persistent-cache miss."""

from __future__ import annotations

import json

from otel_jax._capture._jax import _cache_key
from otel_jax._capture._source import FunctionInfo
from otel_jax._core._vocab import MissReason, NotWrittenReason
from otel_jax._fleet import _ledger_lines
from otel_jax._fleet._ledger_lines import (
    MARK,
    VERSION,
    encode_line,
    explain,
    is_concurrent,
    key_of,
    line_of,
    parse_line,
)
from otel_jax._pipeline._record import PersistentCache

KEY = {p: f"{i:016x}" for i, p in enumerate(_cache_key.CACHE_KEY_PARTS)}


def _line(**changes):
    parts = _cache_key.CacheKeyParts(dict(KEY), {"jaxlib": "0.10.2", "xla_flags": ["--a=1"]})
    cache = PersistentCache(hit=False, written=False,
                            not_written_reason=NotWrittenReason.NOT_PROCESS_0)
    line = line_of(FunctionInfo("step", "/src/train.py", 12), "sigfp", "progfp", parts, cache,
                   0.123456, None, 3)
    return {**line, **changes}


def test_a_line_holds_its_compile_in_the_order_on_disk():
    line = _line()
    assert list(line)[:7] == [MARK, "t", "run", "pid", "started", "proc", "fn"]
    assert line[MARK] == VERSION and line["proc"] == 3 and line["run"] == _ledger_lines._RUN
    assert line["code"] == "train.py:12" and line["compile_s"] == 0.1235
    assert line["written"] is False and line["not_written_reason"] == "not_process_0"
    assert key_of(line) == (line["fn"], "sigfp")
    assert not is_concurrent(line)  # this process's own line is no sibling's


def test_a_line_is_one_bounded_json_line_and_parses_back():
    line = _line()
    data = encode_line(line)
    assert data is not None and data.endswith(b"\n") and data.count(b"\n") == 1
    assert parse_line(data) == json.loads(data)
    long = _line(xla_flags=["--xla_" + "x" * 5000])
    short = encode_line(long)
    assert short is not None and len(short) <= _ledger_lines.MAX_LINE
    assert json.loads(short)["xla_flags"] == ["<too long to keep>"]
    for foreign in (b"garbage", b'{"otel_jax_ledger": 2, "fn": "f", "sig": "s", "key": {}}',
                    data[:40]):
        assert parse_line(foreign) is None


def test_a_miss_is_explained_from_the_earlier_lines():
    now = _line(run="now")
    reason, detail = explain([], now)
    assert reason is MissReason.NEVER_SEEN
    earlier = _line(run="then", written=True, not_written_reason=None, t=0, pid=7)
    reason, detail = explain([earlier], now)
    assert reason is MissReason.NOT_WRITTEN and "it is gone" in detail and "pid 7" in detail
    changed = _line(run="now", key={**KEY, "jax_lib version": "other"}, jaxlib="0.10.3")
    reason, detail = explain([earlier], changed)
    assert reason is MissReason.KEY_CHANGED and detail.startswith("jaxlib 0.10.2 -> 0.10.3")
    assert explain([earlier], _line(key={p: "" for p in KEY})) is None  # nothing to compare
