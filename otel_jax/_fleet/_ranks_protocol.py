"""The cross-rank check's protocol: who compares, what a verdict is, and what each rank
reports from it, over JAX's own coordination service (docs/fleet.md: the keys, the calls
each rank makes, the tree past ``FAN_IN`` ranks, and what happens when a rank dies).

A rank that arrives after the verdict was written (later than ``timeout_s``) finds
itself among the missing ranks; it compares its own fingerprints with the groups
of the verdict, and names a difference from the comparer's summary (published when
ranks were missing). A comparer that never answers (it ended, or died after it
arrived) is replaced: the first rank whose wait for the verdict ran out
(``key_value_increment`` of ``t`` returned 1) compares in its place.

A rank that compiles one program more than the others is reported where it happened
and at the next ordinal only (``_ranks_verdict.Ordinals``). The comparer deletes the
entries it read, and the keys of the ordinal ``KEEP`` compiles back.

Four stages, one module each, each building on the one before and never calling back
into it: arriving (``_ranks_arrive``), gathering (``_ranks_gather``), the verdict
(``_ranks_verdict``) and naming (``_ranks_name``); this module drives them in that
order. The steps are generators that yield the key they wait for and its deadline (a
``_ranks_transport.Wait``); every other call goes through the
``_ranks_transport.Channel`` over a ``Store``. The checker's threads (``_ranks``) and
``benchmarks/fleet_scale.py`` (simulated ranks, over its in-process store) drive them.
"""

from __future__ import annotations

from typing import Any

from .._core._failopen import FailOpen
from .._core._vocab import RankWire as W
from ._ranks_arrive import FAN_IN, VERDICT_MARGIN_S, Compile, Tree
from ._ranks_name import Named, summary
from ._ranks_transport import Channel, Read, Wait, loads
from ._ranks_verdict import _RELATIVE, Ordinals, Outcome, Reporter, Steps, TreeVerdict, Verdict


class RankProtocol(Verdict):
    """This rank's steps of the check: publish a compile, then settle it with its peers
    (compare, or read the verdict), over ``channel`` (one per process)."""

    def __init__(self, channel: Channel, rank: int, count: int, timeout_s: float,
                 report: Reporter, failopen: FailOpen) -> None:
        self.channel = channel
        self.rank = rank
        self.count = count
        self.timeout_s = timeout_s
        self.clock = channel.clock
        self._report = report
        self._failopen = failopen
        self.unresolved = 0  # compiles no verdict came for (no comparer, even a second)
        self._ordinals = Ordinals(self.rank, self.count)

    def settle(self, item: Compile) -> Steps:
        """The verdict of a published compile: compare (the first to arrive) or read it,
        then report what this rank sees. Returns the first divergence reported."""
        named: Named = None
        verdict: dict[str, Any] | None = None
        if item.arrival == 1:
            verdict, named = yield from self._judge(item, wait=True)
        else:
            # One read of the verdict, however long the wait (a straggler, a dead rank):
            # every rank reads the same key, the service answers them all when it is set.
            # A late rank (after the comparer stopped waiting) reads it too.
            final = item.arrived_at + 2 * self.timeout_s + VERDICT_MARGIN_S
            shared = item.directory + W.VERDICT
            raw = yield Wait(shared, final, Read.SHARED)
            if raw is None and not self.channel.off:
                # No verdict: the comparer ended or died after it arrived. The first
                # rank here compares in its place; the others wait for that verdict.
                took = self.channel.increment("takeover", item.directory + W.TAKEOVER)
                if took == 1:
                    verdict, named = yield from self._judge(item, wait=False)
                elif took is not None:
                    again = self.clock() + self.timeout_s + VERDICT_MARGIN_S
                    raw = yield Wait(shared, again, Read.SHARED)
            if verdict is None and raw is not None:
                verdict = loads(raw)
                self._answer(item, verdict)
        if verdict is None:
            if not self.channel.off:
                self.unresolved += 1
            return None
        return (yield from self._conclude(item, verdict, named))

    def _answer(self, item: Compile, verdict: dict[str, Any] | None) -> None:
        """The summary the comparer asked this rank for (``W.WANTED``), published first."""
        if (verdict is not None and self.rank in (verdict.get(W.WANTED) or ())
                and item.signature is not None):
            self._set(f"{item.directory}{W.SUMMARIES}/{self.rank}", summary(item.signature))

    def _judge(self, item: Compile, wait: bool) -> Outcome:
        """Compare (``Gather._compare``), then decide and publish the verdict."""
        compared = yield from self._compare(item, wait)
        if compared is None:
            return None, None
        own = item.signature  # this rank's side (``Verdict._decide``)
        mine = (own if not compared[1] else summary(own)) if own is not None else {}
        return (yield from self._decide(item, *compared, mine))


class TreeProtocol(TreeVerdict, RankProtocol):
    """This rank's steps of the check in a job of more ranks than the fan-in."""

    def __init__(self, channel: Channel, rank: int, count: int, timeout_s: float,
                 report: Reporter, failopen: FailOpen, fan_in: int = FAN_IN) -> None:
        super().__init__(channel, rank, count, timeout_s, report, failopen)
        self.tree = Tree(count, fan_in)
        self.path = self.tree.path(rank)
        self._read_entries = False

    def settle(self, item: Compile) -> Steps:
        verdict: dict[str, Any] | None = None
        named: Named = None
        item.stage = 0
        if item.arrival == 1:
            verdict, named = yield from self._judge_tree(item, 0, item.arrival, wait=True)
        if verdict is None:
            verdict, named = yield from self._await(item)
        if verdict is not None and _RELATIVE in verdict:
            verdict, named = yield from self._relative(item, verdict[_RELATIVE])
        if verdict is None:
            if not self.channel.off:
                self.unresolved += 1
            return None
        self._answer(item, verdict)
        return (yield from self._conclude(item, verdict, named))


def protocol(channel: Channel, rank: int, count: int, timeout_s: float, report: Reporter,
             failopen: FailOpen, fan_in: int = FAN_IN) -> RankProtocol:
    """The protocol of a job of ``count`` ranks: flat up to ``fan_in``, a tree past it."""
    if count <= fan_in:
        return RankProtocol(channel, rank, count, timeout_s, report, failopen)
    return TreeProtocol(channel, rank, count, timeout_s, report, failopen, fan_in)
