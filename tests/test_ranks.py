"""Cross-rank comparison in one process: what a divergence produces, the comparison of two
ranks' entries, and failing open when the coordination service cannot be used.

The real multi-process runs are in tests/test_multiprocess.py.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import otel_jax
import otel_jax.testing
from benchmarks.fleet_scale import Fleet
from otel_jax._capture._jax import _coordination
from otel_jax._capture._source import FunctionInfo
from otel_jax._core import _failopen, _vocab
from otel_jax._core._failopen import FailOpen, OtelJaxWarning
from otel_jax._core._vocab import DivergenceKind
from otel_jax._fleet import (
    _ranks,
    _ranks_arrive,
    _ranks_gather,
    _ranks_name,
    _ranks_protocol,
    _ranks_transport,
    _ranks_verdict,
)
from otel_jax._pipeline._engine import ENGINE
from otel_jax._pipeline._record import Divergence, SpanLink


def _entry(fp: str, pf: str, leaves: list[list[str]], statics=()) -> dict:
    return {"fp": fp, "pf": pf, "s": {"l": leaves, "n": len(leaves), "st": list(statics),
                                      "o": [], "c": [], "t": "t0"}}


@pytest.fixture(scope="module")
def records():
    """Real compile records of ``total(batch)``: ``batch['x']`` f32[4], f32[5] and f32[2]."""
    otel_jax.uninstall()
    otel_jax.install(log_output=None)

    @jax.jit
    def total(batch):
        return jnp.sum(batch["x"]) * 2

    with otel_jax.testing.record_compiles() as recorded:
        for n in (4, 5, 2, 6, 7, 8, 16, 24, 32):
            total({"x": np.ones(n, np.float32)})
    otel_jax.uninstall()
    by_rows = {}
    for record in recorded:
        rows = int(record.signature.types[0].split("[")[1].rstrip("]"))
        by_rows[rows] = dataclasses.replace(record, program_fingerprint=f"p{rows}")
    return by_rows


def _job(plans: dict[int, list], timeout_s: float = 30.0, late: dict[int, float] | None = None,
         fan_in: int = _ranks_arrive.FAN_IN) -> Fleet:
    """Ranks compiling ``plans[rank]`` (records) one after the other, on the fleet's
    simulated clock; a rank in ``late`` compiles that many seconds after the others."""
    fleet = Fleet(len(plans), timeout_s, fan_in)
    for rank, plan in plans.items():
        for n, record in enumerate(plan, 1):
            fleet.compile(rank, dataclasses.replace(record, count=n),
                          100.0 * n + 0.01 * rank + (late or {}).get(rank, 0.0))
    fleet.run()
    return fleet


def test_a_different_shape_is_named_with_both_ranks(records):
    fleet = _job({0: [records[4]], 1: [records[5]]})
    for rank in fleet.ranks:
        [div] = rank.reports
        assert div.kind is DivergenceKind.SIGNATURE
        assert div.text == "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)"
        assert div.ranks == ((0,), (1,))
        assert div.diff == ({"path": "batch['x']", "kind": "shape", "before": "f32[4]",
                             "after": "f32[5]"},)
        assert div.process_index == rank.rank


def test_which_ranks_are_on_which_side_as_ranges(records):
    plans = {r: [records[5 if r == 7 else 4]] for r in range(8)}
    fleet = _job(plans)
    for rank in fleet.ranks:
        [div] = rank.reports
        assert div.text == "batch['x']: f32[4] (ranks 0-6) vs f32[5] (rank 7)"
        assert div.ranks == ((0, 1, 2, 3, 4, 5, 6), (7,))
    # the entries were deleted once read; summaries were published for the sides only,
    # one rank each (the comparer's own needs none when it is on a side)
    keys = list(fleet.service.data)
    assert not [k for k in keys if "/e/" in k]
    summaries = [k for k in keys if "/s/" in k]
    assert 1 <= len(summaries) <= 2
    assert {int(k.rsplit("/", 1)[1]) for k in summaries} <= {0, 7}


def test_kinds_of_leaf_and_static_differences():
    a = _entry("a", "p", [["x", "f32[4]", "u"], ["y", "i32[] (weak)", "u"]], [["n", "3"]])
    b = _entry("b", "q", [["x", "f16[4]", "u"], ["y", "i32[]", "u"], ["z", "f32[1]", "u"]],
               [["n", "4"]])
    kinds = {(c["path"], c["kind"]) for c in _ranks_name.summary_diff(a["s"], b["s"])}
    assert kinds == {("x", "dtype"), ("y", "weak_type"), ("z", "pytree_structure"),
                     ("n", "static_argument")}


def test_same_signature_other_program(records):
    other = dataclasses.replace(records[4], program_fingerprint="q")
    fleet = _job({0: [records[4]], 1: [other], 2: [records[4]]})
    for rank in fleet.ranks:
        [div] = rank.reports
        assert div.kind is DivergenceKind.PROGRAM
        assert div.text.startswith("same signature, different program (ranks 0,2 vs rank 1)")
        assert div.ranks == ((0, 2), (1,))


def test_identical_entries_and_unmeasured_ones_are_no_divergence(records):
    fleet = _job({0: [records[4]], 1: [records[4]]})
    assert [r.reports for r in fleet.ranks] == [[], []]
    # a program fingerprint one rank could not read is not a difference
    unread = dataclasses.replace(records[4], program_fingerprint="")
    fleet = _job({0: [records[4]], 1: [unread]})
    assert [r.reports for r in fleet.ranks] == [[], []]


def test_ranks_as_ranges():
    assert _ranks_verdict.encode_ranks([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8"
    assert _ranks_verdict.decode_ranks("0-3,5,7-8", 8) == (0, 1, 2, 3, 5, 7)
    assert _ranks_name.ranks_text([0, 1, 2, 4, 5]) == "ranks 0-2,4,5"
    assert _ranks_name.ranks_text([3]) == "rank 3"


def test_a_straggler_past_the_timeout_is_missing_and_checks_itself(records):
    fleet = _job({0: [records[4]], 1: [records[4]], 2: [records[4]]}, timeout_s=30.0,
                 late={2: 31.0})
    for rank in (0, 1):
        [div] = fleet.ranks[rank].reports
        assert div.kind is DivergenceKind.MISSING and div.missing_ranks == (2,)
    assert fleet.ranks[2].reports == []  # it compiled what the others did, late
    # late and different: it names the difference itself, from the comparer's summary
    fleet = _job({0: [records[4]], 1: [records[4]], 2: [records[5]]}, timeout_s=30.0,
                 late={2: 31.0})
    [div] = fleet.ranks[2].reports
    assert div.text == "batch['x']: f32[4] (ranks 0,1) vs f32[5] (rank 2)"


def test_a_comparer_that_dies_after_it_arrived_is_replaced(records):
    fleet = Fleet(3, 10.0)
    fleet.ranks[0].dies_after_arrival = True
    four, five = (dataclasses.replace(records[n], count=1) for n in (4, 5))
    fleet.compile(0, four, 0.0)
    fleet.compile(1, four, 0.5)
    fleet.compile(2, five, 0.6)
    fleet.run()
    # the survivors still name the difference, after about 2 timeouts and the margin
    for rank in (1, 2):
        [div] = fleet.ranks[rank].reports
        assert div.text == "batch['x']: f32[4] (ranks 0,1) vs f32[5] (rank 2)"
        # the takeover, once the wait for the verdict (2 timeouts and the margin) ran out
        [when] = fleet.ranks[rank].reported_at
        assert 0.5 + 2 * 10.0 + _ranks_arrive.VERDICT_MARGIN_S <= when < 0.6 + 2 * 10.0 + 10.0


def test_traffic_per_compile_is_linear_in_the_rank_count(records):
    costs = {}
    for n in (16, 64):
        fleet = _job({r: [records[4]] * 1 for r in range(n)})
        costs[n] = (fleet.service.calls, fleet.service.bytes)
        assert fleet.service.calls <= 3 * n + 6
        # every rank but the comparer: its entry, its arrival, one read of the verdict;
        # the last to arrive also tells the comparer that everyone did
        calls = sorted(r.stats["calls"] for r in fleet.ranks)
        assert calls[:-2] == [3] * (n - 2) and calls[-2] == 4 and calls[-1] <= 6
        assert max(r.stats["bytes"] for r in fleet.ranks[1:] if r.stats["calls"] == 3) < 400
    assert costs[64][1] < 4 * costs[16][1] * 1.2  # bytes per rank do not grow with N


@pytest.mark.parametrize("fan_in", [64, 4])
def test_two_functions_of_one_name_in_one_file_are_compared_apart(records, fan_in):
    """Two ``jax.jit(lambda ...)`` in one file (or two ``step``s in two ``train.py``):
    counted apart, so both are compile #1; compared apart, so no rank is said to be
    missing or to diverge when every rank compiled both."""
    def of(record, line):
        return dataclasses.replace(record, count=1, function=FunctionInfo(
            "<lambda>", "/job/train.py", line))

    fleet = Fleet(16, 30.0, fan_in)
    for rank in range(16):
        fleet.compile(rank, of(records[4], 10), 100.0 + 0.01 * rank)
        fleet.compile(rank, of(records[5], 20), 100.005 + 0.01 * rank)
    fleet.run()
    assert _said(fleet) == set()
    assert all(r.protocol.unresolved == 0 and not r.protocol.channel.off
               for r in fleet.ranks)


# --- the tree: jobs of more ranks than the fan-in (64 ranks in groups of 4: 3 levels) ----

def _said(fleet: Fleet) -> set[tuple[int, str]]:
    return {(r.rank, d.text) for r in fleet.ranks for d in r.reports}


@pytest.mark.parametrize("case", ["divergent", "dead", "straggler"])
def test_the_tree_reaches_the_flat_checks_verdicts_in_the_same_words(records, case):
    plans = {r: [records[4]] for r in range(64)}
    late = None
    if case == "divergent":
        plans[63] = [records[5]]
    elif case == "dead":
        del plans[63]
    else:
        late = {63: 31.0}
    said = {}
    for fan_in in (64, 4):  # flat, then a tree of 3 levels
        fleet = _job(plans, late=late, fan_in=fan_in) if case != "dead" else _dead_job(
            plans, fan_in)
        said[fan_in] = _said(fleet)
        assert all(r.protocol.unresolved == 0 for r in fleet.ranks if r.rank in plans)
    assert said[4] == said[64]
    expected = {"divergent": "batch['x']: f32[4] (ranks 0-62) vs f32[5] (rank 63)",
                "dead": "rank 63 did not compile",
                "straggler": "rank 63 did not compile"}[case]
    assert len(said[4]) >= 63 and all(expected in text for _, text in said[4])


@pytest.mark.parametrize(("odd", "others"), [(60, "0-59,61-63"), (61, "0-60,62,63"),
                                            (63, "0-62")])
def test_a_tree_names_a_rank_that_differs_wherever_it_arrives_in_its_group(records, odd,
                                                                           others):
    """The first of its group to arrive (its comparer, whose program nobody else wrote
    down), one in the middle, or the last: every rank words the divergence itself, in two
    calls (no summary asked for, no named divergence read)."""
    plans = {r: [records[4]] for r in range(64)}
    plans[odd] = [records[5]]
    fleet = _job(plans, fan_in=4)
    for r in fleet.ranks:
        [div] = r.reports
        assert div.text == f"batch['x']: f32[4] (ranks {others}) vs f32[5] (rank {odd})"
        assert r.protocol.unresolved == 0
    assert not [k for k in fleet.service.data if k.endswith(("/d", "/w")) or "/s/" in k]


def _dead_job(plans: dict[int, list], fan_in: int) -> Fleet:
    fleet = Fleet(64, 30.0, fan_in)
    for rank, plan in plans.items():
        fleet.compile(rank, dataclasses.replace(plan[0], count=1), 100.0 + 0.01 * rank)
    fleet.run()
    return fleet


def _builds_on() -> dict[str, set[str]]:
    """Each cross-rank module's name, and the names of those it imports, directly or not."""
    import ast
    from pathlib import Path

    here = Path(_ranks.__file__).parent
    direct = {}
    for path in here.glob("_ranks*.py"):
        tree = ast.parse(path.read_text())
        direct[path.stem] = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                             and n.level == 1 and n.module and n.module.startswith("_ranks")}
    closure = {}
    for name in direct:
        seen, todo = set(), list(direct[name])
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(direct.get(dep, ()))
        closure[name] = seen
    return closure


def _climbs(run) -> set[tuple[str, str, str]]:
    """(caller, callee, calling function) of each call made while ``run`` runs from one
    cross-rank module into another that builds on it (imports it)."""
    import sys

    builds_on = _builds_on()
    found = set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "").rpartition(".")[2]
        caller = frame.f_back.f_globals.get("__name__", "").rpartition(".")[2]
        # the transport drives the steps: it resumes them, and calls into nothing else
        if caller in builds_on.get(callee, ()) and frame.f_back.f_code.co_name != "drive":
            found.add((caller, callee, frame.f_back.f_code.co_name))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return found


def test_a_compiles_walk_through_the_stages_never_climbs_back(records):
    """Each stage of the check calls only into the modules it builds on: no module calls
    back into one above it, flat or as a tree, whoever compares, dies or comes late."""
    divergent = {r: [records[5 if r == 63 else 4]] for r in range(64)}
    dead = {r: [records[4]] for r in range(63)}

    def jobs() -> None:
        _job({r: [records[5 if r == 7 else 4]] for r in range(8)}, late={5: 31.0})
        _job(divergent, fan_in=4)
        _job(divergent, late={63: 31.0}, fan_in=4)
        _dead_job(dead, 4)

    assert _climbs(jobs) == set()
    # the walk sees a climb: code of the naming stage calling into the verdict's
    below = {"__name__": _ranks_name.__name__, "call": _ranks_verdict.relative_text}
    assert _climbs(lambda: exec("call(['a'])", below)) == {
        ("_ranks_name", "_ranks_verdict", "<module>")}


#: Modules that are no stage: the checker's threads and the channel (every stage calls it).
_NO_STAGE = ("_ranks", "_ranks_transport")
#: The only re-entries of a flat compare's walk, each once at most: the comparer groups
#: what the arriving stage parsed in one call; the verdict publishes what the naming stage
#: named and reports it; a summary made before a wait (the comparer's, for ranks that come
#: late; a rank's, asked for) comes before the naming after it.
_RETURNS_MADE = {("_ranks_arrive", "_ranks_gather"), ("_ranks_name", "_ranks_verdict"),
                 ("_ranks_verdict", "_ranks_name")}


def _walks(run) -> dict[tuple[int, int, str], list[str]]:
    """The stages each rank's steps enter while ``run`` runs simulated jobs, one entry per
    stay, by (job, rank, ``_publish`` or ``_step``: the fleet's call that drives them)."""
    import sys

    walks: dict[tuple[int, int, str], list[str]] = {}
    fleets: dict[int, Fleet] = {}
    seen = set()  # a frame resumed (a step's generator) is no new entry

    def profile(frame, event, arg):
        if event != "call" or frame in seen:
            return
        seen.add(frame)
        module = frame.f_globals.get("__name__", "")
        stage = module.rpartition(".")[2]
        if not module.startswith("otel_jax._fleet._ranks") or stage in _NO_STAGE:
            return
        up = frame.f_back
        while up is not None and up.f_code.co_name not in ("_publish", "_step"):
            up = up.f_back
        if up is not None and "r" in up.f_locals:
            fleets.setdefault(id(up.f_locals["self"]), up.f_locals["self"])  # ids stay apart
            key = (len(fleets) - 1, up.f_locals["r"].rank, up.f_code.co_name)
            walk = walks.setdefault(key, [])
            if not walk or walk[-1] != stage:
                walk.append(stage)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return walks


def test_a_flat_compares_walk_enters_each_stage_once(records):
    """Data flows one way through a flat compare: the verdict decides on plain values and
    hands them to the naming stage, which names both sides in one call. Whoever compares,
    reads, comes late, takes over or is missing, no stage is entered twice but for the
    hand-backs of ``_RETURNS_MADE``, each once."""
    walks = _walks(lambda: _job({0: [records[4]], 1: [records[5]]}))
    assert walks[0, 0, "_step"] == ["_ranks_protocol", "_ranks_gather", "_ranks_arrive",
                                    "_ranks_gather", "_ranks_verdict", "_ranks_name",
                                    "_ranks_verdict"]
    # the other side: its summary, asked for, then the divergence the comparer named
    assert walks[0, 1, "_step"] == ["_ranks_protocol", "_ranks_name", "_ranks_verdict",
                                    "_ranks_name", "_ranks_verdict"]

    def jobs() -> None:
        _job({r: [records[5 if r == 7 else 4]] for r in range(8)}, late={5: 31.0})
        _job({0: [records[4]], 1: [records[4]], 2: [records[5]]}, late={2: 31.0})
        _job({r: [records[4]] for r in range(7)}, late={6: 31.0})
        fleet = Fleet(3, 10.0)
        fleet.ranks[0].dies_after_arrival = True
        for rank, n, when in ((0, 4, 0.0), (1, 4, 0.5), (2, 5, 0.6)):
            fleet.compile(rank, dataclasses.replace(records[n], count=1), when)
        fleet.run()

    for key, walk in [*walks.items(), *_walks(jobs).items()]:
        returns = [(walk[i - 1], m) for i, m in enumerate(walk) if m in walk[:i]]
        assert set(returns) <= _RETURNS_MADE and len(returns) == len(set(returns)), (key, walk)


def test_a_trees_comparer_enters_each_stage_once_per_level(records):
    """Per level of the tree, a comparer goes gather -> arrive -> name: the gathering
    stage calls into the arriving one once (the push into the node, its wait and its
    read, ``TreeArrive._read_node``; at level 0 the group's counter and entries,
    ``_read_group``), which returns the node's counter, entries and the summary sent
    unasked, named by the naming stage on the way (no summary sent: no naming); then
    the verdict, worded by the naming stage (``say``), whichever rank differs."""
    def jobs() -> None:
        for other in (7, 1):
            _job({r: [records[5 if r == other else 4]] for r in range(16)}, fan_in=8)
        _job({0: [records[4]], 1: [records[4]], 2: [records[5]]}, fan_in=2)

    walks = _walks(jobs)
    comparers = [walks[job, 0, "_step"] for job in range(3)]
    level = ["_ranks_gather", "_ranks_arrive", "_ranks_name"]
    climbs = [[*level, *level], [*level, *level], [*level[:2], *level]]  # job 2: agreed
    for walk, climb in zip(comparers, climbs):
        assert walk[:len(climb) + 4] == ["_ranks_protocol", "_ranks_verdict", *climb,
                                         "_ranks_gather", "_ranks_verdict"], walk
    assert [len(w) for w in comparers] == [20, 20, 19], comparers
    # the verdict's root clean-up is the one other call into arriving
    assert [w.count("_ranks_arrive") for w in comparers] == [3, 3, 3], comparers
    # the ranks that only wait: a few stays each, whichever rank differs
    assert max(len(walks[job, r, "_step"]) for job in range(3) for r in (1, 7)
               if (job, r, "_step") in walks) <= 15


def test_a_late_rank_of_a_tree_that_differs_names_the_difference_itself(records):
    plans = {r: [records[4]] for r in range(64)}
    plans[63] = [records[5]]
    fleet = _job(plans, late={63: 31.0}, fan_in=4)
    [div] = fleet.ranks[63].reports
    assert div.text == "batch['x']: f32[4] (ranks 0-62) vs f32[5] (rank 63)"
    [div] = fleet.ranks[0].reports
    assert div.kind is DivergenceKind.MISSING and div.missing_ranks == (63,)


def test_no_rank_of_a_tree_reads_more_entries_than_the_fan_in(records):
    flat = _job({r: [records[4]] for r in range(256)}, fan_in=256)
    tree = _job({r: [records[4]] for r in range(256)}, fan_in=16)
    assert max(r.stats["most_read"] for r in flat.ranks) >= 256  # and its "all"
    # groups of 16 that agree tell their comparer so in their counter: nothing to read
    assert max(r.stats["most_read"] for r in tree.ranks) == 0
    plans = {r: [records[4]] for r in range(256)}
    plans[255] = [records[5]]
    tree = _job(plans, fan_in=16)
    # the entries, "all", and the summary the first rank unlike the ones before it sent
    assert max(r.stats["most_read"] for r in tree.ranks) <= 16 + 2
    assert {d.text for r in tree.ranks for d in r.reports} == {
        "batch['x']: f32[4] (ranks 0-254) vs f32[5] (rank 255)"}
    for r in tree.ranks:
        assert [d.diff for d in r.reports] == [(
            {"path": "batch['x']", "kind": "shape", "before": "f32[4]", "after": "f32[5]"},)]
    # 3 per rank (named in the verdict: no summary asked, no 4th read), a few per group
    assert tree.service.calls <= 3 * 256 + 6 * (256 // 16 + 1)


def test_a_trees_keys_on_the_service_are_a_few_per_node_of_the_last_ordinals(records):
    """Past ``KEEP`` ordinals, with a rank dead from the fourth one on (its groups close
    at their deadline, the verdicts name it missing): what stays on the service is the
    last ``KEEP`` ordinals' counters, verdicts and the comparer's summary, no entry."""
    ordinals = _ranks_gather.KEEP + 6
    plans = {r: [records[4]] * ordinals for r in range(16)}
    plans[15] = plans[15][:3]
    fleet = _job(plans, fan_in=4)  # 4 groups of 4 under one root
    keys = list(fleet.service.data)
    by_ordinal: dict[str, set[str]] = {}
    for key in keys:
        prefix, ordinal, rest = key.split("/", 2)
        assert prefix == _vocab.RankWire.TREE_PREFIX
        by_ordinal.setdefault(ordinal, set()).add(rest)
    assert len(by_ordinal) == _ranks_gather.KEEP
    # the 5 nodes' arrival counters, the verdict, the whole one and a summary for the
    # late; no entry, no "all", no takeover
    assert max(map(len, by_ordinal.values())) <= 8
    assert all(r in {"0", "1", "2", "3", "1.0n", "v", "f"} or r.startswith("s/")
               for rest in by_ordinal.values() for r in rest)


def test_a_middle_levels_comparer_that_dies_is_replaced(records):
    """Rank 0 compares its group of 4 first, pushes the summary up, becomes the comparer
    of level 1 (ranks 0-15) and dies there: a rank below takes level 1 over, once its
    wait for the verdict reached level 1's stage, and every survivor gets the verdict."""
    fleet = Fleet(64, 30.0, 4)
    fleet.ranks[0].dies_at_level = 1
    four = dataclasses.replace(records[4], count=1)
    five = dataclasses.replace(records[5], count=1)
    for rank in range(64):
        fleet.compile(rank, five if rank == 63 else four, 0.01 * rank)
    fleet.run()
    assert fleet.ranks[0].dead
    proto = fleet.ranks[1].protocol
    assert isinstance(proto, _ranks_protocol.TreeProtocol)
    for r in fleet.ranks[1:]:
        [div] = r.reports
        assert div.text == "batch['x']: f32[4] (ranks 0-62) vs f32[5] (rank 63)"
        # after level 0's stage ran out, before level 2's
        assert proto.stage_s(1) <= r.reported_at[0] < proto.stage_s(2)
        assert r.protocol.unresolved == 0


def test_a_group_whose_comparer_died_is_counted_by_a_parent_whose_comparer_came_later(
        records):
    """Four groups of 4 under one root, arriving over 29 s (within the timeout): group 3
    pushes first, so its comparer compares the root; group 2 arrived 14.5 s after it and
    its comparer died, so group 2 reports only when the root's comparer reports it in
    its place, at its deadline (no rank of the group takes it over). The root still
    counts it (no rank of it is said to be missing: they compiled on time), and no rank
    below closes the root before its comparer stopped waiting."""
    fleet = Fleet(16, 30.0, 4)
    fleet.ranks[8].dies_after_arrival = True
    starts = {0: 0.0, 1: 20.0, 2: 15.0, 3: 0.5}
    for rank in range(16):
        when = 29.0 if rank == 3 else starts[rank // 4] + 0.01 * rank
        fleet.compile(rank, dataclasses.replace(records[4], count=1), when)
    fleet.run()
    assert [r.rank for r in fleet.ranks if r.dead] == [8]
    for r in fleet.ranks[:8] + fleet.ranks[9:]:
        assert r.reports == [] and r.protocol.unresolved == 0, r.rank
    # no group taken over by its ranks, no takeover of the root
    assert not [k for k in fleet.service.data if k.rpartition("/")[2].startswith("t")
                or k.endswith("t")]


@pytest.mark.parametrize("program", [4, 5])
def test_a_node_whose_only_group_lost_its_comparer_is_reported_by_a_rank_of_it(records,
                                                                              program):
    """20 ranks in groups of 4: group 4 (ranks 16-19) is the only child of its level-1
    node, so no comparer of that node ever comes. Its rank that takes the node over
    reports the group in its comparer's place: its ranks compiled (none is missing),
    and when they compiled another program (5), the divergence is named as a
    signature's (the group's program learned from a rank of it)."""
    fleet = Fleet(20, 30.0, 4)
    fleet.ranks[16].dies_after_arrival = True
    for rank in range(20):
        record = records[program] if rank >= 16 else records[4]
        fleet.compile(rank, dataclasses.replace(record, count=1),
                      99.0 if rank == 16 else 100.0 + 0.01 * rank)
    fleet.run()
    expected = set() if program == 4 else {
        (r, "batch['x']: f32[4] (ranks 0-15) vs f32[5] (ranks 16-19)")
        for r in range(20) if r != 16}
    assert _said(fleet) == expected
    assert all(r.protocol.unresolved == 0 for r in fleet.ranks if not r.dead)


def test_a_group_of_another_program_whose_comparer_died_is_reported_at_the_deadline(
        records):
    """Ranks 4-7 compiled another program and their comparer (rank 4) died: the root's
    comparer reports the group at its deadline from the group's counter (no entry to
    wait for: its ranks were alike), by the program's digest only, so the verdict does
    not say their signatures are the same."""
    fleet = Fleet(16, 30.0, 4)
    fleet.ranks[4].dies_after_arrival = True
    for rank in range(16):
        record = records[5] if 4 <= rank < 8 else records[4]
        fleet.compile(rank, dataclasses.replace(record, count=1),
                      99.0 if rank == 4 else 100.0 + 0.01 * rank)
    fleet.run()
    text = "different programs (ranks 0-3,8-15 vs ranks 4-7), their signatures not compared"
    assert _said(fleet) == {(r, text) for r in range(16) if r != 4}
    deadline = 100.0 + fleet.ranks[0].protocol.wait_s(1)
    assert max(t for r in fleet.ranks for t in r.reported_at) < deadline + 1.0


def test_no_rank_takes_a_parent_over_while_its_comparer_still_waits(records):
    """Group 3 never compiles; group 1 arrives 20 s after rank 0 and pushes first (group 0
    waits for rank 3 until 29 s, group 2 arrives at 25 s), so its comparer compares the
    root and waits for group 3 until its own deadline. Rank 0, waiting for the verdict
    since 0 s, does not take the root over before that: the verdict is the root's
    comparer's, and says only group 3 is missing."""
    fleet = Fleet(16, 30.0, 4)
    starts = {0: 0.0, 1: 20.0, 2: 25.0}
    for rank in range(12):
        when = 29.0 if rank == 3 else starts[rank // 4] + 0.01 * rank
        fleet.compile(rank, dataclasses.replace(records[4], count=1), when)
    fleet.run()
    assert not [k for k in fleet.service.data if k.endswith(".0t")]  # no root takeover
    proto = fleet.ranks[0].protocol
    assert isinstance(proto, _ranks_protocol.TreeProtocol)
    for r in fleet.ranks[:12]:
        [div] = r.reports
        assert div.missing_ranks == (12, 13, 14, 15)
        assert r.reported_at[0] == pytest.approx(20.04 + proto.wait_s(1), abs=0.1)


def test_missing_ranks_are_named():
    div = _ranks_name.missing("step", 2, [1], [0, 2], 1, 30.0)
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
    assert _coordination.coordination() is None
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
    key_value_increment = blocking_key_value_get = key_value_set


def test_a_service_that_went_away_costs_one_warning_and_stops():
    seen: list = []
    failopen = FailOpen(warn=lambda message, *a, **k: seen.append(message))
    checker = _ranks.Checker(_coordination.Coordination(_Gone(), 0, 2), 1.0, seen.append,
                             failopen)
    for _ in range(5):
        checker.channel.set("publish", "k", "v")
    assert checker.off
    assert len([m for m in seen if "coordination service" in m]) == 1
    before = _Gone.calls
    checker.channel.set("publish", "k", "v")
    assert _Gone.calls == before  # off: no more calls
    assert _Gone.calls == _ranks_transport.MAX_FAILURES
    checker.close(1.0)


def test_a_client_without_the_methods_costs_one_warning(monkeypatch, telemetry):
    monkeypatch.setattr(_coordination, "coordination",
                        lambda: _coordination.Coordination(object(), 0, 2))
    monkeypatch.setattr(ENGINE.cross_rank, "checker", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _failopen.reset_warnings()
        jax.jit(lambda x: x + 7)(jnp.ones(2))
        jax.jit(lambda x: x + 8)(jnp.ones(2))
        otel_jax.flush()  # the compiles reach the cross-rank check off the compiling thread
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


def _batches_compared(records, plans: dict[int, list[int]]) -> dict[int, list[int]]:
    """Two ranks compiling ``plans[rank]`` batch sizes in turn: the ordinals each reports."""
    fleet = _job({r: [records[n] for n in plan] for r, plan in plans.items()}, timeout_s=3.0)
    return {r.rank: [d.count for d in r.reports] for r in fleet.ranks}


def test_an_extra_program_on_one_rank_is_not_reported_at_every_later_ordinal(records):
    # rank 1 compiled 24 once more: the same programs follow, one ordinal apart; once two
    # ordinals in a row show it, no more reports
    assert _batches_compared(records, {0: [32, 16, 8, 4, 2], 1: [32, 24, 16, 8, 4]}) == {
        0: [2, 3], 1: [2, 3]}


def test_a_second_real_divergence_after_a_shift_is_still_reported(records):
    # 8 on rank 0 is a program rank 1 never compiled, one ordinal off or not
    assert _batches_compared(records, {0: [32, 16, 8], 1: [32, 24, 16]}) == {
        0: [2, 3], 1: [2, 3]}


def test_a_tree_tells_a_shifted_ordinal_as_the_flat_check_does(records):
    """Rank 5 of 8 compiles one program more (24): reported at the two ordinals where it
    shows, and its extra last ordinal, where the others are absent, is no missing rank."""
    said = {}
    for fan_in in (8, 2):  # flat, then groups of 2 (3 levels)
        plans = {r: [records[n] for n in ([32, 24, 16, 8, 4] if r == 5 else [32, 16, 8, 4])]
                 for r in range(8)}
        fleet = _job(plans, timeout_s=3.0, fan_in=fan_in)
        said[fan_in] = {(r.rank, d.count, d.text) for r in fleet.ranks for d in r.reports}
        assert {count for _, count, _ in said[fan_in]} == {2, 3}
    assert said[2] == said[8]


class _BlockingService:
    """The coordination service in one process, for the checkers' real threads: blocking
    reads wait on a condition and fail as the client does when their time runs out."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.cond = threading.Condition()

    def key_value_set(self, key, value, allow_overwrite=False):
        with self.cond:
            if not allow_overwrite and key in self.data:
                raise RuntimeError(f"ALREADY_EXISTS: key {key} already exists.")
            self.data[key] = value
            self.cond.notify_all()

    def key_value_increment(self, key, increment):
        with self.cond:
            value = _ranks_transport.counter_sum(self.data.get(key), increment)
            self.data[key] = str(value)
            return value

    def key_value_dir_get(self, prefix):
        with self.cond:
            return sorted((k, v) for k, v in self.data.items() if k.startswith(prefix))

    def key_value_delete(self, key):
        with self.cond:
            for k in [k for k in self.data if k == key or k.startswith(key + "/")]:
                del self.data[k]

    def blocking_key_value_get(self, key, timeout_in_ms):
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.data, timeout_in_ms / 1000):
                raise RuntimeError(f"DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
                                   f"{key} and duration: {timeout_in_ms}ms")
            return self.data[key]


def test_the_threads_settle_a_divergence_and_close_in_bounded_time(records):
    service = _BlockingService()
    reports: dict[int, list] = {0: [], 1: []}
    checkers = {r: _ranks.Checker(_coordination.Coordination(service, r, 2), 2.0,
                                  reports[r].append, FailOpen()) for r in (0, 1)}
    four, five = (dataclasses.replace(records[n], count=1) for n in (4, 5))
    checkers[0].submit(four, None)
    checkers[1].submit(five, None)
    deadline = time.monotonic() + 30
    while not all(c.settled() for c in checkers.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    for r in (0, 1):
        [div] = reports[r]
        assert div.text == "batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)"
    # Rank 0 compiles #2 alone: its settling thread sits in a blocking read of a key no
    # one writes. Closing still returns within its bound, and no warning is given.
    checkers[0].submit(dataclasses.replace(four, count=2), None)
    time.sleep(0.2)
    started = time.monotonic()
    for checker in checkers.values():
        checker.close(1.0)
    assert time.monotonic() - started < 2.5
    assert not any(c.off for c in checkers.values())


def test_the_threads_settle_a_tree_of_three_levels(records):
    """Six ranks in groups of two (3 levels), each with its checker's threads over one
    store with blocking reads: every rank gets the verdict, the divergence is named."""
    service = _BlockingService()
    reports: dict[int, list] = {r: [] for r in range(6)}
    # Every rank is there: the 30 s for a missing peer are never waited, but a busy
    # machine's slow thread is not taken for a missing rank.
    checkers = {r: _ranks.Checker(_coordination.Coordination(service, r, 6), 30.0,
                                  reports[r].append, FailOpen(), fan_in=2) for r in range(6)}
    assert isinstance(checkers[0].protocol, _ranks_protocol.TreeProtocol)
    assert checkers[0].protocol.tree.depth == 3
    four, five = (dataclasses.replace(records[n], count=1) for n in (4, 5))
    for r, checker in checkers.items():
        checker.submit(five if r == 3 else four, None)
    deadline = time.monotonic() + 60
    while not all(c.settled() for c in checkers.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    for r in range(6):
        [div] = reports[r]
        assert div.text == "batch['x']: f32[4] (ranks 0-2,4,5) vs f32[5] (rank 3)"
    for checker in checkers.values():
        checker.close(1.0)
    assert not any(c.off or c.protocol.unresolved for c in checkers.values())


def test_a_blocking_read_that_times_out_is_no_failure():
    service = _BlockingService()
    assert _coordination.kv_wait(service, "never", 10) is None
    service.key_value_set("k", "v")
    assert _coordination.kv_wait(service, "k", 10) == "v"


def test_a_dead_coordinator_through_the_threads_is_one_warning_and_no_hang(records):
    seen: list = []
    failopen = FailOpen(warn=lambda message, *a, **k: seen.append(message))
    checker = _ranks.Checker(_coordination.Coordination(_Gone(), 1, 4), 30.0, seen.append,
                             failopen)
    for n in range(1, 6):
        checker.submit(dataclasses.replace(records[4], count=n), None)
    deadline = time.monotonic() + 10
    while not checker.off and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checker.off
    started = time.monotonic()
    checker.close(1.0)
    assert time.monotonic() - started < 1.5
    assert len([m for m in seen if "coordination service" in str(m)]) == 1


@pytest.mark.parametrize("step", ["publish", "settle"])
def test_an_error_on_one_compile_costs_that_compile_and_one_warning(records, step):
    """The threads go on: the next compile is compared (the peers would otherwise take
    every later compile of this rank for missing)."""
    service = _BlockingService()
    reports: dict[int, list] = {0: [], 1: []}
    seen: list = []
    failopen = FailOpen(warn=lambda message, *a, **k: seen.append(message))
    checkers = {r: _ranks.Checker(_coordination.Coordination(service, r, 2), 30.0,
                                  reports[r].append, failopen if r == 0 else FailOpen())
                for r in (0, 1)}
    protocol = checkers[0].protocol
    original = getattr(protocol, step)

    def failing_once(item):
        if item.count == 1:
            raise RuntimeError("one compile's error")
        return original(item)

    setattr(protocol, step, failing_once)
    # compile #1 of rank 0 alone (no peer waits on it), then #2 on both, diverging
    checkers[0].submit(dataclasses.replace(records[4], count=1), None)
    checkers[0].submit(dataclasses.replace(records[4], count=2), None)
    checkers[1].submit(dataclasses.replace(records[5], count=2), None)
    deadline = time.monotonic() + 60
    while not (all(c.settled() for c in checkers.values()) and all(reports.values())
               ) and time.monotonic() < deadline:
        time.sleep(0.01)
    for checker in checkers.values():
        checker.close(1.0)
    for r in (0, 1):
        assert [d.text for d in reports[r]] == ["batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)"]
    assert len([m for m in seen if "internal error in rank comparison" in str(m)]) == 1
    assert not checkers[0].off


def test_a_long_wait_is_one_read_that_closing_ends_at_once(records):
    """A straggler keeps every other rank waiting: each waits in one read of the verdict
    (the comparer in one read of ``all``), and closing ends those reads at once."""
    service = _BlockingService()
    reads: list[tuple[str, int]] = []
    blocking = service.blocking_key_value_get

    def counted(key, timeout_in_ms):
        reads.append((key, timeout_in_ms))
        return blocking(key, timeout_in_ms)

    service.blocking_key_value_get = counted
    checkers = {r: _ranks.Checker(_coordination.Coordination(service, r, 3), 30.0,
                                  lambda d: None, FailOpen()) for r in (0, 1)}
    four = dataclasses.replace(records[4], count=1)
    checkers[0].submit(four, None)
    time.sleep(0.05)  # rank 0 arrives first: it compares; rank 2 never comes
    checkers[1].submit(four, None)
    verdict = f"/1/{_vocab.RankWire.VERDICT}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (
            len(reads) == 2 and any(key.endswith(verdict) for key, _ in reads)):
        time.sleep(0.01)
    time.sleep(0.3)  # longer than a slice would be: still the same two reads
    started = time.monotonic()
    for checker in checkers.values():
        assert checker.close(1.0)
    assert time.monotonic() - started < 0.5 * _ranks_transport.WAIT_SLICE_S
    # the comparer: one read of ``all``; rank 1: one read of the verdict, for the whole wait
    assert sorted(key.rpartition("/1/")[2] for key, _ in reads) == sorted(
        [f"{_vocab.RankWire.ENTRIES}/{_vocab.RankWire.ALL}", _vocab.RankWire.VERDICT])
    assert all(ms > 1000 * _ranks_transport.WAIT_SLICE_S for _, ms in reads)
    # rank 1 ended its read by creating the verdict as WAKE; a later writer uses the next
    # generation of the key, which a rank that read that WAKE reads next
    assert (service.data[next(k for k in service.data if k.endswith(verdict))]
            == _ranks_transport.WAKE)
    assert not any(c.off for c in checkers.values())


def test_a_rank_that_closes_while_reading_a_verdict_moves_its_peers_to_the_next_key(records):
    """Closing ends this rank's read of a verdict the peers read too, by creating it as
    ``WAKE``; the peers read its next generation, and the comparer writes the verdict
    there: one more read each, and the same verdict on every rank."""
    service = _BlockingService()
    reports: dict[int, list] = {0: [], 1: [], 2: []}
    checkers = {r: _ranks.Checker(_coordination.Coordination(service, r, 4), 3.0,
                                  reports[r].append, FailOpen()) for r in (0, 1, 2)}
    four, five = (dataclasses.replace(records[n], count=1) for n in (4, 5))
    checkers[0].submit(four, None)
    time.sleep(0.05)  # rank 0 compares, and waits for rank 3, which never comes
    checkers[1].submit(four, None)
    checkers[2].submit(five, None)
    arrived = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and arrived is None:
        arrived = next((k for k, v in list(service.data.items())
                        if k.endswith(f"/1/{_vocab.RankWire.ARRIVED}") and v == "3"), None)
        time.sleep(0.01)
    assert arrived is not None
    verdict = arrived.rpartition("/")[0] + "/" + _vocab.RankWire.VERDICT
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(  # ranks 1 and 2 inside their read
            (verdict, _ranks_transport.Read.SHARED) in checkers[r].channel._reading
            for r in (1, 2)):
        time.sleep(0.01)
    assert checkers[1].close(1.0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(reports[0]) == 2 and len(reports[2]) == 2):
        time.sleep(0.05)
    assert service.data[verdict] == _ranks_transport.WAKE
    assert _vocab.RankWire.GROUPS in service.data[_ranks_transport.generation(verdict, 1)]
    for rank in (0, 2):
        kinds = sorted(d.kind.value for d in reports[rank])
        assert kinds == ["missing", "signature"], (rank, reports[rank])
        named = next(d for d in reports[rank] if d.kind is DivergenceKind.SIGNATURE)
        assert named.text.startswith("batch['x']: f32[4] (ranks 0,1) vs f32[5] (rank 2)")
    assert reports[1] == []
    for checker in (checkers[0], checkers[2]):
        assert checker.close(1.0)


def test_a_rank_late_at_every_compile_costs_no_read_more(records):
    """A straggler that is late at every step: every other rank makes the same three
    calls per compile as when all arrive at once (its entry, its arrival, one read)."""
    n = 16
    prompt = _job({r: [records[4]] * 3 for r in range(n)})
    late = _job({r: [records[4]] * 3 for r in range(n)}, late={n - 1: 20.0})
    assert late.service.calls <= prompt.service.calls + 2
    assert sorted(r.stats["calls"] for r in late.ranks)[:n - 2] == [9] * (n - 2)
    assert not any(r.reports for r in late.ranks)
