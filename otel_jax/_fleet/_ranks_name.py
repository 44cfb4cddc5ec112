"""The cross-rank check's last stage, naming: what a rank says of a divergence (ranks as
ranges and JSON values, the forms every stage shares, are ``_ranks_transport``'s).

A signature summary (bounded, JSON) is published only when a comparer asks for one, and
the difference between two summaries is named here, from their text (a summary is what
a peer process could send: no avals, no pytrees), in one call (``named_pair``). The
keys and fields are named in ``_vocab.RankWire``. Nothing here calls the service: the
stages before (``_ranks_arrive``, ``_ranks_gather``, ``_ranks_verdict``) hand it what
they read.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._capture._signature import Signature
from .._core._portable import placement_text, tree_digest
from .._core._scrub import without_digests
from .._core._text import safe_repr
from .._core._vocab import ABSENT, CauseKind, DiffKey, DivergenceKind
from .._core._vocab import RankWire as W
from .._pipeline._record import Divergence
from ._ranks_transport import as_runs, loads

#: Bounds of the signature summary a rank publishes when asked.
MAX_LEAVES = 256
MAX_STATICS = 64
TEXT_LIMIT = 200
#: Changes of a named divergence every rank reads (the comparer's report keeps them all).
MAX_NAMED_DIFF = 16

Program = tuple[str, str]  # (signature fingerprint, program fingerprint); "" unknown


# --- summaries and their differences ----------------------------------------------------

def _text(value: Any) -> str:
    """Bounded text, without the per-process digests of scrubbed values (as fingerprinted)."""
    text = safe_repr(value, TEXT_LIMIT) if not isinstance(value, str) else value[:TEXT_LIMIT]
    return without_digests(text)


def leaf_texts(signature: Signature) -> list[tuple[str, str]]:
    """The (path, type) of the leaves a summary carries, in its words."""
    n = min(signature.num_leaves, MAX_LEAVES)
    return [(_text(signature.paths[i]), _text(signature.types[i])) for i in range(n)]


def summary(signature: Signature) -> dict[str, Any]:
    """What a peer needs to name the differences: bounded, JSON-serialisable."""
    if not signature.captured:
        return {}
    n = min(signature.num_leaves, MAX_LEAVES)
    paths, types, placements = signature.paths, signature.types, signature.placements
    leaves = [[_text(paths[i]), _text(types[i]),
               placement_text(placements[i])] for i in range(n)]
    statics = []
    for static in signature.statics[:MAX_STATICS]:
        value = f"<{static.type}>" if static.identity_hashed else static.repr
        statics.append([_text(static.name), _text(value)])
    return {
        W.LEAVES: leaves,
        W.NUM_LEAVES: signature.num_leaves,
        W.STATICS: statics,
        W.OPTIONS: [[name, _text(text)] for name, text in signature.options],
        W.CONTEXT: [[name, _text(value)] for name, value in signature.context],
        W.TREE: tree_digest(signature.treedef).hex()[:16],
    }


def leaf_kind(before: str, after: str) -> CauseKind:
    """The kind of change between two leaves' types (either way round)."""
    if before.partition("[")[0] != after.partition("[")[0]:
        return CauseKind.DTYPE
    if before.replace(" (weak)", "") == after.replace(" (weak)", ""):
        return CauseKind.WEAK_TYPE
    return CauseKind.SHAPE


def summary_diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, str]]:
    """Changes between two ranks' summaries: ``before`` is ``a``'s text, ``after`` ``b``'s."""
    changes: list[dict[str, str]] = []

    def add(path: str, kind: CauseKind, before: str, after: str) -> None:
        changes.append({DiffKey.PATH: path, DiffKey.KIND: kind.value,
                        DiffKey.BEFORE: before, DiffKey.AFTER: after})

    def pairs(key: str) -> tuple[dict[str, str], dict[str, str]]:
        return ({str(k): str(v) for k, v in a.get(key, ())},
                {str(k): str(v) for k, v in b.get(key, ())})

    for key, kind in ((W.OPTIONS, CauseKind.JIT_OPTIONS),
                      (W.CONTEXT, CauseKind.TRACING_CONTEXT),
                      (W.STATICS, CauseKind.STATIC_ARGUMENT)):
        x, y = pairs(key)
        for name in [*x, *(k for k in y if k not in x)]:
            if x.get(name) != y.get(name):
                add(name, kind, x.get(name, ABSENT), y.get(name, ABSENT))
    leaves_a = {str(p): (str(t), str(pl)) for p, t, pl in a.get(W.LEAVES, ())}
    leaves_b = {str(p): (str(t), str(pl)) for p, t, pl in b.get(W.LEAVES, ())}
    structure: list[tuple[str, str, str]] = []
    for path in [*leaves_a, *(p for p in leaves_b if p not in leaves_a)]:
        la, lb = leaves_a.get(path), leaves_b.get(path)
        if la is None or lb is None:
            structure.append((path, la[0] if la else ABSENT, lb[0] if lb else ABSENT))
        elif la[0] != lb[0]:
            add(path, leaf_kind(la[0], lb[0]), la[0], lb[0])
        elif la[1] != lb[1]:
            add(path, CauseKind.SHARDING, la[1], lb[1])
    for path, before, after in structure:
        add(path, CauseKind.PYTREE_STRUCTURE, before, after)
    if not structure and a.get(W.TREE) != b.get(W.TREE):
        add("<pytree>", CauseKind.PYTREE_STRUCTURE, f"structure {a.get(W.TREE)}",
            f"structure {b.get(W.TREE)}")
    if not changes and a.get(W.NUM_LEAVES) != b.get(W.NUM_LEAVES):
        add("<leaves>", CauseKind.PYTREE_STRUCTURE, f"{a.get(W.NUM_LEAVES)} leaves",
            f"{b.get(W.NUM_LEAVES)} leaves")
    return changes


# --- ranks as text ------------------------------------------------------------------------

def ranks_text(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ",".join(str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}"
                               for a, b in as_runs(ranks))


def missing(function: str, count: int, present: Sequence[int], absent: Sequence[int],
            me: int, timeout_s: float) -> Divergence:
    text = (f"{ranks_text(absent)} did not compile {function} #{count} within "
            f"{timeout_s:g} s of {ranks_text(present)}")
    return Divergence(function, count, DivergenceKind.MISSING, text, (tuple(present),),
                      tuple(absent), (), me, time.time())


def program_text(first: Group, second: Group) -> str:
    if not (first.program[0] and second.program[0]):
        # a side's signature is unknown (not captured, or a group known by its digest
        # only, ``_ranks_gather.placeholder``): not said to be the same
        return (f"different programs ({ranks_text(first.ranks)} vs "
                f"{ranks_text(second.ranks)}), their signatures not compared")
    return (f"same signature, different program ({ranks_text(first.ranks)} vs "
            f"{ranks_text(second.ranks)}): the function traced differently (iteration "
            "order of a set or dict, a host-dependent value, another checkout)")


#: One side of a divergence as the comparer holds it: its own signature (or the summary
#: made of it), or what a peer published (``None``: nothing came).
Side = Signature | dict[str, Any] | str | None
#: A signature divergence as the verdict stage hands it on: named already (text and
#: changes), or the comparer's two sides, to name (``named_pair``).
Named = dict[str, Any] | list[Side] | None


class Said(NamedTuple):
    """What the verdict stage decided, from this rank's side, as plain values: the groups
    of the verdict, the two a divergence names (``pair``, of a ``DivergenceKind`` value
    ``kind``), and the ranks absent."""

    function: str
    ordinal: int
    rank: int
    timeout_s: float
    groups: list[Group]
    pair: tuple[Group, Group] | None
    kind: Any
    named: Named
    absent: Sequence[int]


def say(what: Said) -> tuple[dict[str, Any] | None, list[Divergence]]:
    """Every divergence of ``what`` in words, in the order they are reported, named in
    one call; and the signature divergence this rank named (``None``: it named none)."""
    said: list[Divergence] = []
    named, groups = what.named, what.groups
    sides = tuple(g.ranks for g in groups)
    if isinstance(named, list) and what.pair is not None:
        named = named_pair(named, *what.pair, what.timeout_s)
    elif isinstance(named, dict) and W.TEXT not in named and what.pair is not None:
        # a tree's verdict names the changes only, as lists: each rank words them
        rows = [dict(zip(DIFF_FIELDS, map(str, d))) for d in named.get(W.DIFF) or ()
                if isinstance(d, list) and len(d) == len(DIFF_FIELDS)]
        named = {W.TEXT: named_text(rows, *(g.ranks for g in what.pair)), W.DIFF: rows}
    mine = named if isinstance(what.named, list) and isinstance(named, dict) else None
    if what.pair is not None:
        first, second = what.pair
        if what.kind == DivergenceKind.SIGNATURE.value:
            found = named if isinstance(named, dict) else {}
            diff = tuple(d for d in found.get(W.DIFF) or () if isinstance(d, dict))
            text = str(found.get(W.TEXT) or (
                f"different signatures ({ranks_text(first.ranks)} vs "
                f"{ranks_text(second.ranks)}); the comparing rank named no paths"))
            said.append(Divergence(what.function, what.ordinal, DivergenceKind.SIGNATURE,
                                   text, sides, (), diff, what.rank, time.time()))
        else:
            said.append(Divergence(what.function, what.ordinal, DivergenceKind.PROGRAM,
                                   program_text(first, second), sides, (), (),
                                   what.rank, time.time()))
    if what.absent:
        present = (groups[0].ranks if len(groups) == 1
                   else tuple(sorted(itertools.chain.from_iterable(sides))))
        said.append(missing(what.function, what.ordinal, present, what.absent, what.rank,
                            what.timeout_s))
    return mine, said


def named_pair(sides: Sequence[Side], first: Group, second: Group,
               timeout_s: float) -> dict[str, Any]:
    """The divergence between two sides (``first``'s and ``second``'s), named in one call:
    its text and its changes (``W.TEXT``, ``W.DIFF``)."""
    a, b = (summary(s) if isinstance(s, Signature) else loads(s) if isinstance(s, str)
            else s for s in sides)
    if a is None or b is None:
        return {W.TEXT: (f"different signatures ({ranks_text(first.ranks)} vs "
                         f"{ranks_text(second.ranks)}); the summary of one side did not "
                         f"arrive within {timeout_s:g} s"), W.DIFF: []}
    diff = summary_diff(a, b)
    return {W.TEXT: named_text(diff, first.ranks, second.ranks), W.DIFF: diff}


def named_text(diff: Sequence[dict[str, str]], first: Sequence[int],
                second: Sequence[int]) -> str:
    if not diff:
        return (f"different signatures ({ranks_text(first)} vs {ranks_text(second)}), "
                f"beyond the first {MAX_LEAVES} leaves compared")
    top = diff[0]
    text = (f"{top[DiffKey.PATH]}: {top[DiffKey.BEFORE]} ({ranks_text(first)}) vs "
            f"{top[DiffKey.AFTER]} ({ranks_text(second)})")
    return text + (f" (+{len(diff) - 1} more)" if len(diff) > 1 else "")


class Group(NamedTuple):
    program: Program
    ranks: tuple[int, ...]
    text: str = ""  # the ranks as ranges, as the verdict carried them


# --- differences named on the way, and in each rank's words --------------------------------

#: A change of a named divergence in a tree's verdict: a list of these, in this order.
DIFF_FIELDS = (DiffKey.PATH, DiffKey.KIND, DiffKey.BEFORE, DiffKey.AFTER)


def named_from_sent(signature: Signature | None, mine: str, raw: str) -> list[Any] | None:
    """``[this rank's signature fp, the sender's, the changes]`` between this rank's
    signature (``mine``: its fingerprint) and a summary another rank sent unasked."""
    sent = loads(raw) or {}
    theirs, their_summary = sent.get(W.TEXT), sent.get(W.LEAVES)
    if (not isinstance(theirs, str) or not isinstance(their_summary, dict) or not theirs
            or not mine or theirs == mine or signature is None):
        return None
    diff = summary_diff(summary(signature), their_summary)
    return [mine, theirs, diff[:MAX_NAMED_DIFF]]


def known_diff(named: list[list[Any]], first: Group, second: Group,
               ) -> list[dict[str, str]] | None:
    """The changes from ``first``'s signature to ``second``'s among the pairs named on
    the tree's way up (``named``), or ``None`` (the comparer asks for both summaries)."""
    a, b = first.program[0], second.program[0]
    for x, y, diff in named:
        if (x, y) == (a, b):
            return list(diff)
        if (x, y) == (b, a):
            return [{**d, DiffKey.BEFORE: d.get(DiffKey.AFTER, ""),
                     DiffKey.AFTER: d.get(DiffKey.BEFORE, "")} for d in diff]
    return None


def worded(signature: Signature | None, changes: list[Any]) -> list[dict[str, str]] | None:
    """The changes of a relative verdict in this rank's words (``before``: its own type),
    or ``None`` when its signature does not have the leaves they name."""
    if signature is None or not signature.captured or len(changes) % 2:
        return None
    leaves = leaf_texts(signature)
    diff: list[dict[str, str]] = []
    for index, other in zip(changes[::2], changes[1::2]):
        if not isinstance(index, int) or not 0 <= index < len(leaves):
            return None
        path, own = leaves[index]
        other = str(other)
        diff.append({DiffKey.PATH: path, DiffKey.KIND: leaf_kind(own, other).value,
                     DiffKey.BEFORE: own, DiffKey.AFTER: other})
    return diff
