"""Cross-rank comparison in one process: what a divergence produces, the comparison of two
ranks' entries, and failing open when the coordination service cannot be used.

The real multi-process runs are in tests/test_multiprocess.py.
"""

from __future__ import annotations

import json
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import pytest

import otel_jax
from otel_jax import _jax_read, _ranks
from otel_jax._engine import ENGINE
from otel_jax._failopen import FailOpen, OtelJaxWarning
from otel_jax._record import Divergence, SpanLink
from otel_jax._vocab import DivergenceKind


def _entry(fp: str, pf: str, leaves: list[list[str]], statics=()) -> dict:
    return {"fp": fp, "pf": pf, "s": {"l": leaves, "n": len(leaves), "st": list(statics),
                                      "o": [], "c": [], "t": "t0"}}


def test_a_different_shape_is_named_with_both_ranks():
    entries = {0: _entry("a", "p", [["batch['x']", "f32[4]", "uncommitted"]]),
               1: _entry("b", "q", [["batch['x']", "f32[5]", "uncommitted"]])}
    for me in (0, 1):
        div = _ranks.compare("step", 1, entries, me)
        assert div is not None and div.kind is DivergenceKind.SIGNATURE
        assert div.text == "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)"
        assert div.ranks == ((0,), (1,))
        assert div.diff == ({"path": "batch['x']", "kind": "shape", "before": "f32[4]",
                             "after": "f32[5]"},)


def test_kinds_of_leaf_and_static_differences():
    a = _entry("a", "p", [["x", "f32[4]", "u"], ["y", "i32[] (weak)", "u"]], [["n", "3"]])
    b = _entry("b", "q", [["x", "f16[4]", "u"], ["y", "i32[]", "u"], ["z", "f32[1]", "u"]],
               [["n", "4"]])
    kinds = {(c["path"], c["kind"]) for c in _ranks.summary_diff(a["s"], b["s"])}
    assert kinds == {("x", "dtype"), ("y", "weak_type"), ("z", "pytree_structure"),
                     ("n", "static_argument")}


def test_same_signature_other_program():
    entries = {0: _entry("a", "p", []), 1: _entry("a", "q", []), 2: _entry("a", "p", [])}
    div = _ranks.compare("step", 3, entries, 2)
    assert div is not None and div.kind is DivergenceKind.PROGRAM
    assert div.text.startswith("same signature, different program (ranks 0,2 vs rank 1)")
    assert div.ranks == ((0, 2), (1,))


def test_identical_entries_and_unmeasured_ones_are_no_divergence():
    assert _ranks.compare("f", 1, {0: _entry("a", "p", []), 1: _entry("a", "p", [])}, 0) is None
    # a program fingerprint one rank could not read is not a difference
    assert _ranks.compare("f", 1, {0: _entry("a", "p", []), 1: _entry("a", "", [])}, 0) is None


def test_missing_ranks_are_named():
    div = _ranks.missing("step", 2, [1], [0, 2], 1, 30.0)
    assert div.text == "ranks 0,2 did not compile step #2 within 30 s of rank 1"
    assert div.missing_ranks == (0, 2)


def test_a_divergence_is_a_span_a_counter_and_a_warning_line(telemetry):
    report = ENGINE.cross_rank.report
    assert report is not None
    with telemetry.tracer.start_as_current_span("train_step") as parent:
        ctx = parent.get_span_context()
        link = SpanLink(f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")
    div = Divergence("step", 1, DivergenceKind.SIGNATURE,
                     "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)", ((0,), (1,)), (),
                     ({"path": "batch['x']", "kind": "shape", "before": "f32[4]",
                       "after": "f32[5]"},), 1, time.time(), link)
    report(div)
    [span] = telemetry.spans("jax.compile.divergence")
    assert span.parent is not None and span.parent.span_id == ctx.span_id
    assert span.attributes["jax.compile.divergence.kind"] == "signature"
    assert span.attributes["jax.compile.divergence"] == div.text
    assert span.attributes["jax.compile.divergence.ranks"] == "[[0], [1]]"
    assert span.attributes["jax.process.index"] == 1
    [point] = telemetry.metric_points("jax.compile.divergences")
    assert point.value == 1
    assert dict(point.attributes) == {"code.function.name": "step",
                                      "jax.compile.divergence.kind": "signature"}
    [line] = [ln for ln in telemetry.log_lines() if ln["event"] == "jax.compile.divergence"]
    assert line["level"] == "warning"
    assert line["divergence"] == div.text and line["ranks"] == [[0], [1]]
    assert line["span_id"] == link.span_id


def test_single_process_starts_no_thread_and_writes_no_key(telemetry):
    assert _jax_read.coordination() is None
    jax.jit(lambda x: x * 3)(jnp.ones(3))
    assert ENGINE.cross_rank.checker is None
    assert not [t for t in threading.enumerate() if t.name == "otel_jax-ranks"]


class _Gone:
    """A client whose service went away: every call fails."""

    calls = 0

    def key_value_set(self, *args):
        _Gone.calls += 1
        raise RuntimeError("UNAVAILABLE: Failed to send RPC to coordination service")

    key_value_dir_get = key_value_delete = key_value_set


def test_a_service_that_went_away_costs_one_warning_and_stops():
    seen: list = []
    failopen = FailOpen(warn=lambda message, *a, **k: seen.append(message))
    checker = _ranks.Checker(_jax_read.Coordination(_Gone(), 0, 2), 1.0, seen.append,
                             failopen)
    for _ in range(5):
        checker._call("publish", lambda: _jax_read.kv_set(checker.client, "k", "v"))
    assert checker.off
    assert len([m for m in seen if "coordination service" in m]) == 1
    before = _Gone.calls
    checker._call("publish", lambda: _jax_read.kv_set(checker.client, "k", "v"))
    assert _Gone.calls == before  # off: no more calls
    assert _Gone.calls == _ranks.MAX_FAILURES
    checker.close(1.0)


def test_a_client_without_the_methods_costs_one_warning(monkeypatch, telemetry):
    monkeypatch.setattr(_jax_read, "coordination",
                        lambda: _jax_read.Coordination(object(), 0, 2))
    monkeypatch.setattr(ENGINE.cross_rank, "checker", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ENGINE.failopen.reset()
        jax.jit(lambda x: x + 7)(jnp.ones(2))
        jax.jit(lambda x: x + 8)(jnp.ones(2))
    said = [w for w in caught if issubclass(w.category, OtelJaxWarning)
            and "lacks" in str(w.message)]
    assert len(said) == 1
    assert ENGINE.cross_rank.checker is not None and ENGINE.cross_rank.checker.off
    assert not [t for t in threading.enumerate() if t.name == "otel_jax-ranks"]
    ENGINE.cross_rank.checker = None


@pytest.mark.parametrize("kwargs", [{"on_divergence": "stop"}, {"divergence_timeout_s": 0},
                                    {"divergence_timeout_s": True},
                                    {"divergence_timeout_s": "30"}])
def test_install_arguments_are_checked(kwargs):
    otel_jax.uninstall()
    with pytest.raises(ValueError):
        otel_jax.install(log_output=None, **kwargs)


class _KeyValues:
    """JAX's coordination client, as far as the checker uses it, in one process."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def key_value_set(self, key, value, allow_overwrite=True):  # noqa: ANN001
        self.data[key] = value

    def key_value_dir_get(self, prefix):  # noqa: ANN001
        return [(k, v) for k, v in self.data.items() if k.startswith(prefix)]

    def key_value_delete(self, key):  # noqa: ANN001
        self.data.pop(key, None)


def _batches_compared(plans: dict[int, list[int]]) -> dict[int, list[int]]:
    """Two ranks compiling ``plans[rank]`` batch sizes in turn: the ordinals each reports."""
    service = _KeyValues()
    reports: dict[int, list[Divergence]] = {0: [], 1: []}
    checkers = {r: _ranks.Checker(_jax_read.Coordination(service, r, 2), 30.0,
                                  reports[r].append, FailOpen()) for r in (0, 1)}
    directory = f"{_ranks.PREFIX}/f/"
    for n in range(1, len(plans[0]) + 1):
        opened = {}
        for r in (0, 1):
            entry = _entry(f"fp{plans[r][n - 1]}", "p", [["x", f"f32[{plans[r][n - 1]}]", "u"]])
            service.key_value_set(f"{directory}{n}/{r}", json.dumps(entry))
            checkers[r]._remember(directory, r, n, entry)
            opened[r] = _ranks._Open("step", n, directory, None)
        for r in (0, 1):
            checkers[r]._poll(opened[r])
    return {r: [d.count for d in reports[r]] for r in (0, 1)}


def test_an_extra_program_on_one_rank_is_not_reported_at_every_later_ordinal():
    # rank 1 compiled 24 once more: the same programs follow, one ordinal apart; once two
    # ordinals in a row show it, no more reports
    assert _batches_compared({0: [32, 16, 8, 4, 2], 1: [32, 24, 16, 8, 4]}) == {
        0: [2, 3], 1: [2, 3]}


def test_a_second_real_divergence_after_a_shift_is_still_reported():
    # 8 on rank 0 is a program rank 1 never compiled, one ordinal off or not
    assert _batches_compared({0: [32, 16, 8], 1: [32, 24, 16]}) == {0: [2, 3], 1: [2, 3]}
