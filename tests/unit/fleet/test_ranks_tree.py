"""``_fleet._ranks_tree``: the tree's grouping of ranks, the merge of its summaries, and
what a node's counter and a short verdict carry."""

from __future__ import annotations

import time

import pytest

from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import RankWire as W
from otel_jax._fleet import _ranks_transport, _ranks_tree
from otel_jax._fleet._ranks_protocol import Compile, RankProtocol
from otel_jax._fleet._ranks_transport import Channel
from otel_jax._fleet._ranks_tree import (
    Tree,
    TreeProtocol,
    merge,
    missing_runs,
    normalized,
    parse_runs,
    parse_summary,
    summary_text,
)

from .test_ranks_transport import Dict

A, B = ("sigA", "progA"), ("sigB", "progB")


def test_16384_ranks_are_128_groups_of_128_under_one_root():
    tree = Tree(16384, 128)
    assert tree.depth == 2 and tree.widths == [128, 1]
    assert tree.path(16383) == [(127, 127), (0, 127)]
    assert tree.path(200) == [(1, 72), (0, 1)]
    assert tree.children(0, 127) == 128 and tree.children(1, 0) == 128
    assert tree.ranks(0, 127) == (16256, 16383) and tree.ranks(1, 0) == (0, 16383)


def test_a_rank_count_that_does_not_fill_the_last_group():
    tree = Tree(300, 128)
    assert tree.widths == [3, 1]
    assert [tree.children(0, n) for n in range(3)] == [128, 128, 44]
    assert tree.ranks(0, 2) == (256, 299) and tree.children(1, 0) == 3


def test_three_levels_and_a_flat_job():
    tree = Tree(64, 4)
    assert tree.widths == [16, 4, 1]
    assert tree.path(63) == [(15, 3), (3, 3), (0, 3)]
    assert tree.ranks(1, 2) == (32, 47)
    assert Tree(128, 128).depth == 1 and Tree(129, 128).depth == 2
    for fan_in in (1, _ranks_tree.MAX_FAN_IN + 1):  # its counters stay 32-bit integers
        with pytest.raises(ValueError):
            Tree(1024, fan_in)


def test_only_jobs_larger_than_the_fan_in_use_the_tree():
    def make(count: int) -> RankProtocol:
        return _ranks_tree.protocol(Channel(Dict(), time.monotonic, FailOpen()), 0, count,
                                    30.0, lambda d: None, FailOpen(), 128)

    assert type(make(8)) is RankProtocol and type(make(128)) is RankProtocol
    assert type(make(129)) is TreeProtocol


def test_runs_are_merged_and_their_gaps_are_the_missing_ranks():
    assert normalized([(5, 6), (0, 2), (3, 4), (9, 9)]) == [(0, 6), (9, 9)]
    assert normalized([(0, 3), (5, 6)]) == [(0, 3), (5, 6)]
    assert missing_runs([(0, 6), (9, 9)], 0, 11) == [(7, 8), (10, 11)]
    assert missing_runs([], 4, 7) == [(4, 7)]
    assert missing_runs([(0, 7)], 0, 7) == []
    # a summary names only the ranks of its own node
    assert parse_runs("0-6,8,x,12-20", 4, 15) == [(4, 6), (8, 8), (12, 15)]


def test_a_parent_merges_its_childrens_summaries_without_listing_ranks():
    # children 0-3 (one program), 4-7 (rank 7 another one), 8-11 (rank 9 missing),
    # and 12-15 never reported: its ranks are missing as a whole
    children = [({A: [(0, 3)]}, []), ({A: [(4, 6)], B: [(7, 7)]}, []),
                ({A: [(8, 8), (10, 11)]}, [(9, 9)])]
    groups, missing = merge(children, 0, 15)
    assert groups == {A: [(0, 6), (8, 8), (10, 11)], B: [(7, 7)]}
    assert missing == [(9, 9), (12, 15)]


def test_a_summary_is_a_few_bytes_whatever_its_ranks_and_reads_back():
    text = summary_text(({A: [(0, 16381)], B: [(16383, 16383)]}, [(16382, 16382)]))
    assert len(text) < 80
    assert parse_summary(text, 0, 16383) == ({A: [(0, 16381)], B: [(16383, 16383)]},
                                             [(16382, 16382)])
    assert parse_summary("not json", 0, 10) is None


def _tree_rank(store: Dict, rank: int, count: int = 16, fan_in: int = 4) -> TreeProtocol:
    proto = _ranks_tree.protocol(Channel(store, time.monotonic, FailOpen()), rank, count,
                                 30.0, lambda d: None, FailOpen(), fan_in)
    assert isinstance(proto, TreeProtocol)
    return proto


def _item(program: tuple[str, str]) -> Compile:
    item = Compile("step", 1, "f0", program, None, None)
    item.directory = "oj/x/"
    return item


def test_the_last_to_arrive_at_a_node_says_whether_the_arrivals_agree():
    for programs, said in (([A, A, A, A], W.AGREE), ([A, A, B, A], W.DISAGREE)):
        store = Dict()
        for rank, program in enumerate(programs):
            assert _tree_rank(store, rank).publish(_item(program))
        assert store.data["oj/x/0/a"] == said  # node 0 of level 0: ranks 0-3
        assert store.data["oj/x/0/2"] == f"{programs[2][0]} {programs[2][1]}"


def test_a_nodes_counter_stays_a_32_bit_integer_for_any_digests():
    """The service parses a counter as a 32-bit integer before it adds: the arrivals of a
    node of ``MAX_FAN_IN`` children, all with the largest digest of either sign, keep it
    one (an in-process store fails as the service does, past it)."""
    half = 1 << (_ranks_tree.HASH_BITS - 1)
    for digest in (half - 1, -half):
        stored = None
        for _ in range(_ranks_tree.MAX_FAN_IN):
            stored = str(_ranks_transport.counter_sum(
                stored, 1 + (digest << _ranks_tree.COUNT_BITS)))
        count = int(stored) & ((1 << _ranks_tree.COUNT_BITS) - 1)
        assert count == _ranks_tree.MAX_FAN_IN
    digests = [_ranks_tree.program_hash((f"sig{i}", "p")) for i in range(1000)]
    assert -half <= min(digests) < 0 <= max(digests) < half
    with pytest.raises(RuntimeError, match="FAILED_PRECONDITION"):
        _ranks_transport.counter_sum(str(1 << 31), 1)


def test_every_arrival_at_a_node_is_counted_by_the_service():
    """Each rank's increment succeeds on a store that parses the counter as the service
    does (a second arrival failed while digests sat above bit 14); whether an arrival was
    late, after its comparer read the node, the verdict says (no closed mark)."""
    store = Dict()
    items = [_item(A) for _ in range(4)]
    for rank, item in enumerate(items):
        assert _tree_rank(store, rank).publish(item)
    assert [item.arrival for item in items] == [1, 2, 3, 4]


def test_a_verdict_of_ranks_that_agree_is_a_few_bytes_and_read_back_by_each():
    store = Dict()
    proto = _tree_rank(store, 5)
    item = _item(A)
    everyone = {W.GROUPS: [["sigA", "progA", "0-15"]], W.COMPARER: 0}
    assert proto._wire_verdict(item, everyone) == {}
    missing = {W.GROUPS: [["sigA", "progA", "0-14"]], W.MISSING: "15", W.COMPARER: 0}
    assert proto._wire_verdict(item, missing) == {W.MISSING: "15"}
    assert "oj/x/f" in store.data  # the whole verdict, for a late rank
    [group] = proto._groups(item, {W.MISSING: "15"})
    assert group.program == A and group.ranks == tuple(range(15)) and group.text == "0-14"
    # the missing rank itself does not take the others' program for its own
    assert _tree_rank(store, 15)._groups(item, {W.MISSING: "15"}) == []
    diverged = {W.GROUPS: [["sigA", "progA", "0-14"], ["sigB", "progB", "15"]],
                W.KIND: "signature", W.COMPARER: 0}
    assert proto._wire_verdict(item, diverged) is diverged
