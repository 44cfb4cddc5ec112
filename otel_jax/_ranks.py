"""Multi-process jobs: tell when ranks compile different programs for the same call.

Each compile of a user function in a job of several processes publishes a
compact entry on JAX's own coordination service (the key-value store of the
distributed runtime client ``jax.distributed.initialize`` started; no new
server, no new dependency), keyed by the function's identity
(``_fingerprint.function_identity``, the same on every host) and its compile
ordinal (``record.count``)::

    otel_jax/compiles/<function digest>/<count>/<rank> -> {"fp", "pf", "s": summary}
    otel_jax/compiles/<function digest>/done/<rank>    -> the highest count published

``fp`` is the signature fingerprint, ``pf`` the program fingerprint and ``s`` a
bounded summary of the signature (leaf paths, types and placements, static
values, jit options, tracing context, a digest of the pytree structure) from
which the differences are named: ``batch['x']: f32[4] (rank 0) vs f32[5] (rank 1)``.

Nothing here blocks the user's call (unless ``on_divergence="raise"``): the
compiling thread appends the record to a bounded queue, and one daemon thread
publishes the entry and polls the same directory for the peers' entries. A peer
whose entry differs is reported as soon as it is seen; ranks that have not
published theirs ``timeout_s`` after this rank did are reported as missing; a
late peer is still compared when its entry arrives during a grace period of
another ``timeout_s``. Then this rank deletes its own entry: at most
``MAX_OPEN`` entries per rank live on the service at once. A rank whose entry was
deleted before a late peer arrived is not missing to that peer: its ``done`` mark says
it compiled that ordinal. A rank that compiles one program more than the others (a
partial batch on one rank) is reported where it happened and at the next ordinal; once
two ordinals in a row show the same programs one ordinal apart, the following ones are
not reported again. When this rank stops (``uninstall()``, exit)
it still publishes what is queued, and leaves the entries its peers may not have read
(they go with the job's coordination service).

With ``on_divergence="raise"`` the compiling thread publishes and waits, at
most ``timeout_s``, for the peers' entries, and raises :class:`DivergenceError`
from the diverging jit call, on every rank that sees the divergence; ranks that
never arrive end the wait with a report, never a hang.

A coordination service that fails (a dead coordinator, a JAX without the
client methods) costs one warning, and the check is off for the rest of the run.
"""

from __future__ import annotations

import atexit
import fnmatch
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from . import _fingerprint, _jax_read
from ._diff import ABSENT
from ._failopen import FailOpen
from ._record import CompileRecord, Divergence, SpanLink
from ._scrub import without_digests
from ._signature import Signature
from ._text import safe_repr
from ._vocab import CauseKind, DiffKey, DivergenceKind

PREFIX = "otel_jax/compiles"
#: Entries of this rank that live on the coordination service at once.
MAX_OPEN = 256
#: Compiles waiting to be published; past this they are not compared (and counted).
QUEUE_SIZE = 1024
#: How often the daemon thread looks for peers' entries.
POLL_S = 0.2
#: Entries read per round, oldest first (a rank far ahead of its peers costs no more).
MAX_POLLS = 32
#: How often the compiling thread looks while it waits (``on_divergence="raise"``).
WAIT_POLL_S = 0.02
#: How long a divergence seen before every rank arrived waits for the others' entries.
GATHER_S = 1.0
#: Bounds of the signature summary an entry carries.
MAX_LEAVES = 256
MAX_STATICS = 64
TEXT_LIMIT = 200
#: The key, beside a function's ordinals, under which each rank keeps its highest one.
DONE = "done"
#: Programs remembered per function and rank, and functions remembered, to tell a
#: shifted ordinal from a divergence.
MAX_ORDINALS = 64
MAX_FUNCTIONS = 1024
#: Consecutive failures of the coordination service after which the check stops.
MAX_FAILURES = 3
DEFAULT_TIMEOUT_S = 30.0
ON_DIVERGENCE = ("log", "raise", "off")

Reporter = Callable[[Divergence], None]


class DivergenceError(RuntimeError):
    """Ranks compiled different programs for the same call (``on_divergence="raise"``)."""

    def __init__(self, divergence: Divergence) -> None:
        self.divergence = divergence
        super().__init__(
            f"{divergence.function}: the ranks of this job diverge at compile "
            f"#{divergence.count} ({divergence.kind.value}): {divergence.text}. Every rank "
            "must compile the same program for the same call, or the next collective hangs.")


# --- entries ------------------------------------------------------------------------

def _function_key(identity: str) -> str:
    return hashlib.blake2b(identity.encode("utf-8", "backslashreplace"),
                           digest_size=8).hexdigest()


def _text(value: Any) -> str:
    """Bounded text, without the per-process digests of scrubbed values (as fingerprinted)."""
    text = safe_repr(value, TEXT_LIMIT) if not isinstance(value, str) else value[:TEXT_LIMIT]
    return without_digests(text)


def summary(signature: Signature) -> dict[str, Any]:
    """What a peer needs to name the differences: bounded, JSON-serialisable."""
    if not signature.captured:
        return {}
    n = min(signature.num_leaves, MAX_LEAVES)
    paths, types, placements = signature.paths, signature.types, signature.placements
    leaves = [[_text(paths[i]), _text(types[i]),
               _fingerprint._placement_text(placements[i])] for i in range(n)]
    statics = []
    for static in signature.statics[:MAX_STATICS]:
        value = f"<{static.type}>" if static.identity_hashed else static.repr
        statics.append([_text(static.name), _text(value)])
    return {
        "l": leaves,
        "n": signature.num_leaves,
        "st": statics,
        "o": [[name, _text(text)] for name, text in signature.options],
        "c": [[name, _text(value)] for name, value in signature.context],
        "t": _fingerprint._tree_digest(signature.treedef).hex()[:16],
    }


def entry_of(record: CompileRecord, rank: int) -> dict[str, Any]:
    return {"r": rank, "fp": record.fingerprint, "pf": record.program_fingerprint,
            "s": summary(record.signature)}


def _leaf_kind(before: str, after: str) -> CauseKind:
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

    for key, kind in (("o", CauseKind.JIT_OPTIONS), ("c", CauseKind.TRACING_CONTEXT),
                      ("st", CauseKind.STATIC_ARGUMENT)):
        x, y = pairs(key)
        for name in [*x, *(k for k in y if k not in x)]:
            if x.get(name) != y.get(name):
                add(name, kind, x.get(name, ABSENT), y.get(name, ABSENT))
    leaves_a = {str(p): (str(t), str(pl)) for p, t, pl in a.get("l", ())}
    leaves_b = {str(p): (str(t), str(pl)) for p, t, pl in b.get("l", ())}
    structure: list[tuple[str, str, str]] = []
    for path in [*leaves_a, *(p for p in leaves_b if p not in leaves_a)]:
        la, lb = leaves_a.get(path), leaves_b.get(path)
        if la is None or lb is None:
            structure.append((path, la[0] if la else ABSENT, lb[0] if lb else ABSENT))
        elif la[0] != lb[0]:
            add(path, _leaf_kind(la[0], lb[0]), la[0], lb[0])
        elif la[1] != lb[1]:
            add(path, CauseKind.SHARDING, la[1], lb[1])
    for path, before, after in structure:
        add(path, CauseKind.PYTREE_STRUCTURE, before, after)
    if not structure and a.get("t") != b.get("t"):
        add("<pytree>", CauseKind.PYTREE_STRUCTURE, f"structure {a.get('t')}",
            f"structure {b.get('t')}")
    if not changes and a.get("n") != b.get("n"):
        add("<leaves>", CauseKind.PYTREE_STRUCTURE, f"{a.get('n')} leaves", f"{b.get('n')} leaves")
    return changes


def _ranks_text(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ",".join(map(str, ranks))


def compare(function: str, count: int, entries: dict[int, dict[str, Any]], me: int,
            ) -> Divergence | None:
    """The divergence among the entries present, from rank ``me``'s point of view, if any."""
    groups: dict[tuple[str, str], list[int]] = {}
    for rank in sorted(entries):
        e = entries[rank]
        groups.setdefault((str(e.get("fp") or ""), str(e.get("pf") or "")), []).append(rank)
    if len(groups) < 2:
        return None
    keys = list(groups)
    # Entries that cannot be told apart (a fingerprint left empty on one side) are not a
    # divergence: only a difference both sides measured is.
    mine = next(k for k in keys if me in groups[k]) if any(me in g for g in groups.values()) \
        else keys[0]
    others = [k for k in keys if k != mine and _differ(mine, k)]
    if not others:
        return None
    other = min(others, key=lambda k: groups[k][0])
    first, second = sorted((mine, other), key=lambda k: groups[k][0])
    ra, rb = groups[first], groups[second]
    sides = tuple(tuple(groups[k]) for k in sorted([mine, *others], key=lambda k: groups[k][0]))
    if first[0] and second[0] and first[0] != second[0]:
        diff = summary_diff(entries[ra[0]].get("s") or {}, entries[rb[0]].get("s") or {})
        kind = DivergenceKind.SIGNATURE
        if diff:
            top = diff[0]
            text = (f"{top[DiffKey.PATH]}: {top[DiffKey.BEFORE]} ({_ranks_text(ra)}) vs "
                    f"{top[DiffKey.AFTER]} ({_ranks_text(rb)})")
            if len(diff) > 1:
                text += f" (+{len(diff) - 1} more)"
        else:
            text = (f"different signatures ({_ranks_text(ra)} vs {_ranks_text(rb)}), beyond "
                    f"the first {MAX_LEAVES} leaves compared")
    else:
        diff = []
        kind = DivergenceKind.PROGRAM
        text = (f"same signature, different program ({_ranks_text(ra)} vs {_ranks_text(rb)}): "
                "the function traced differently (iteration order of a set or dict, a "
                "host-dependent value, another checkout)")
    return Divergence(function, count, kind, text, sides, (), tuple(diff), me, time.time())


def _same(a: tuple[str, str] | None, b: tuple[str, str] | None) -> bool:
    """Two compiles known to be of one program (signature fingerprints set and equal)."""
    return a is not None and b is not None and bool(a[0]) and a[0] == b[0] and not _differ(a, b)


def _differ(a: tuple[str, str], b: tuple[str, str]) -> bool:
    if a[0] and b[0] and a[0] != b[0]:
        return True
    return bool(a[1] and b[1] and a[1] != b[1])


def missing(function: str, count: int, present: Sequence[int], absent: Sequence[int],
            me: int, timeout_s: float) -> Divergence:
    text = (f"{_ranks_text(absent)} did not compile {function} #{count} within "
            f"{timeout_s:g} s of {_ranks_text(present)}")
    return Divergence(function, count, DivergenceKind.MISSING, text, (tuple(present),),
                      tuple(absent), (), me, time.time())


# --- the checker ----------------------------------------------------------------------

class _Open:
    """One entry of this rank on the service, and what was reported about it."""

    __slots__ = ("function", "count", "directory", "function_dir", "published", "link",
                 "reported", "settled", "entries", "busy", "diverged")

    def __init__(self, function: str, count: int, function_dir: str, link: SpanLink | None,
                 ) -> None:
        self.function = function
        self.count = count
        self.function_dir = function_dir  # ``.../<function digest>/``
        self.directory = f"{function_dir}{count}/"
        self.published = time.monotonic()
        self.link = link
        self.reported: set[DivergenceKind] = set()
        self.settled: float | None = None  # when every rank was seen or the timeout passed
        self.entries: dict[int, dict[str, Any]] = {}
        self.busy = False  # the compiling thread is waiting on it (on_divergence="raise")
        self.diverged: float | None = None  # when a divergence was first seen


class _Seen:
    """What one rank saw of one function: per rank, the program (fingerprints) of each
    compile ordinal, its own included, and the first ordinal reported divergent. A rank
    that compiled one program more than another compiles the same programs under
    shifted ordinals afterwards; this rank's highest ordinal is its ``done`` mark."""

    __slots__ = ("programs", "diverged")

    def __init__(self) -> None:
        self.programs: dict[int, dict[int, tuple[str, str]]] = {}
        self.diverged: int | None = None


class Checker:
    """Publishes this rank's compiles and compares them with its peers' (one per process)."""

    def __init__(self, coordination: _jax_read.Coordination, timeout_s: float,
                 report: Reporter, failopen: FailOpen) -> None:
        self.client = coordination.client
        self.rank = coordination.process_index
        self.count = coordination.process_count
        self.timeout_s = timeout_s
        self._report = report
        self._failopen = failopen
        self._queue: deque[tuple[CompileRecord, SpanLink | None]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._open: dict[str, _Open] = {}  # by directory, oldest first
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failures = 0
        self.dropped = 0
        self.off = False
        self._unpublished = 0  # queued, or taken off the queue and not yet published
        #: What was seen of each function (by directory), the most recent last.
        self._functions: dict[str, _Seen] = {}

    # --- the compiling thread ------------------------------------------------------

    def submit(self, record: CompileRecord, link: SpanLink | None) -> None:
        """Queue a compile for comparison; never blocks."""
        with self._cond:
            if self._closed or self.off:
                return
            if len(self._queue) >= QUEUE_SIZE:
                self.dropped += 1
                return
            self._queue.append((record, link))
            self._unpublished += 1
            self._cond.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="otel_jax-ranks",
                                                daemon=True)
                self._thread.start()

    def check_now(self, record: CompileRecord, link: SpanLink | None) -> Divergence | None:
        """Publish and wait, at most ``timeout_s``, for every peer's entry: the divergence
        found (reported), or ``None``. For ``on_divergence="raise"``."""
        if self.off:
            return None
        # busy: the daemon thread leaves the entry alone while this thread waits on it
        opened = self._publish(record, link, busy=True)
        if opened is None:
            return None
        deadline = opened.published + self.timeout_s
        found: Divergence | None = None
        try:
            while not self.off:
                found = self._poll(opened)
                if found is not None or opened.settled is not None:
                    break
                time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))
        finally:
            opened.busy = False
        self._start_thread()  # for the clean-up of the entry
        return found

    # --- publishing and polling (the daemon thread, or the compiling one) -------------

    def _publish(self, record: CompileRecord, link: SpanLink | None, busy: bool = False,
                 ) -> _Open | None:
        identity = _fingerprint.function_identity(record.function)
        function_dir = f"{PREFIX}/{_function_key(identity)}/"
        entry = entry_of(record, self.rank)
        value = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        directory = f"{function_dir}{record.count}/"
        if not self._call("publish", lambda: _jax_read.kv_set(
                self.client, directory + str(self.rank), value)):
            return None
        # The highest ordinal this rank compiled, kept after its entries are deleted: a
        # late peer reads that this rank compiled it, rather than that it did not.
        with self._cond:
            mine = self._seen(function_dir).programs.get(self.rank, {})
            highest = max(mine, default=0)
        if record.count > highest:  # never lowered (threads publishing out of order)
            self._call("publish", lambda: _jax_read.kv_set(
                self.client, f"{function_dir}{DONE}/{self.rank}", str(record.count)))
        opened = _Open(record.function.qualname, record.count, function_dir, link)
        opened.busy = busy
        self._remember(function_dir, self.rank, record.count, entry)
        with self._cond:
            self._open[directory] = opened
            while len(self._open) > MAX_OPEN:
                oldest = next(iter(self._open))
                self._retire(self._open.pop(oldest))
        return opened

    def _poll(self, opened: _Open) -> Divergence | None:
        """Read the peers' entries of ``opened``; the divergence reported now, if any."""
        found: list[tuple[str, str]] = []
        if not self._call("read", lambda: found.extend(
                _jax_read.kv_dir_get(self.client, opened.directory))):
            return None
        for key, value in found:
            try:
                rank = int(key.rstrip("/").rsplit("/", 1)[-1])
                entry = json.loads(value)
            except (ValueError, TypeError):
                continue
            if isinstance(entry, dict) and 0 <= rank < self.count:
                opened.entries[rank] = entry
                self._remember(opened.function_dir, rank, opened.count, entry)
        late = opened.settled is not None
        reported = None
        div = compare(opened.function, opened.count, opened.entries, self.rank)
        if div is not None and self._shifted(opened, [r for side in div.ranks for r in side
                                                      if self.rank not in side]):
            div = None  # the same programs as the other ranks, one ordinal off
        if div is not None and div.kind not in opened.reported:
            # Seen before every rank arrived: wait a moment for the others, so that the
            # report names every rank on each side.
            now = time.monotonic()
            if opened.diverged is None:
                opened.diverged = now
            if (len(opened.entries) >= self.count or late
                    or now - opened.diverged >= min(GATHER_S, self.timeout_s / 2)):
                reported = self._emit(opened, div)
        if len(opened.entries) >= self.count:
            if opened.settled is None:
                opened.settled = time.monotonic()
            return reported
        if not late and time.monotonic() - opened.published >= self.timeout_s:
            opened.settled = time.monotonic()
            present = sorted(opened.entries)
            absent = self._not_compiled(
                opened, [r for r in range(self.count) if r not in opened.entries])
            if absent:
                gone = self._emit(opened, missing(opened.function, opened.count, present,
                                                  absent, self.rank, self.timeout_s))
                reported = reported or gone
        return reported

    def _seen(self, function_dir: str) -> _Seen:
        """What was seen of a function (under ``_cond``): made the most recent one."""
        seen = self._functions.pop(function_dir, None) or _Seen()
        self._functions[function_dir] = seen
        while len(self._functions) > MAX_FUNCTIONS:
            del self._functions[next(iter(self._functions))]
        return seen

    def _remember(self, function_dir: str, rank: int, count: int, entry: dict[str, Any],
                  ) -> None:
        program = (str(entry.get("fp") or ""), str(entry.get("pf") or ""))
        with self._cond:
            programs = self._seen(function_dir).programs.setdefault(rank, {})
            programs[count] = program
            while len(programs) > MAX_ORDINALS:
                del programs[min(programs)]

    def _shifted(self, opened: _Open, ranks: Sequence[int]) -> bool:
        """Whether each of ``ranks`` has been compiling this rank's programs one ordinal
        apart, here and at the ordinal before, after a divergence of the function was
        reported: one rank compiled one program more (reported where it happened), and
        the ordinals are off by one since. Two ordinals in a row, both known: a program
        only one rank compiled breaks the pattern and is reported."""
        if not ranks:
            return False
        m = opened.count
        with self._cond:
            seen = self._seen(opened.function_dir)
            if seen.diverged is None or seen.diverged >= m:
                return False  # no earlier divergence put the ordinals off
            by_rank = seen.programs
            mine = by_rank.get(self.rank, {})
            for rank in ranks:
                theirs = by_rank.get(rank, {})
                # Their ordinal k is my ordinal k - d: the last two pairs known now. They
                # are ahead (d = 1) only if they have an entry here.
                shifts = [(-1, (m - 1, m - 2))]
                if m in theirs:
                    shifts.append((1, (m, m - 1)))
                if not any(all(_same(theirs.get(k), mine.get(k - d)) for k in pairs)
                           for d, pairs in shifts):
                    return False
        return True

    def _not_compiled(self, opened: _Open, absent: list[int]) -> list[int]:
        """The absent ranks that did not compile this program: not those whose entry was
        deleted after they compiled it, nor those that compiled it one ordinal off."""
        if not absent:
            return absent
        marks: list[tuple[str, str]] = []
        self._call("read", lambda: marks.extend(
            _jax_read.kv_dir_get(self.client, f"{opened.function_dir}{DONE}/")))
        done: dict[int, int] = {}
        for key, value in marks:
            try:
                done[int(key.rstrip("/").rsplit("/", 1)[-1])] = int(value)
            except (ValueError, TypeError):
                continue
        return [r for r in absent if done.get(r, 0) < opened.count
                and not self._shifted(opened, [r])]

    def _emit(self, opened: _Open, div: Divergence) -> Divergence:
        opened.reported.add(div.kind)
        with self._cond:
            seen = self._seen(opened.function_dir)
            if seen.diverged is None or opened.count < seen.diverged:
                seen.diverged = opened.count
        div = Divergence(div.function, div.count, div.kind, div.text, div.ranks,
                         div.missing_ranks, div.diff, div.process_index, div.detected,
                         opened.link)
        with self._failopen.guard("divergence report"):
            self._report(div)
        return div

    def _retire(self, opened: _Open) -> None:
        self._call("clean-up", lambda: _jax_read.kv_delete(
            self.client, opened.directory + str(self.rank)))

    def _call(self, what: str, fn: Callable[[], Any]) -> bool:
        if self.off:
            return False
        try:
            fn()
        except Exception as exc:
            self._failures += 1
            if self._failures >= MAX_FAILURES:
                self.off = True
                self._failopen.warn_once(
                    "ranks-off",
                    "otel_jax: the coordination service of this multi-process job failed "
                    f"{self._failures} times ({what}: {type(exc).__name__}: "
                    f"{safe_repr(str(exc), 160)}); ranks are no longer compared in this "
                    "process. The jit calls are unaffected.")
            return False
        self._failures = 0
        return True

    # --- the daemon thread ------------------------------------------------------------

    def _start_thread(self) -> None:
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="otel_jax-ranks",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    if not self._queue and not self._closed:
                        self._cond.wait(POLL_S if self._open else 1.0)
                    if self.off:
                        break
                    closing = self._closed
                    batch = [self._queue.popleft() for _ in range(min(len(self._queue), 64))]
                # Closing (uninstall, exit) still publishes what is queued: the peers
                # are waiting for those entries.
                for record, link in batch:
                    try:
                        self._publish(record, link)
                    finally:
                        with self._cond:
                            self._unpublished -= 1
                if closing:
                    if not batch:
                        break
                    continue
                self._poll_open()
        except Exception as exc:  # never let the thread die loudly
            self._failopen.failed("rank comparison", exc)
        finally:
            self._clean_up()

    def _poll_open(self) -> None:
        now = time.monotonic()
        with self._cond:
            opened = list(self._open.values())
        polls = 0
        for o in opened:
            if self.off or polls >= MAX_POLLS:
                return
            if o.busy:
                continue
            if o.settled is not None and len(o.entries) >= self.count:
                if now - o.settled >= self.timeout_s:
                    self._drop(o)
                continue
            if o.settled is not None and now - o.settled >= self.timeout_s:
                self._drop(o)  # the grace period for a late peer is over
                continue
            polls += 1
            self._poll(o)

    def _drop(self, opened: _Open) -> None:
        with self._cond:
            self._open.pop(opened.directory, None)
        self._retire(opened)

    def _clean_up(self, deadline_s: float = 1.0) -> None:
        """When the thread stops: delete this rank's entries that every rank has published
        beside (bounded in time). The others stay for the peers that have not compared
        them yet (a rank that ends first must not read as missing); they go with the job's
        coordination service, as do the marks of the highest ordinals."""
        end = time.monotonic() + deadline_s
        with self._cond:
            opened, self._open = list(self._open.values()), {}
        for o in opened:
            if time.monotonic() > end or self.off:
                break
            if len(o.entries) >= self.count:
                self._retire(o)

    def settled(self) -> bool:
        """Nothing queued and every open entry compared with every rank or timed out."""
        with self._cond:
            return not self._unpublished and all(o.settled is not None for o in self._open.values())

    def close(self, timeout: float = 1.0) -> None:
        """Stop the thread and delete this rank's entries, waiting at most ``timeout``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


# --- the engine's side ----------------------------------------------------------------

class CrossRank:
    """The engine's handle: off for single-process programs (one attribute read per compile)."""

    def __init__(self, failopen: FailOpen) -> None:
        self._failopen = failopen
        self.timeout_s = DEFAULT_TIMEOUT_S
        self.on_divergence = "off"
        #: Patterns (fnmatch) of qualified names compiled on purpose by some ranks only.
        self.rank_local: tuple[str, ...] = ()
        self.report: Reporter | None = None
        self.checker: Checker | None = None
        self._lock = threading.Lock()

    def configure(self, on_divergence: str, timeout_s: float, report: Reporter | None) -> None:
        with self._lock:
            self.on_divergence = on_divergence
            self.timeout_s = timeout_s
            self.report = report
            checker, self.checker = self.checker, None
        if checker is not None:
            checker.close()

    def _checker(self) -> Checker | None:
        checker = self.checker
        if checker is not None:
            return None if checker.off else checker
        coordination = _jax_read.coordination()
        if coordination is None:
            return None
        with self._lock:
            if self.checker is not None:
                return self.checker
            lacking = _jax_read.coordination_missing(coordination.client)
            report = self.report
            checker = Checker(coordination, self.timeout_s,
                              report if report is not None else (lambda d: None),
                              self._failopen)
            if lacking:
                checker.off = True
                self._failopen.warn_once(
                    "ranks-methods",
                    "otel_jax: this JAX's distributed runtime client lacks "
                    f"{', '.join(lacking)}; ranks of this multi-process job are not "
                    "compared. The jit calls are unaffected.")
            self.checker = checker
            if not _live:
                # Registered now, after jax.distributed.initialize registered its own
                # shutdown: exit runs this first, while the service is still there.
                atexit.register(_at_exit)
            _live.append(checker)
            return None if checker.off else checker

    def on_compile(self, record: CompileRecord, link: SpanLink | None) -> Divergence | None:
        """Compare this compile across ranks; with ``"raise"``, the divergence to raise."""
        if self.on_divergence == "off" or record.eager_op:
            return None
        if self.rank_local and any(fnmatch.fnmatchcase(record.function.qualname, pattern)
                                   for pattern in self.rank_local):
            return None
        checker = self._checker()
        if checker is None:
            return None
        if self.on_divergence == "raise":
            return checker.check_now(record, link)
        checker.submit(record, link)
        return None


_live: list[Checker] = []


def _at_exit() -> None:
    for checker in list(_live):
        try:
            checker.close(1.0)
        except Exception:
            pass
