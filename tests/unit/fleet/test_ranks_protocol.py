"""``_fleet._ranks_protocol``: one rank's steps of the cross-rank check (publish, compare or
read the verdict, report), over a channel on an in-process store."""

from __future__ import annotations

import json
import time

from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import DivergenceKind
from otel_jax._core._vocab import RankWire as W
from otel_jax._fleet._ranks_arrive import CLOSED, Compile
from otel_jax._fleet._ranks_protocol import RankProtocol
from otel_jax._fleet._ranks_transport import Channel
from otel_jax._pipeline._record import Divergence

from .test_ranks_transport import Dict

D = "otel_jax/compiles/f0/1/"


def _ranks(store: Dict, n: int, timeout_s: float = 1.0,
           ) -> tuple[list[RankProtocol], list[list[Divergence]]]:
    reports: list[list[Divergence]] = [[] for _ in range(n)]
    ranks = [RankProtocol(Channel(store, time.monotonic, FailOpen()), r, n, timeout_s,
                          reports[r].append, FailOpen()) for r in range(n)]
    return ranks, reports


def _compile(program: tuple[str, str]) -> Compile:
    return Compile("step", 1, "f0", program, None, None)


def test_publishing_sets_the_entry_counts_the_arrival_and_the_last_tells_the_comparer():
    store = Dict()
    ranks, _ = _ranks(store, 2)
    first, second = _compile(("s", "p")), _compile(("s", "p"))
    assert ranks[1].publish(first) and first.arrival == 1  # the first to arrive compares
    assert f"{D}{W.ENTRIES}/{W.ALL}" not in store.data
    assert ranks[0].publish(second) and second.arrival == 2
    assert store.data[f"{D}{W.ENTRIES}/1"] == "s p"
    assert store.data[f"{D}{W.ENTRIES}/0"] == "s p"
    assert store.data[f"{D}{W.ENTRIES}/{W.ALL}"] == "1"  # the comparer's wait ends


def test_the_comparer_writes_one_verdict_every_rank_reports_from():
    store = Dict()
    ranks, reports = _ranks(store, 3)
    items = [_compile(("s", "p")), _compile(("s", "q")), _compile(("s", "p"))]
    for rank, item in zip(ranks, items):
        assert rank.publish(item)
    for rank, item in zip(ranks, items):  # the comparer (rank 0) first, as it arrived
        rank.channel.drive(rank.settle(item))
    verdict = json.loads(store.data[D + W.VERDICT])
    assert verdict[W.GROUPS] == [["s", "p", "0,2"], ["s", "q", "1"]]
    assert verdict[W.COMPARER] == 0 and verdict[W.KIND] == DivergenceKind.PROGRAM.value
    assert not [k for k in store.data if f"/{W.ENTRIES}/" in k]  # read once, deleted
    for rank, seen in enumerate(reports):
        [div] = seen
        assert div.kind is DivergenceKind.PROGRAM and div.ranks == ((0, 2), (1,))
        assert div.process_index == rank


def test_a_comparer_that_stops_waiting_closes_the_count_and_names_the_missing():
    store = Dict()
    ranks, reports = _ranks(store, 3, timeout_s=0.05)
    items = [_compile(("s", "p")), _compile(("s", "p"))]
    for rank, item in zip(ranks, items):
        assert rank.publish(item)
    for rank, item in zip(ranks, items):
        rank.channel.drive(rank.settle(item))
    assert int(store.data[D + W.ARRIVED]) == 2 + CLOSED  # a later arrival is late
    assert json.loads(store.data[D + W.VERDICT])[W.MISSING] == "2"
    for seen in reports[:2]:
        [div] = seen
        assert div.kind is DivergenceKind.MISSING and div.missing_ranks == (2,)
    # the late rank finds itself out of the verdict: its program is the others', no report
    late = _compile(("s", "p"))
    assert ranks[2].publish(late) and late.arrival == 3 + CLOSED
    assert ranks[2].channel.drive(ranks[2].settle(late)) is None
    assert reports[2] == []


def test_a_comparer_that_never_answers_is_replaced():
    store = Dict()
    ranks, reports = _ranks(store, 2, timeout_s=0.01)
    gone, item = _compile(("s", "p")), _compile(("s", "q"))
    assert ranks[0].publish(gone) and ranks[1].publish(item)  # rank 0 then ends
    item.arrived_at -= 10  # its wait for the verdict ran out
    ranks[1].channel.drive(ranks[1].settle(item))
    assert store.data[D + W.TAKEOVER] == "1"  # the first whose wait ran out compares
    verdict = json.loads(store.data[D + W.VERDICT])
    assert verdict[W.COMPARER] == 1 and verdict[W.KIND] == DivergenceKind.PROGRAM.value
    [div] = reports[1]
    assert div.ranks == ((0,), (1,)) and ranks[1].unresolved == 0
