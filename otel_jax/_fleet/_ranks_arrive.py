"""The cross-rank check's first stage, arriving: a compile of this rank, its entry and its
arrival on the counters, where its keys are, and the reads of a tree node's counter,
entries and summaries (gathering drives them).

docs/fleet.md lists the keys and the counters' layouts, flat and in a tree; the layouts
stay within the 32 bits the service parses a counter as (``_ranks_transport.COUNTER_MAX``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from .._capture._signature import Signature
from .._core._failopen import FailOpen
from .._core._portable import function_identity
from .._core._vocab import RankWire as W
from .._pipeline._record import CompileRecord, SpanLink
from ._ranks_name import Program, named_from_sent, summary
from ._ranks_transport import Channel, Read, Run, Wait, dumps

PREFIX = W.PREFIX
#: Beyond the comparer's own deadline, how long a rank waits for the verdict before
#: another rank compares in its place (the comparer may have verdicts queued before).
VERDICT_MARGIN_S = 5.0
#: Added to the arrival counter by a comparer that stops waiting for the others: a rank
#: whose arrival returns more came after the comparer read the entries (it is late).
#: Above any rank count, and twice (a comparer's, a takeover's) plus the ranks still a
#: 32-bit integer: the service parses a counter as one (``COUNTER_MAX``).
CLOSED = 1 << 24
#: The most entries (ranks, or child summaries) one comparer reads per compile.
FAN_IN = 128
#: The most ranks of a group (level 0): one presence bit each in the group's counter.
GROUP = 8
#: A group's counter (docs/fleet.md): presence bits below ``SUM_SHIFT``, the sum of the
#: arrivals' signed ``GROUP_HASH_BITS``-bit digests above them, and ``GROUP_CLOSED`` once
#: per close (three stay below the 2**31 of ``_ranks_transport.COUNTER_MAX``).
SUM_SHIFT = GROUP
GROUP_HASH_BITS = 18
GROUP_CLOSED = 1 << (SUM_SHIFT + GROUP_HASH_BITS + 3)
PRESENCE = (1 << SUM_SHIFT) - 1
#: A node's arrival counter above level 0 (docs/fleet.md): the arrivals in its low
#: ``COUNT_BITS`` bits, the sum of their signed ``HASH_BITS``-bit digests above them
#: (``MAX_FAN_IN`` of the largest, either sign, stay within 32 bits).
COUNT_BITS = 8
HASH_BITS = 17
MAX_FAN_IN = 128
#: Characters kept of the two fingerprints in a tree's entries and verdicts (hex: 36 and
#: 24 bits; every byte is paid once per rank per compile at the service).
SIGNATURE_CHARS = 9
PROGRAM_CHARS = 6


class Compile:
    """One compile of this rank, from its publication to its verdict."""

    __slots__ = ("function", "count", "function_dir", "directory", "program", "signature",
                 "link", "arrival", "arrived_at", "stage", "named")

    def __init__(self, function: str, count: int, function_key: str, program: Program,
                 signature: Signature | None, link: SpanLink | None) -> None:
        self.function = function
        self.count = count
        self.function_dir = f"{PREFIX}/{function_key}/"
        self.directory = f"{self.function_dir}{count}/"
        self.program = program
        self.signature = signature  # kept until settled: its summary is made on request
        self.link = link
        self.arrival = 0  # what the arrival counter returned (1: this rank compares)
        self.arrived_at = 0.0
        self.stage = 0  # the tree: the first level whose verdict it awaits
        #: the tree: [signature fp, other signature fp, changes] named on the way up
        self.named: list[list[Any]] = []


def function_key(identity: str) -> str:
    return hashlib.blake2b(identity.encode("utf-8", "backslashreplace"),
                           digest_size=8).hexdigest()


def parse_entries(found: list[tuple[str, str]], count: int) -> dict[int, Program]:
    """The programs of the entries a directory read found, by rank (those below ``count``;
    a key that names no rank is skipped), all in one call."""
    entries: dict[int, Program] = {}
    for key, value in found:
        try:
            rank = int(key.rpartition("/")[2])
        except ValueError:
            continue
        if 0 <= rank < count:
            fp, _, rest = str(value).partition(" ")
            entries[rank] = fp, rest.partition(" ")[0]
    return entries


def ordinal_directory(function_dir: str, count: int) -> str:
    """The keys of one compile ordinal of one function, in a tree: a digest of both under
    ``TREE_PREFIX``, short since every key of every rank carries it."""
    digest = hashlib.blake2b(f"{function_dir}{count}".encode("utf-8", "backslashreplace"),
                             digest_size=6).digest()
    return f"{W.TREE_PREFIX}/{base64.urlsafe_b64encode(digest).decode('ascii')}/"


def program_hash(program: Program, bits: int = HASH_BITS) -> int:
    """A digest of what a rank compiled, summed by the node counters: a signed
    ``bits``-bit integer (a sum of either sign stays small)."""
    digest = hashlib.blake2b(f"{program[0]} {program[1]}".encode("utf-8", "backslashreplace"),
                             digest_size=4).digest()
    return (int.from_bytes(digest, "big") >> (32 - bits)) - (1 << (bits - 1))


# --- the tree's shape and counters ---------------------------------------------------------

class Tree:
    """Which node of each level a rank belongs to, and what a node holds: groups of
    ``min(fan_in, GROUP)`` ranks at level 0, nodes of ``fan_in`` children above."""

    def __init__(self, count: int, fan_in: int = FAN_IN) -> None:
        if not 2 <= fan_in <= MAX_FAN_IN:
            raise ValueError(f"a tree's fan-in is 2 to {MAX_FAN_IN}")
        self.count = count
        self.fan_in = fan_in
        self.group = min(fan_in, GROUP)
        n = -(-count // self.group)
        self.widths: list[int] = [n]  # nodes per level, up to the root's 1
        while n > 1:
            n = -(-n // fan_in)
            self.widths.append(n)
        self.depth = len(self.widths)

    def _size(self, level: int) -> int:
        return self.group if level == 0 else self.fan_in

    def path(self, rank: int) -> list[tuple[int, int]]:
        """(node, slot in it) at each level, from level 0 to the root."""
        out, index = [], rank
        for level in range(self.depth):
            size = self._size(level)
            out.append((index // size, index % size))
            index //= size
        return out

    def children(self, level: int, node: int) -> int:
        """Entries the node waits for: ranks at level 0, child nodes above."""
        below = self.count if level == 0 else self.widths[level - 1]
        size = self._size(level)
        return max(0, min(size, below - node * size))

    def ranks(self, level: int, node: int) -> Run:
        """The ranks under a node."""
        span = self.group * self.fan_in ** level
        return node * span, min((node + 1) * span, self.count) - 1


class Node(NamedTuple):
    """A node of the tree: where its entries are, how many it waits for, its ranks, and
    how many ranks each child holds."""

    directory: str
    children: int
    lo: int
    hi: int
    span: int
    number: int


#: A node as read: it, whether every child pushed, its children's summaries (``None``: agreed).
NodeRead = tuple[Node, bool, dict[int, str] | None]


class GroupEntry(NamedTuple):
    """A group's entry ``<arrival>``: a rank unlike an arrival before it."""

    arrival: int
    slot: int
    program: Program
    #: the sum of the digests of the arrivals before it
    before: int
    #: its program's digest (``GROUP_HASH_BITS``), made as it is read
    digest: int


def parse_node(found: list[tuple[str, str]], children: int, arrivals: int | None,
               ) -> tuple[dict[int, GroupEntry], dict[int, str], str | None]:
    """A node's entries as a directory read found them, all in one call: at level 0
    (``arrivals``: how many its counter says) each unlike rank's entry by its arrival;
    above, each child's summary by its slot; and the signature summary sent unasked."""
    groups: dict[int, GroupEntry] = {}
    summaries: dict[int, str] = {}
    sent: str | None = None
    for key, raw in found:
        name = key.rpartition("/")[2]
        if name == W.SUMMARIES:
            sent = raw
            continue
        try:
            if arrivals is None:
                if 0 <= int(name) < children:
                    summaries[int(name)] = raw
                continue
            slot, fp, pf, before = str(raw).split(" ")
            entry = GroupEntry(int(name), int(slot), (fp, pf), int(before),
                               program_hash((fp, pf), GROUP_HASH_BITS))
        except ValueError:
            continue
        if 2 <= entry.arrival <= arrivals and 0 <= entry.slot < children:
            groups[entry.arrival] = entry
    return groups, summaries, sent


def group_value(value: int) -> tuple[int, int, int]:
    """A group's counter as (times closed, presence bits, sum of digests)."""
    closes = (value + (GROUP_CLOSED >> 1)) // GROUP_CLOSED
    rest = value - closes * GROUP_CLOSED
    present = rest & PRESENCE
    return closes, present, (rest - present) >> SUM_SHIFT


def node_value(value: int) -> tuple[int, int]:
    """A node's arrival counter above level 0 as (arrivals, sum of their digests)."""
    arrivals = value & ((1 << COUNT_BITS) - 1)
    return arrivals, (value - arrivals) >> COUNT_BITS


# --- one rank's arrival ----------------------------------------------------------------------

class Arrive:
    """This rank's state in the check, and its arrival: the protocols
    (``_ranks_protocol``) set it up; each later stage builds on this one."""

    channel: Channel
    rank: int
    count: int
    timeout_s: float
    clock: Callable[[], float]
    _failopen: FailOpen

    def compile_of(self, record: CompileRecord, link: SpanLink | None) -> Compile:
        # The function as its compiles are counted (``record.count``): two functions of
        # one name in one file (two ``jax.jit(lambda ...)``) are counted apart, so their
        # ordinals must not share keys. The line, not the directory: hosts differ there.
        identity = f"{function_identity(record.function)}:{record.function.line}"
        return Compile(record.function.qualname, record.count, function_key(identity),
                       (record.fingerprint, record.program_fingerprint), record.signature,
                       link)

    def publish(self, item: Compile) -> bool:
        """Set this rank's entry and count its arrival (never waits)."""
        fp, pf = item.program
        channel = self.channel
        if not channel.set("publish", f"{item.directory}{W.ENTRIES}/{self.rank}", f"{fp} {pf}"):
            return False
        arrival = channel.increment("publish", item.directory + W.ARRIVED)
        if arrival is None:
            return False
        item.arrival, item.arrived_at = arrival, self.clock()
        if item.arrival == self.count:  # the last to arrive: the comparer's wait ends
            channel.set("publish", self._all_key(item), "1")
        return True

    @staticmethod
    def _all_key(item: Compile) -> str:
        # beside the entries: deleted with them once read
        return f"{item.directory}{W.ENTRIES}/{W.ALL}"


class TreeArrive(Arrive):
    """This rank's arrival in a job of more ranks than the fan-in: in its group (level 0),
    and as a child summary pushed into a node above."""

    tree: Tree
    #: (node, slot) of this rank at each level (``Tree.path``)
    path: list[tuple[int, int]]

    def compile_of(self, record: CompileRecord, link: SpanLink | None) -> Compile:
        item = super().compile_of(record, link)
        fp, pf = item.program
        item.program = (fp[:SIGNATURE_CHARS], pf[:PROGRAM_CHARS])
        item.directory = ordinal_directory(item.function_dir, item.count)
        return item

    # --- the keys of a node ---------------------------------------------------------------

    def _entries(self, item: Compile, level: int, node: int | None = None) -> str:
        """The directory of the node's entries (and of its ``a`` and ``s``)."""
        node = self.path[level][0] if node is None else node
        if level == 0:
            return f"{item.directory}{W.ENTRIES}{node}"
        return f"{item.directory}{level}.{node}"

    def _node(self, item: Compile, level: int, node: int | None = None) -> Node:
        """This rank's node of ``level`` (or ``node``), as its comparer reads it."""
        node = self.path[level][0] if node is None else node
        tree = self.tree
        lo, hi = tree.ranks(level, node)
        return Node(self._entries(item, level, node), tree.children(level, node), lo, hi,
                    tree.group * tree.fan_in ** (level - 1) if level else 1, node)

    def _counter(self, item: Compile, level: int) -> str:
        """The node's counter: outside its entries' directory, which goes once read."""
        if level == 0:
            return f"{item.directory}{self.path[0][0]}"
        return self._entries(item, level) + W.ARRIVED

    def _takeover(self, item: Compile, level: int) -> str:
        if level == 0:
            return f"{item.directory}{W.TAKEOVER}{self.path[0][0]}"
        return self._entries(item, level) + W.TAKEOVER

    def publish(self, item: Compile) -> bool:
        node, slot = self.path[0]
        fp, pf = item.program
        digest = program_hash(item.program, GROUP_HASH_BITS)
        value = self.channel.increment("publish", self._counter(item, 0),
                                       (1 << slot) + (digest << SUM_SHIFT))
        if value is None:
            return False
        item.arrived_at = self.clock()
        closes, present, total = group_value(value)
        arrival = present.bit_count()
        if closes:
            item.arrival = arrival + CLOSED  # after its group was closed: late
            return True
        item.arrival = arrival
        if total != arrival * digest:
            # Unlike an arrival before it: its entry, with the sum of the digests before
            # it (docs/fleet.md: a rank without one compiled the first's program).
            entries = self._entries(item, 0)
            before = total - digest
            self.channel.set("publish", f"{entries}/{arrival}", f"{slot} {fp} {pf} {before}")
            if arrival > 1 and before % (arrival - 1) == 0 and before // (arrival - 1) != digest:
                # every arrival before this one (if any: a rank that counted one
                # ordinal twice is its own first) compiled one program, and this one
                # another: its summary goes beside the entries, for the comparer
                self._send_summary(item, entries)
        if 1 < arrival == self.tree.children(0, node):
            # the last to arrive wakes the comparer: "a" when the counter says every
            # rank compiled one program, else the counter (which says who arrived)
            self.channel.set("publish", f"{self._entries(item, 0)}/{W.NODE_ALL}",
                             W.AGREE if total == arrival * digest else str(value))
        return True

    def _arrive(self, item: Compile, level: int, text: str, program: Program) -> int | None:
        """Push a node's summary (``text``) into its parent (``level``), counted with a
        digest of ``program``: the parent's arrivals after it (1: this rank compares
        there), or ``None`` when the node had reported already or the call failed."""
        node, slot = self.path[level]
        directory = self._entries(item, level)
        if not self.channel.create("publish", f"{directory}/{slot}", text):
            return None
        children, program_hash_ = self.tree.children(level, node), program_hash(program)
        value = self.channel.increment("publish", directory + W.ARRIVED,
                                       1 + (program_hash_ << COUNT_BITS))
        if value is None:
            return None
        arrival, digests = node_value(value)
        before, total = arrival - 1, digests - program_hash_
        if before and total % before == 0 and total // before != program_hash_:
            # Every arrival before compiled one program, this one another: its summary
            # goes beside the entries, for the comparer to name the difference unasked.
            self._send_summary(item, directory)
        if arrival == children:
            agree = digests == children * program_hash_
            self.channel.set("publish", f"{directory}/{W.NODE_ALL}",
                             W.AGREE if agree else W.DISAGREE)
        return arrival

    def _read(self, item: Compile, at: Node, arrivals: int | None,
              ) -> tuple[dict[int, GroupEntry], dict[int, str]] | None:
        """The node's entries, read once; what differs from the summary sent unasked goes
        into ``item.named``."""
        found = self.channel.dir_get("read", f"{at.directory}/")
        if found is None:
            return None
        groups, summaries, sent = parse_node(found, at.children, arrivals)
        named = None if sent is None else named_from_sent(item.signature, item.program[0], sent)
        if named is not None:
            item.named.append(named)
        return groups, summaries

    def _read_group(self, item: Compile, at: Node, value: int | None,
                    ) -> tuple[int, int, int, dict[int, GroupEntry] | None] | None:
        """(presence bits, sum of digests, own digest, the entries when one differs) of a
        group's counter (``value``, else closed now: a later arrival is late)."""
        if value is None:
            value = self.channel.increment("close", f"{item.directory}{at.number}", GROUP_CLOSED)
        if value is None:
            return None
        _, present, total = group_value(value)
        own = program_hash(item.program, GROUP_HASH_BITS)
        if total == present.bit_count() * own:
            return present, total, own, None
        read = self._read(item, at, present.bit_count())
        return None if read is None else (present, total, own, read[0])

    def _read_node(self, item: Compile, level: int, arrival: int, wait: bool, deadline: float,
                   ) -> Generator[Wait, str | None, NodeRead | None]:
        """A node above level 0, read by its comparer (``wait``: once every child pushed, or
        at ``deadline``) or in the place of one."""
        at = self._node(item, level)
        everyone = wait and arrival >= at.children
        if wait and not everyone:
            every = yield Wait(f"{at.directory}/{W.NODE_ALL}", deadline, Read.OWN)
            if every == W.AGREE:
                return at, True, None  # no entry to read
            everyone = every is not None
        read = self._read(item, at, None)
        return None if read is None else (at, everyone, read[1])

    def _send_summary(self, item: Compile, directory: str) -> None:
        """This rank's signature fingerprint (``x``) and summary (``l``), beside the node's
        entries; the first one sent stands."""
        if item.signature is None or not item.signature.captured:
            return
        self.channel.create("publish", f"{directory}/{W.SUMMARIES}", dumps(
            {W.TEXT: item.program[0], W.LEAVES: summary(item.signature)}))
