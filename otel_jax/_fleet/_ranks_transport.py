"""The cross-rank check's transport: its calls on a key-value store, and its waits.

The protocol (``_ranks_protocol``) is written against :class:`Channel`, which makes
its calls on a :class:`Store`: the few key-value calls of JAX's coordination service
it uses, as :class:`ClientStore` makes them over the distributed runtime client (read
through ``_capture/_jax/_coordination.py``), and as ``benchmarks/fleet_scale.py``'s
in-process store makes them for 1,024 simulated ranks. What is the service's and not
the protocol's lives here: failing open, blocking reads that closing ends at once, and
the generations of a key every rank reads.

A key only this process waits for (``all`` for a comparer, a summary it asked for) is
set to ``WAKE`` to end its read; a key every rank reads (the verdict, a named
divergence) is created as ``WAKE`` only if it is not set (``key_value_set`` without
overwrite: if it is set, the read is ending anyway). A peer that reads that ``WAKE``
without closing reads the key's next generation (``v~1``), and the writer, whose
creation of ``v`` failed, writes there: a rank that exits early costs each peer one read
more, once. A thread still inside the client's C++ when finalization starts would take
the GIL back after it and be ended by the interpreter mid-call, which aborts the
process (``terminate called`` ... ``FATAL: exception not rethrown``) when the peer's exit
ends the read.

A coordination service that fails (a dead coordinator, a JAX without the client
methods) costs one warning, and the check is off for the rest of the run.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import threading
import time
from collections.abc import Callable, Generator, Iterable
from typing import Any, NamedTuple, Protocol, TypeVar

from .._capture._jax import _coordination
from .._core._failopen import FailOpen, Topic
from .._core._text import safe_repr
from .._core._vocab import RankWire as W

#: The longest one read of a ``Read.SLICED`` wait lasts: a longer wait is several reads.
#: What a thread inside such a read adds to exit at most (closing cannot end it: a late
#: rank's read of the comparer's summary, set before the verdict, so rarely a wait).
WAIT_SLICE_S = 1.0
#: Generations of a shared key (one more each time a rank closes while reading it) after
#: which the readers and the writer give up on it.
MAX_GENERATIONS = 8
#: What this process sets a key only it waits for to, to end its own read at once (exit).
WAKE = "-"
#: Consecutive failures of the coordination service after which the check stops.
MAX_FAILURES = 3
#: The values a counter may hold for its next increment to succeed. The service (JAX 0.8
#: to 0.12) adds in 64 bits but parses the value it stored as a 32-bit integer first: a
#: counter past these fails every later increment (``FAILED_PRECONDITION: Failed to parse
#: value``). Every counter of the check stays within them.
COUNTER_MIN = -(1 << 31)
COUNTER_MAX = (1 << 31) - 1


def counter_sum(stored: str | None, by: int) -> int:
    """What the service's increment makes of a counter's stored text: the in-process
    stores (tests, ``benchmarks/fleet_scale.py``) add as it does, and fail as it does."""
    value = int(stored or "0")
    if not COUNTER_MIN <= value <= COUNTER_MAX:
        raise RuntimeError(f'FAILED_PRECONDITION: Failed to parse value "{stored}" as an '
                           "integer.")
    return value + by


def generation(key: str, n: int) -> str:
    """The ``n``-th generation of a shared key (``n`` ranks closed while reading it)."""
    return key if n == 0 else f"{key}{W.GENERATION}{n}"


T = TypeVar("T")


class Store(Protocol):
    """The key-value calls the check makes on the job's store. A call that fails raises."""

    def set(self, key: str, value: str) -> None:
        """Sets the key, overwriting it."""

    def create(self, key: str, value: str) -> bool:
        """Sets the key only if it is not set: ``False`` when it was (first writer wins)."""

    def increment(self, key: str, by: int) -> int:
        """Adds ``by`` to the counter at ``key`` (made at 0 when absent): the value after."""

    def dir_get(self, directory: str) -> list[tuple[str, str]]:
        """The keys under ``directory`` and their values, in key order."""

    def delete(self, key: str) -> None:
        """Deletes the key and every key under ``key/``."""

    def wait(self, key: str, timeout_ms: int) -> str | None:
        """The key's value, waiting at most ``timeout_ms`` for it: ``None`` when the time
        passed first."""


class ClientStore:
    """The :class:`Store` of JAX's distributed runtime client (``_coordination``'s calls)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def set(self, key: str, value: str) -> None:
        _coordination.kv_set(self.client, key, value)

    def create(self, key: str, value: str) -> bool:
        return _coordination.kv_create(self.client, key, value)

    def increment(self, key: str, by: int) -> int:
        return _coordination.kv_increment(self.client, key, by)

    def dir_get(self, directory: str) -> list[tuple[str, str]]:
        return _coordination.kv_dir_get(self.client, directory)

    def delete(self, key: str) -> None:
        _coordination.kv_delete(self.client, key)

    def wait(self, key: str, timeout_ms: int) -> str | None:
        return _coordination.kv_wait(self.client, key, timeout_ms)


class Read(enum.Enum):
    """How a wait reads its key, so that closing can end the read at once."""

    #: No other process reads the key: one read, however long; closing sets the key to
    #: ``WAKE``.
    OWN = "own"
    #: Every rank reads the key (a verdict): one read, however long; closing creates the
    #: key as ``WAKE`` if it is not set, and a rank that reads a ``WAKE`` it did not set
    #: reads the key's next generation, which the writer then uses (``publish_shared``).
    SHARED = "shared"
    #: Reads of ``WAIT_SLICE_S`` at most (a short wait of a key another process writes
    #: first, such as a summary published before the verdict).
    SLICED = "sliced"


class Wait(NamedTuple):
    """A step of the protocol waits for ``key`` until ``deadline`` (the checker's clock):
    it is sent the key's value, or ``None`` when the deadline passed first."""

    key: str
    deadline: float
    read: Read = Read.SLICED


class Channel:
    """The protocol's calls on the store and its waits (one per process).

    Each call fails open: ``False`` or ``None`` when it failed (``MAX_FAILURES`` in a
    row turn the check off, with one warning), was not made (off), or would come after
    closing's cut-off. ``clock`` is the time the deadlines of waits are measured in
    (``time.monotonic``; the fleet simulation passes its own).
    """

    def __init__(self, store: Store, clock: Callable[[], float], failopen: FailOpen) -> None:
        self.store = store
        self.clock = clock
        self._failopen = failopen
        self._lock = threading.Lock()
        self._reading: list[tuple[str, Read]] = []  # the reads in flight (closing ends them)
        self.closed = False
        #: After this (``time.monotonic``), no new call of the client is made: closing.
        self.calls_until = float("inf")
        self._failures = 0
        self.off = False

    # --- calls ------------------------------------------------------------------------

    def set(self, what: str, key: str, value: str) -> bool:
        return self._call(what, lambda: self.store.set(key, value))

    def increment(self, what: str, key: str, by: int = 1) -> int | None:
        out: list[int] = []
        if not self._call(what, lambda: out.append(self.store.increment(key, by))):
            return None
        return out[0]

    def dir_get(self, what: str, directory: str) -> list[tuple[str, str]] | None:
        out: list[tuple[str, str]] = []
        if not self._call(what, lambda: out.extend(self.store.dir_get(directory))):
            return None
        return out

    def delete(self, what: str, key: str) -> bool:
        return self._call(what, lambda: self.store.delete(key))

    def create(self, what: str, key: str, value: str) -> bool | None:
        """Sets the key only if it is not set: ``False`` when it was, ``None`` when the
        call failed."""
        out: list[bool] = []
        if not self._call(what, lambda: out.append(self.store.create(key, value))):
            return None
        return out[0]

    def publish_shared(self, key: str, text: str) -> bool:
        """Writes a key every rank reads (``Read.SHARED``), into its first generation that
        is not ``WAKE`` (set by a rank that closed while reading it: its peers moved to
        the next). A generation already set otherwise (a comparer that took over wrote
        it too) stands: the first writer wins, so every rank reads one verdict."""
        store = self.store
        out: list[Any] = []

        def create(target: str) -> None:
            out.append(store.create(target, text))

        def read(target: str) -> None:
            out.append(store.wait(target, 1))

        for n in range(MAX_GENERATIONS):
            target = generation(key, n)
            out.clear()
            if not self._call("publish", functools.partial(create, target)):
                return False
            if out[0]:
                return True
            out.clear()
            if not self._call("publish", functools.partial(read, target)):
                return False
            if out[0] != WAKE:
                return True
        return False

    def _call(self, what: str, fn: Callable[[], Any]) -> bool:
        if self.off or time.monotonic() > self.calls_until:
            return False
        try:
            fn()
        except Exception as exc:
            self._failed(what, exc)
            return False
        self._failures = 0
        return True

    def _failed(self, what: str, exc: BaseException) -> None:
        self._failures += 1
        if self._failures >= MAX_FAILURES:
            self.off = True
            self._failopen.warn_once(
                Topic.RANKS_OFF,
                "otel_jax: the coordination service of this multi-process job failed "
                f"{self._failures} times ({what}: {type(exc).__name__}: "
                f"{safe_repr(str(exc), 160)}); ranks are no longer compared in this "
                "process. The jit calls are unaffected.")

    # --- waits ------------------------------------------------------------------------

    def wait(self, wait: Wait) -> str | None:
        """The key's value, or ``None`` at the deadline; none once closing. An ``OWN`` or
        ``SHARED`` key is one read, which closing ends by setting the key to ``WAKE``
        (a shared one only if it is not set: then the read is ending anyway). A
        ``SLICED`` key is read in slices of at most ``WAIT_SLICE_S`` (at least 1 ms), so
        that closing finds the thread out of the client within one slice. The main
        thread (``"raise"``) cannot be inside a read at finalization: one read."""
        sliced = (wait.read is Read.SLICED
                  and threading.current_thread() is not threading.main_thread())
        key, generations = wait.key, 0
        while True:
            reading = (key, wait.read)
            with self._lock:
                if self.off or self.closed:
                    return None
                self._reading.append(reading)
            left = wait.deadline - self.clock()
            # rounded up: a read that ends just short of the deadline is not read again
            timeout_ms = max(1, math.ceil((min(left, WAIT_SLICE_S) if sliced else left)
                                          * 1000))
            try:
                value = self.store.wait(key, timeout_ms)
            except Exception as exc:
                self._failed("wait", exc)
                return None
            finally:
                with self._lock:
                    self._reading.remove(reading)
            self._failures = 0
            if value == WAKE and wait.read is not Read.SLICED:
                with self._lock:
                    if self.closed or wait.read is Read.OWN:
                        return None  # this process ended its own read (closing)
                # A peer closed while reading this key: its writer uses the next one.
                generations += 1
                if generations >= MAX_GENERATIONS:
                    return None
                key = generation(wait.key, generations)
                continue
            if value is not None or wait.deadline - self.clock() <= 0:
                return value

    def drive(self, steps: Generator[Wait, str | None, T]) -> T | None:
        """Run the protocol's steps with the store's blocking reads."""
        try:
            wait = steps.send(None)
            while True:
                value = self.wait(wait)
                if self.closed:
                    # Uninstalled or exiting: what is not settled is left to the peers,
                    # and the client is not called again.
                    steps.close()
                    return None
                wait = steps.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    # --- closing ----------------------------------------------------------------------

    def close(self, calls_until: float) -> None:
        """No read starts from now on, and no call after ``calls_until``
        (``time.monotonic``)."""
        with self._lock:
            self.closed = True
            self.calls_until = min(self.calls_until, calls_until)

    def wake(self) -> None:
        """End the reads in flight at once: an own key is set to ``WAKE``, a shared one is
        created as ``WAKE`` if it is not set."""
        with self._lock:
            reading = list(self._reading)
        for key, read in reading:
            try:
                if read is Read.OWN:
                    self.store.set(key, WAKE)
                elif read is Read.SHARED:
                    self.store.create(key, WAKE)
            except Exception:
                pass  # the read ends at its deadline, or with the service


# --- the forms every stage writes and reads (none calls back into another for them) -------
# Ranks travel as ranges (``0-1022``): a verdict's size does not grow with the rank count.

Run = tuple[int, int]  # ranks a..b, both included
Runs = list[Run]


def as_runs(ranks: Iterable[int]) -> list[Run]:
    if isinstance(ranks, tuple) and ranks and ranks == tuple(range(ranks[0], ranks[-1] + 1)):
        return [(ranks[0], ranks[-1])]  # one range (the usual verdict): no sort
    runs: list[Run] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    return runs


def runs_text(runs: Iterable[Run]) -> str:
    """``0-6,8``: runs of ranks as the wire carries them."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_runs(text: str, lo: int, hi: int) -> list[Run]:
    """The runs of ``runs_text``, those parts within ``lo..hi`` (a job's ranks, or a
    tree node's), in the text's order; a part that is no run is skipped."""
    runs: list[Run] = []
    for part in str(text).split(","):
        a, _, b = part.partition("-")
        try:
            first, last = int(a), int(b or a)
        except ValueError:
            continue
        first, last = max(first, lo), min(last, hi)
        if first <= last:
            runs.append((first, last))
    return runs


def loads(raw: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw is not None else None
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def dumps(value: dict[str, Any] | str) -> str:
    return value if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, separators=(",", ":"))
