"""The cross-rank check at fleet scale: what each compile costs JAX's coordination service.

Drives the real protocol (``otel_jax._fleet._ranks_protocol.RankProtocol`` up to the
fan-in, ``TreeProtocol`` past it: publication, comparison, verdicts,
takeover and clean-up) and its real calls (``_ranks_transport.Channel``) for N = 64 to
16,384 simulated ranks against an in-process key-value store with the coordination
service's semantics, behind the same interface as JAX's client
(``_ranks_transport.Store``: set, create, increment, directory read, directory delete,
blocking read with a timeout), on a simulated clock: a 30 s straggler takes no 30 s.
Each rank settles its compiles one after the other, as its settling thread does (a wait
for a verdict, or for a key only that rank waits for, is one blocking read; a sliced wait
is one read per ``WAIT_SLICE_S`` slice, as the thread reads). Every call and byte (keys
and values, both ways) is counted at the service and per rank, and the checker's CPU per
compile is measured per rank (without the in-process service's own work: in a job, that
is the coordination service's).

The simulation holds no thread and no timer per rank: one event on a heap per step, and a
rank's reports as their kind and text only (each ``Divergence`` of a 16,384-rank job lists
the ranks of each side: kept for every rank at every compile, the lists of one
straggler case took 18 GB).

Cases, each over ``--compiles`` compiles of one function whose signature has
``--leaves`` leaves (real compile records of a real jit, otel_jax installed):

- ``all``: every rank compiles within 1 s;
- ``straggler 20 s``: one rank compiles 20 s after the others (within the default
  30 s timeout: nothing to report, one longer wait);
- ``straggler 30 s``: one rank compiles 30 s after the others (at the default timeout:
  it is reported missing, arrives after the verdict and checks itself against it);
- ``dead``: one rank never compiles (reported missing after the timeout);
- ``divergent``: one rank compiles another shape (named with paths and both values);
- ``comparer dies``: the first rank to arrive dies before its verdict (another takes over).

    python benchmarks/fleet_scale.py               # N = 64 .. 1,024
    python benchmarks/fleet_scale.py --quick       # N = 64 and 256
    python benchmarks/fleet_scale.py --ranks 16384 --compiles 2   # the tree at scale
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import heapq
import itertools
import math
import random
import resource
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import DivergenceKind
from otel_jax._core._vocab import RankWire as W
from otel_jax._fleet import _ranks, _ranks_arrive, _ranks_protocol, _ranks_transport
from otel_jax._pipeline._record import CompileRecord, Divergence

# --- the coordination service, in one process ------------------------------------------


class Service:
    """The coordination service's key-value store, with its semantics: a key set is read
    by blocking reads waiting for it; deleting ``k`` deletes ``k/...`` too; increments
    count from 0; directory reads list ``prefix...`` in key order."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.data: dict[str, str] = {}
        # the reads waiting for each key, by id: a read that times out leaves in O(1)
        self._waiting: dict[str, dict[int, Callable[[str], None]]] = {}
        self.calls = 0
        self.bytes = 0
        self.peak_keys = 0
        #: CPU spent inside the service (in a job: the coordination service's, in rank 0's
        #: process), not counted as the calling rank's
        self.cpu_s = 0.0

    def count(self, n_bytes: int) -> None:
        self.calls += 1
        self.bytes += n_bytes

    def set(self, key: str, value: str) -> None:
        started = time.thread_time()
        self.data[key] = value
        self.peak_keys = max(self.peak_keys, len(self.data))
        for wake in list(self._waiting.pop(key, {}).values()):
            wake(value)  # answers each blocked read (the service's work)
        self.cpu_s += time.thread_time() - started

    def delete(self, key: str) -> None:
        started = time.thread_time()
        directory = key.rstrip("/") + "/"
        for k in [k for k in self.data if k == key or k.startswith(directory)]:
            del self.data[k]
        self.cpu_s += time.thread_time() - started

    def dir_get(self, prefix: str) -> list[tuple[str, str]]:
        started = time.thread_time()
        found = sorted((k, v) for k, v in self.data.items() if k.startswith(prefix))
        self.cpu_s += time.thread_time() - started
        return found

    def wait(self, key: str, wake: Callable[[str], None]) -> None:
        self._waiting.setdefault(key, {})[id(wake)] = wake

    def forget(self, key: str, wake: Callable[[str], None]) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.pop(id(wake), None)
            if not waiting:
                del self._waiting[key]


class Store:
    """One rank's calls on the service (a ``_ranks_transport.Store``), counted."""

    def __init__(self, service: Service, stats: dict[str, int]) -> None:
        self.service = service
        self.stats = stats

    def _count(self, n_bytes: int) -> None:
        self.service.count(n_bytes)
        self.stats["calls"] += 1
        self.stats["bytes"] += n_bytes

    def set(self, key: str, value: str) -> None:
        self._count(len(key) + len(value))
        self.service.set(key, value)

    def create(self, key: str, value: str) -> bool:
        self._count(len(key) + len(value))
        if key in self.service.data:
            return False
        self.service.set(key, value)
        return True

    def increment(self, key: str, by: int) -> int:
        self._count(len(key) + 8)
        value = _ranks_transport.counter_sum(self.service.data.get(key), by)
        self.service.set(key, str(value))
        self.stats["bytes"] += len(str(value))
        self.service.bytes += len(str(value))
        return value

    def dir_get(self, directory: str) -> list[tuple[str, str]]:
        found = self.service.dir_get(directory)
        self._count(len(directory) + sum(len(k) + len(v) for k, v in found))
        self.stats["most_read"] = max(self.stats["most_read"], len(found))
        return found

    def delete(self, key: str) -> None:
        self._count(len(key))
        self.service.delete(key)

    def wait(self, key: str, timeout_ms: int) -> str | None:
        """A read answered at once: the simulated clock does not move inside a call (the
        protocol's waits, ``Wait`` steps, are driven by the fleet: ``Fleet._wait``)."""
        value = self.service.data.get(key)
        self._count(len(key) + len(value or ""))
        return value


# --- the fleet: ranks on a simulated clock ------------------------------------------------


class Said(NamedTuple):
    """What a rank reported, without the ranks (in a job of 16,384 ranks, each report
    lists them: kept for every simulated rank, they would be the simulation's memory)."""

    kind: DivergenceKind
    text: str


class Rank:
    """One simulated rank: its own protocol and store, and no thread (the fleet drives its
    steps on the simulated clock)."""

    __slots__ = ("stats", "store", "reports", "reported_at", "protocol", "rank", "pending",
                 "steps", "item", "cpu_s", "cpu_by_compile", "compare_cpu_s", "compared",
                 "dies_after_arrival", "dies_at_level", "dead")

    def __init__(self, fleet: Fleet, rank: int, timeout_s: float) -> None:
        self.stats = {"calls": 0, "bytes": 0, "most_read": 0}  # most_read: one dir_get
        self.store = Store(fleet.service, self.stats)
        self.reports: list[Divergence | Said] = []
        self.reported_at: list[float] = []  # on the simulated clock
        keep = fleet.keep_reports

        def report(div: Divergence) -> None:
            self.reports.append(div if keep else Said(div.kind, div.text))
            self.reported_at.append(fleet.now)

        failopen = FailOpen()
        channel = _ranks_transport.Channel(self.store, lambda: fleet.now, failopen)
        self.protocol = _ranks_protocol.protocol(channel, rank, fleet.n, timeout_s, report,
                                             failopen, fleet.fan_in)
        self.rank = rank
        self.pending: deque[_ranks_arrive.Compile] = deque()
        self.steps: Any = None  # the protocol steps of the compile being settled
        self.item: _ranks_arrive.Compile | None = None
        self.cpu_s = 0.0
        self.cpu_by_compile: dict[int, float] = {}  # the checker's CPU per ordinal
        self.compare_cpu_s = 0.0  # of compiles this rank compared
        self.compared = 0
        self.dies_after_arrival = False
        #: dies when it is about to wait, as a node's comparer, for the node's entries at
        #: this level of the tree (1: a middle level's comparer dies)
        self.dies_at_level: int | None = None
        self.dead = False

    def spent(self, count: int, seconds: float) -> None:
        self.cpu_s += seconds
        self.cpu_by_compile[count] = self.cpu_by_compile.get(count, 0.0) + seconds


class Fleet:
    """N ranks of one job, each with its own protocol and store, on one simulated clock."""

    def __init__(self, n: int, timeout_s: float = _ranks.DEFAULT_TIMEOUT_S,
                 fan_in: int = _ranks_arrive.FAN_IN, keep_reports: bool = True) -> None:
        self.n = n
        self.fan_in = fan_in
        self.keep_reports = keep_reports
        self.now = 0.0
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.service = Service(lambda: self.now)
        self.ranks = [Rank(self, r, timeout_s) for r in range(n)]

    def at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), fn))

    def compile(self, rank: int, record: CompileRecord, when: float) -> None:
        """``rank`` compiles ``record`` at ``when``: its publishing thread publishes at once."""
        self.at(when, lambda: self._publish(self.ranks[rank], record))

    def run(self) -> None:
        while self._events:
            when, _, fn = heapq.heappop(self._events)
            self.now = max(self.now, when)
            fn()

    def _publish(self, r: Rank, record: CompileRecord) -> None:
        if r.dead:
            return
        started, service = time.thread_time(), self.service.cpu_s
        item = r.protocol.compile_of(record, None)
        published = r.protocol.publish(item)
        r.spent(item.count, time.thread_time() - started - (self.service.cpu_s - service))
        if not published:
            return
        if r.dies_after_arrival and item.arrival == 1:
            r.dead = True  # arrived first, then died: it never writes the verdict
            return
        r.pending.append(item)
        if r.steps is None:
            self._next(r)

    def _next(self, r: Rank) -> None:
        if r.dead or not r.pending:
            r.steps = r.item = None
            return
        r.item = r.pending.popleft()
        r.steps = r.protocol.settle(r.item)
        self._step(r, None)

    def _step(self, r: Rank, value: str | None) -> None:
        item = r.item
        assert item is not None
        started, service = time.thread_time(), self.service.cpu_s
        try:
            wait = r.steps.send(value)
        except StopIteration:
            wait = None
        spent = time.thread_time() - started - (self.service.cpu_s - service)
        r.spent(item.count, spent)
        if item.arrival == 1:
            r.compare_cpu_s += spent
        if wait is None:
            if item.arrival == 1:
                r.compared += 1
            self._next(r)
            return
        self._wait(r, wait)

    def _wait(self, r: Rank, wait: _ranks_transport.Wait) -> None:
        """A wait: answered when the key is set, or ``None`` at the deadline. The checker's
        threads read an own or shared key in one call, a sliced one in slices of
        ``WAIT_SLICE_S`` (bounded exit), each one call."""
        done = [False]
        started = self.now
        if r.dies_at_level is not None and _level_of(wait.key) == r.dies_at_level:
            r.dead = True  # a comparer of that level dies before its node's verdict
            return

        def wake(value: str | None) -> None:
            if done[0]:
                return
            done[0] = True
            self.service.forget(wait.key, wake)
            slices = 1 if wait.read is not _ranks_transport.Read.SLICED else max(
                1, math.ceil((self.now - started) / _ranks_transport.WAIT_SLICE_S))
            for _ in range(slices - 1):  # the reads that timed out
                r.store._count(len(wait.key))
            r.store._count(len(wait.key) + len(value or ""))
            self.at(self.now, lambda: self._step(r, value))

        if wait.key in self.service.data:
            wake(self.service.data[wait.key])
            return
        self.service.wait(wait.key, wake)
        self.at(max(wait.deadline, self.now), lambda: wake(None))


def _level_of(key: str) -> int | None:
    """The level of the tree whose node's ``all`` key this is (``<level>.<node>/a``, or
    ``e<node>/a`` at level 0), or ``None`` for another key."""
    node, _, last = key.rpartition("/")
    if last != W.NODE_ALL or not node.startswith(W.TREE_PREFIX + "/"):
        return None
    name = node.rpartition("/")[2]
    level, dot, _ = name.partition(".")
    if dot:
        return int(level)
    return 0 if name.startswith(W.ENTRIES) else None


# --- records of a real compile ----------------------------------------------------------


def real_records(leaves: int) -> dict[str, CompileRecord]:
    """Compile records of a real jit of a ``leaves``-leaf parameter tree (otel_jax
    installed): ``same`` for every rank, ``other`` with one leaf of another shape."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import otel_jax
    from otel_jax.testing import record_compiles

    otel_jax.install(log_output=None)

    def step(params, batch):
        return sum(jnp.sum(p) for p in jax.tree_util.tree_leaves(params)) + jnp.sum(
            batch["x"])

    jitted = jax.jit(step)
    params = {f"layer{i // 4}": {f"w{i % 4}": np.ones((4, 3), np.float32)}
              for i in range(leaves - 1)}
    with record_compiles() as recorded:
        jitted(params, {"x": np.ones((12, 8), np.float32)})
        jitted(params, {"x": np.ones((112, 8), np.float32)})
    otel_jax.uninstall()
    same, other = list(recorded)[:2]
    # What a job would carry: a program fingerprint (one process leaves it out).
    same = dataclasses.replace(same, count=1, program_fingerprint="a" * 32)
    other = dataclasses.replace(other, count=1, program_fingerprint="b" * 32)
    return {"same": same, "other": other}


# --- the cases ----------------------------------------------------------------------------


def run_case(n: int, case: str, records: dict[str, CompileRecord], compiles: int,
             seed: int = 0, fan_in: int = _ranks_arrive.FAN_IN) -> dict[str, Any]:
    """One job of ``n`` ranks compiling ``compiles`` ordinals of one function."""
    rng = random.Random(seed)
    fleet = Fleet(n, fan_in=fan_in, keep_reports=False)
    odd = n - 1  # the straggler, the dead rank, the divergent rank
    if case == "comparer dies":
        # the rank that arrives first at the first compile dies right after it arrived
        fleet.ranks[0].dies_after_arrival = True
    # one compile every 5 simulated minutes: the cases do not overlap, and each compile's
    # calls (a takeover's too, 65 s after it) fall between its marks
    period = 300.0
    marks: list[int] = []  # the service's calls before each compile

    for c in range(1, compiles + 1):
        base = (c - 1) * period
        fleet.at(base - period / 2, lambda: marks.append(fleet.service.calls))
        for r in range(n):
            if case == "dead" and r == odd:
                continue
            record = records["other" if case == "divergent" and r == odd else "same"]
            record = dataclasses.replace(record, count=c)
            when = base + (0.0 if case == "comparer dies" and r == 0 else
                           0.001 + rng.random())
            if case.startswith("straggler") and r == odd:
                when = base + float(case.split()[1]) + rng.random()
            fleet.compile(r, record, when)
    # The collector runs between cases, not inside one: its pauses belong to the whole
    # simulated fleet (1,024 checkers in one process), not to the rank it interrupts.
    gc.collect()
    gc.disable()
    try:
        fleet.run()
    finally:
        gc.enable()
    alive = [r for r in fleet.ranks if not r.dead and not (case == "dead" and r.rank == odd)]
    comparers = [r for r in alive if r.compared]
    waiters = [r for r in alive if not r.compared]
    reports = sorted({(d.kind.value, d.text) for r in alive for d in r.reports})
    per_rank_bytes = [r.stats["bytes"] / compiles for r in alive]
    per_rank_calls = [r.stats["calls"] / compiles for r in alive]
    return {
        "n": n, "case": case,
        "service_bytes": fleet.service.bytes / compiles,
        "service_calls": fleet.service.calls / compiles,
        # a rank that kept everyone waiting at the last compile asks for delivery at the
        # next one: the last compile shows what a job pays from then on
        "last_calls": fleet.service.calls - marks[-1],
        # the calls of the costliest compile (a comparer died at it, or a rank missed it)
        "max_calls": max(b - a for a, b in zip(marks, [*marks[1:], fleet.service.calls])),
        "rank_bytes_max": max(per_rank_bytes), "rank_bytes_median":
            statistics.median(per_rank_bytes),
        "rank_calls_max": max(per_rank_calls),
        "cpu_wait_ms": 1000 * _p99([r.cpu_s for r in waiters]) / compiles,
        "cpu_compare_ms": 1000 * max(((r.compare_cpu_s / r.compared) for r in comparers),
                                     default=0.0),
        # the most CPU any one rank spent on one compile
        "cpu_max_ms": 1000 * max((max(r.cpu_by_compile.values(), default=0.0)
                                  for r in fleet.ranks), default=0.0),
        "cpu_max_rank": max(fleet.ranks, key=lambda r: max(r.cpu_by_compile.values(),
                                                           default=0.0)).rank,
        # what stays on the service after the case (the counters and verdicts of the
        # last ordinals, until the ordinal KEEP compiles later deletes them), and the
        # most keys it held at once
        "keys_left": len(fleet.service.data),
        "bytes_left": sum(len(k) + len(v) for k, v in fleet.service.data.items()),
        "peak_keys": fleet.service.peak_keys,
        "reports": reports,
        "reported_by": sum(1 for r in alive if r.reports),
        "alive": len(alive),
    }


def _p99(values: list[float]) -> float:
    """The 99th percentile (the largest below 100 values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


CASES = ("all", "straggler 20 s", "straggler 30 s", "dead", "divergent", "comparer dies")


def peak_mb() -> float:
    """This process's peak resident memory so far (the simulation's own, all cases)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 64 and 256 only")
    parser.add_argument("--ranks", type=int, nargs="*", default=None)
    parser.add_argument("--leaves", type=int, default=200)
    parser.add_argument("--compiles", type=int, default=3)
    parser.add_argument("--fan-in", type=int, default=_ranks_arrive.FAN_IN,
                        help="ranks (or child groups) one comparer reads")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    args = parser.parse_args(argv)
    sizes = args.ranks or ([64, 256] if args.quick else [64, 128, 256, 512, 1024])
    records = real_records(args.leaves)
    print(f"per compile, {args.leaves}-leaf signature, mean over {args.compiles} compiles, "
          f"fan-in {args.fan_in}; bytes are keys and values both ways.\n"
          "calls/N, B/rank: all calls and bytes at the coordination service, per rank; "
          "last/N, max/N: the calls of the last compile, of the costliest one; B max and "
          "rank calls: the most of any rank.\nCPU is the checker's own (thread time, without the service's): the "
          "99th percentile of the ranks that only publish and wait, and the most any one "
          "rank spent on one compile (and that rank). keys: the most keys the service held at "
          "once, and the keys (and KB) left on it after the case. peak MB: the simulation's "
          "own peak memory so far.")
    header = (f"{'N':>5} {'case':<15} {'service KB':>10} {'calls':>7} {'calls/N':>7} "
              f"{'last/N':>6} {'max/N':>6} {'B/rank':>6} {'B max':>7} {'rank calls':>10} "
              f"{'cpu p99 ms':>10} {'cpu max ms':>10} {'(rank)':>8} {'keys':>6} "
              f"{'left':>5} {'KB':>5} {'peak MB':>7} {'wall s':>6}  "
              "reported")
    print(header)
    for n in sizes:
        for case in args.cases:
            started = time.monotonic()
            res = run_case(n, case, records, args.compiles, fan_in=args.fan_in)
            said = "; ".join(f"[{k}] {t[:70]}" for k, t in res["reports"]) or "-"
            print(f"{n:>5} {case:<15} {res['service_bytes'] / 1000:>10.1f} "
                  f"{res['service_calls']:>7.0f} {res['service_calls'] / n:>7.2f} "
                  f"{res['last_calls'] / n:>6.2f} {res['max_calls'] / n:>6.2f} "
                  f"{res['service_bytes'] / n:>6.0f} "
                  f"{res['rank_bytes_max']:>7.0f} {res['rank_calls_max']:>10.1f} "
                  f"{res['cpu_wait_ms']:>10.3f} {res['cpu_max_ms']:>10.2f} "
                  f"{res['cpu_max_rank']:>8} {res['peak_keys']:>6} {res['keys_left']:>5} "
                  f"{res['bytes_left'] / 1000:>5.1f} "
                  f"{peak_mb():>7.0f} {time.monotonic() - started:>6.1f}  "
                  f"{res['reported_by']}/{res['alive']} ranks: {said}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
