"""``_fleet._ranks_verdict.Ordinals``: one rank's memory of verdicts, telling a shifted
ordinal from a divergence."""

from __future__ import annotations

from otel_jax._fleet import _ranks_verdict as _ordinals
from otel_jax._fleet._ranks_name import Group
from otel_jax._fleet._ranks_verdict import Ordinals

F = "otel_jax/compiles/abc/"


def program(name: str) -> tuple[str, str]:
    return (f"sig-{name}", f"prog-{name}")


def verdict(ordinals: Ordinals, count: int, programs: dict[int, str]) -> dict[int, tuple]:
    by: dict[tuple, list[int]] = {}
    for rank, name in sorted(programs.items()):
        by.setdefault(program(name), []).append(rank)
    ordinals.remember(F, count, [Group(p, tuple(r)) for p, r in by.items()],
                      program(programs[ordinals.rank]))
    return {rank: program(name) for rank, name in programs.items()}


def test_one_extra_program_on_a_rank_shifts_its_ordinals_after_two_in_a_row():
    """Rank 1 compiled X once more at ordinal 2 (rank 0: A B C D, rank 1: A X B C)."""
    me = Ordinals(rank=0, count=2)
    verdict(me, 1, {0: "A", 1: "A"})
    verdict(me, 2, {0: "B", 1: "X"})
    me.diverged(F, 2)  # reported where it happened
    third = {0: program("C"), 1: program("B")}
    assert me.shifted(F, 3, [1], third) == set()  # and at the next ordinal
    verdict(me, 3, {0: "C", 1: "B"})
    fourth = {0: program("D"), 1: program("C")}
    assert me.shifted(F, 4, [1], fourth) == {1}  # then the same programs one ordinal off


def test_without_an_earlier_divergence_nothing_is_shifted():
    me = Ordinals(rank=0, count=2)
    verdict(me, 1, {0: "A", 1: "A"})
    verdict(me, 2, {0: "B", 1: "A"})
    assert me.shifted(F, 3, [1], {0: program("C"), 1: program("B")}) == set()


def test_memory_is_bounded_in_functions_and_ordinals():
    me = Ordinals(rank=0, count=2)
    for f in range(_ordinals.MAX_FUNCTIONS + 10):
        verdict_of = f"otel_jax/compiles/{f}/"
        me.remember(verdict_of, 1, [Group(program("A"), (0, 1))], program("A"))
    assert len(me._functions) == _ordinals.MAX_FUNCTIONS
    for count in range(1, 3 * _ordinals.MAX_ORDINALS):
        verdict(me, count, {0: "A", 1: "A"})
    assert len(me._functions[F].groups) == _ordinals.MAX_ORDINALS
    # a late rank (in no group) remembers its own program beside the verdict's
    me.remember(F, 500, [Group(program("A"), (1,))], program("Z"))
    assert (program("Z"), "0") in me._functions[F].groups[500]
