"""The cross-rank tree: its grouping of ranks, the merge of its summaries, and
what a node's counter and a short verdict carry."""

from __future__ import annotations

import time

import pytest

from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import RankWire as W
from otel_jax._fleet import (
    _ranks_arrive,
    _ranks_gather,
    _ranks_protocol,
    _ranks_transport,
    _ranks_verdict,
)
from otel_jax._fleet._ranks_arrive import Compile, Tree
from otel_jax._fleet._ranks_gather import (
    merge,
    missing_runs,
    normalized,
    parse_summary,
    summary_text,
)
from otel_jax._fleet._ranks_gather import runs_within as parse_runs
from otel_jax._fleet._ranks_protocol import RankProtocol, TreeProtocol
from otel_jax._fleet._ranks_transport import Channel

from .test_ranks_transport import Dict

A, B = ("sigA", "progA"), ("sigB", "progB")


def test_16384_ranks_are_2048_groups_of_8_under_two_levels_of_128():
    tree = Tree(16384, 128)
    assert tree.group == 8 and tree.depth == 3 and tree.widths == [2048, 16, 1]
    assert tree.path(16383) == [(2047, 7), (15, 127), (0, 15)]
    assert tree.path(200) == [(25, 0), (0, 25), (0, 0)]
    assert tree.children(0, 2047) == 8 and tree.children(1, 15) == 128
    assert tree.children(2, 0) == 16
    assert tree.ranks(0, 2047) == (16376, 16383) and tree.ranks(1, 0) == (0, 1023)
    assert tree.ranks(2, 0) == (0, 16383)


def test_a_rank_count_that_does_not_fill_the_last_group():
    tree = Tree(300, 128)
    assert tree.widths == [38, 1]
    assert [tree.children(0, n) for n in (0, 36, 37)] == [8, 8, 4]
    assert tree.ranks(0, 37) == (296, 299) and tree.children(1, 0) == 38


def test_three_levels_and_a_flat_job():
    tree = Tree(64, 4)
    assert tree.group == 4 and tree.widths == [16, 4, 1]
    assert tree.path(63) == [(15, 3), (3, 3), (0, 3)]
    assert tree.ranks(1, 2) == (32, 47)
    assert Tree(8, 128).depth == 1 and Tree(9, 128).depth == 2
    for fan_in in (1, _ranks_arrive.MAX_FAN_IN + 1):  # its counters stay 32-bit integers
        with pytest.raises(ValueError):
            Tree(1024, fan_in)


def test_a_groups_counter_holds_its_presence_bits_a_sum_and_two_closes_in_32_bits():
    """Every rank of a group, all with the largest digest of either sign, then two
    closes (its comparer's and a takeover's): the service still parses the counter, and
    it still reads back as what was added."""
    half = 1 << (_ranks_arrive.GROUP_HASH_BITS - 1)
    for digest in (half - 1, -half):
        stored = None
        for slot in range(_ranks_arrive.GROUP):
            stored = str(_ranks_transport.counter_sum(
                stored, (1 << slot) + (digest << _ranks_arrive.SUM_SHIFT)))
            assert _ranks_arrive.group_value(int(stored)) == (
                0, (1 << slot + 1) - 1, (slot + 1) * digest)
        for closes in (1, 2):
            stored = str(_ranks_transport.counter_sum(stored, _ranks_arrive.GROUP_CLOSED))
            assert _ranks_arrive.group_value(int(stored)) == (
                closes, _ranks_arrive.PRESENCE, _ranks_arrive.GROUP * digest)
    digests = [_ranks_arrive.program_hash((f"sig{i}", "p"), _ranks_arrive.GROUP_HASH_BITS)
               for i in range(1000)]
    assert -half <= min(digests) < 0 <= max(digests) < half


def test_only_jobs_larger_than_the_fan_in_use_the_tree():
    def make(count: int) -> RankProtocol:
        return _ranks_protocol.protocol(Channel(Dict(), time.monotonic, FailOpen()), 0, count,
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
    assert parse_summary("{not json", 0, 10) is None
    assert parse_summary("not one program", 0, 10) is None
    # a node whose ranks all compiled one program: its two fingerprints
    assert summary_text(({A: [(0, 7)]}, [])) == "sigA progA"
    assert parse_summary("sigA progA", 8, 15) == ({A: [(8, 15)]}, [])


def _tree_rank(store: Dict, rank: int, count: int = 16, fan_in: int = 4) -> TreeProtocol:
    proto = _ranks_protocol.protocol(Channel(store, time.monotonic, FailOpen()), rank, count,
                                 30.0, lambda d: None, FailOpen(), fan_in)
    assert isinstance(proto, TreeProtocol)
    return proto


def _item(program: tuple[str, str]) -> Compile:
    item = Compile("step", 1, "f0", program, None, None)
    item.directory = "oj/x/"
    return item


def test_only_a_rank_unlike_one_before_it_writes_an_entry():
    hash_a = _ranks_arrive.program_hash(A, _ranks_arrive.GROUP_HASH_BITS)
    hash_b = _ranks_arrive.program_hash(B, _ranks_arrive.GROUP_HASH_BITS)
    for programs in ([A, A, A, A], [A, A, B, A]):
        store = Dict()
        items = [_item(program) for program in programs]
        for rank, item in enumerate(items):
            assert _tree_rank(store, rank).publish(item)
        assert [item.arrival for item in items] == [1, 2, 3, 4]
        entries = {k: v for k, v in store.data.items() if k.startswith("oj/x/e0/")}
        if programs[2] == A:
            # the last to arrive says the counter shows one program: no entry
            assert entries == {"oj/x/e0/a": W.AGREE}
        else:
            # each with the sum of the digests of the arrivals before it; the last to
            # arrive gives the comparer the counter, which says who arrived
            assert entries == {"oj/x/e0/3": f"2 sigB progB {2 * hash_a}",
                               "oj/x/e0/4": f"3 sigA progA {2 * hash_a + hash_b}",
                               "oj/x/e0/a": store.data["oj/x/0"]}
        # the first to arrive compares the group: from "a", or from the entries
        comparer = _tree_rank(store, 0)
        found = _run(comparer._gather_group(items[0], comparer._node(items[0], 0), 1,
                                            wait=True), store)
        if programs[2] == A:
            assert found == ({A: [(0, 3)]}, [])
        else:
            assert found == ({A: [(0, 1), (3, 3)], B: [(2, 2)]}, [])


def _run(steps, store: Dict):
    """A generator of protocol steps, each wait answered at once from ``store``."""
    value = None
    try:
        while True:
            wait = steps.send(value)
            value = store.data.get(wait.key)
    except StopIteration as done:
        return done.value


def test_a_nodes_counter_stays_a_32_bit_integer_for_any_digests():
    """The service parses a counter as a 32-bit integer before it adds: the arrivals of a
    node of ``MAX_FAN_IN`` children, all with the largest digest of either sign, keep it
    one (an in-process store fails as the service does, past it)."""
    half = 1 << (_ranks_arrive.HASH_BITS - 1)
    for digest in (half - 1, -half):
        stored = None
        for _ in range(_ranks_arrive.MAX_FAN_IN):
            stored = str(_ranks_transport.counter_sum(
                stored, 1 + (digest << _ranks_arrive.COUNT_BITS)))
        assert _ranks_arrive.node_value(int(stored)) == (_ranks_arrive.MAX_FAN_IN,
                                                        _ranks_arrive.MAX_FAN_IN * digest)
    digests = [_ranks_arrive.program_hash((f"sig{i}", "p")) for i in range(1000)]
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


def test_an_entry_counted_before_it_was_written_is_waited_for():
    hash_a = _ranks_arrive.program_hash(A, _ranks_arrive.GROUP_HASH_BITS)
    hash_b = _ranks_arrive.program_hash(B, _ranks_arrive.GROUP_HASH_BITS)
    lacking, base = _ranks_gather.lacking_entry, _ranks_gather.group_base
    entry = _ranks_arrive.GroupEntry
    # arrivals A, A, B, A: entries 3 and 4 (the first two were alike)
    third, fourth = entry(3, 2, B, 2 * hash_a, hash_b), entry(4, 3, A, 2 * hash_a + hash_b, hash_a)
    total = 3 * hash_a + hash_b
    for first_digest in (hash_a, None):  # known to the first arrival, or not
        assert lacking({3: third, 4: fourth}, 4, first_digest, total) is None
        # every one after the first unlike
        assert lacking({3: third}, 4, first_digest, total) == 4
        if total % 4:  # the last one is unlike, if any is
            assert lacking({}, 4, first_digest, total) == 4
    # a group of one program (its first arrival dead, read by its parent's comparer):
    # nothing to wait for
    assert lacking({}, 4, None, 4 * hash_b) is None
    assert lacking({}, 4, hash_a, 4 * hash_a) is None
    # the first arrival knows its digest: the sum before the fourth is not twice it
    assert lacking({4: fourth}, 4, hash_a, total) == 3
    if (2 * hash_a + hash_b) % 3:  # without it, a sum that does not divide by 3 says so
        assert lacking({4: fourth}, 4, None, total) == 3
    # the program of the ranks without an entry: the digest the first unlike one saw
    assert base({3: third, 4: fourth}, B, hash_b, None, total, 4) == A
    assert base({3: third}, B, hash_b, hash_a, total, 4) == _ranks_gather.placeholder(hash_a)
    # a rank of the other side that knows no program with that digest names the digest,
    # and a parent that knows one replaces it
    assert base({3: third}, B, hash_b, None, total, 4) == _ranks_gather.placeholder(hash_a)
    # a group of one program without entries: the sum says which
    assert base({}, B, hash_b, None, 4 * hash_a, 4) == _ranks_gather.placeholder(hash_a)
    assert _ranks_gather.resolved({_ranks_gather.placeholder(hash_a): [(0, 1)], B: [(2, 2)]},
                                (A,)) == {A: [(0, 1)], B: [(2, 2)]}


def test_a_late_arrival_at_a_closed_group_knows_it_is_late():
    store = Dict()
    first, late = _item(A), _item(A)
    assert _tree_rank(store, 0).publish(first) and first.arrival == 1
    store.increment("oj/x/0", _ranks_arrive.GROUP_CLOSED)  # its comparer stopped waiting
    assert _tree_rank(store, 1).publish(late)
    assert late.arrival > _ranks_arrive.CLOSED
    assert "oj/x/e0/a" not in store.data and "oj/x/e0/2" not in store.data


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


def test_a_group_closed_twice_stays_closed():
    """A group's comparer closes it, and so does a rank that takes it over later (its
    verdict was slow: another node's comparer died): a later arrival is still late."""
    store = Dict()
    first, late = _item(A), _item(A)
    assert _tree_rank(store, 0).publish(first) and first.arrival == 1
    for _ in range(2):
        store.increment("oj/x/0", _ranks_arrive.GROUP_CLOSED)
    assert _tree_rank(store, 1).publish(late)
    assert late.arrival > _ranks_arrive.CLOSED
    assert "oj/x/e0/a" not in store.data


def test_a_relative_verdict_is_read_back_as_written_in_a_few_bytes():
    wire = ["16383", "", "0e45262ed", 50, "f32[112,8]", 7, "i32[] (weak)"]
    text = _ranks_verdict.relative_text(wire)
    assert text == "|16383||0e45262ed|50|f32[112,8]|7|i32[] (weak)"
    assert _ranks_verdict._verdict_of(text) == {_ranks_verdict._RELATIVE: wire}
    # a field that holds the mark: JSON, read back the same
    odd = ["16383", "", "0e45262ed", 50, "f32|odd"]
    assert _ranks_verdict._verdict_of(_ranks_verdict.relative_text(odd)) == {
        _ranks_verdict._RELATIVE: odd}
