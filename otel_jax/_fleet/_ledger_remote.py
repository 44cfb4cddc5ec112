"""The compile ledger on a remote store (``gs://``, ``s3://``, any scheme JAX's cache takes).

Object stores have no atomic append, charge per request, and limit writes per object,
so the ledger there is not one file but a fixed set of small objects under a prefix:

* ``<prefix>/NNNN.json``: one object per *bucket* of functions (``BUCKETS`` of them, a
  function's bucket is a hash of its name), holding the latest entries of every
  (function, signature) of the functions that hash there. All signatures of one function
  are in one object, so a miss under a new signature (a tracing-context change) finds
  the function's other signatures in the same read.
* bounded: at most ``BUCKETS`` objects of at most ``BUCKET_BYTES`` each (the
  (function, signature) groups written longest ago are dropped first), whatever the
  number of runs, functions or hosts;
* written by the process that JAX writes cache entries from (process 0) only: one write
  per compile missed, not one per rank, and nothing kept only on a host's disk, so a
  host replaced after preemption finds everything the job recorded;
* each object is read at most once per process (at the first miss of one of its
  functions) and rewritten whole (read, merge, write: entries of other runs and other
  jobs sharing the store are kept).

Remote I/O never runs on the compiling thread: one daemon worker does it, and the
compiling thread waits at most ``READ_WAIT_S`` for a read (writes are not waited for).
A store that is down, refuses a request or does not answer in time costs one warning;
meanwhile misses are explained from what is already known, and the store is tried again
``RETRY_AFTER_S`` later. At exit, writes still queued get ``EXIT_WAIT_S`` (none when the
store is failing).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .._core import _threads
from .._core._failopen import FailOpen, Topic, WarnKey
from .._core._vocab import LedgerWire as W

Entry = dict[str, Any]

#: Objects under the ledger's prefix; a function's bucket is a hash of its name.
BUCKETS = 512
#: The largest object written; older (function, signature) groups are dropped past it.
BUCKET_BYTES = 64 << 10
#: The longest a compile waits for the store to answer a read.
READ_WAIT_S = 2.0
#: After a failure, the store is left alone this long before it is tried again.
RETRY_AFTER_S = 60.0
#: At exit, the longest wait for writes still queued (none while the store fails).
EXIT_WAIT_S = 3.0
#: Reads of one object before the store is taken as failing: an object rewritten by
#: another process while it is read fails that read (s3fs raises ``FileExpired`` when
#: the object's ETag changed between its requests), and the next read gets the new one.
READ_ATTEMPTS = 3
#: Objects whose writes may wait in the queue (one pending write per object).
MAX_PENDING = BUCKETS
#: Entries that may wait to be written, all objects together (each under 4 KiB).
MAX_QUEUED = 4096


def bucket_of(function: str) -> int:
    """The bucket of a function: the same on every host and in every run."""
    digest = hashlib.blake2b(function.encode("utf-8", "backslashreplace"), digest_size=4)
    return int.from_bytes(digest.digest(), "big") % BUCKETS


def object_name(bucket: int) -> str:
    return f"{bucket:04x}.json"


def encode_bucket(entries: Iterable[Entry], mark: str, version: int,
                  group_of: Callable[[Entry], tuple[str, str]], keep_per_group: int,
                  limit: int | None = None) -> tuple[bytes, int]:
    """The object of one bucket, under ``limit`` bytes, and how many entries were dropped.

    Entries are grouped by (function, signature); each group keeps its latest
    ``keep_per_group`` entries (they arrive oldest first), and groups written longest ago
    are dropped until the object fits.
    """
    limit = BUCKET_BYTES if limit is None else limit
    groups: dict[tuple[str, str], list[Entry]] = {}
    total = 0
    for entry in entries:
        total += 1
        key = group_of(entry)
        group = groups.pop(key, [])  # re-inserted: the dict stays ordered by latest write
        group.append(entry)
        groups[key] = group[-keep_per_group:]
    ordered = sorted(groups.values(), key=lambda g: _when(g[-1]))
    while True:
        kept = [e for group in ordered for e in group]
        data = json.dumps({mark: version, W.ENTRIES: kept}, separators=(",", ":"),
                          ensure_ascii=True).encode()
        if len(data) <= limit or not ordered:
            return data, total - len(kept)
        # Drop a share of the oldest groups at once: a full bucket is cut in a few passes.
        del ordered[: max(1, len(ordered) // 8)]


def decode_bucket(data: bytes, mark: str, version: int) -> tuple[list[Any], bool]:
    """The raw entries of one object, and whether the object was one of ours."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return [], False
    if not (isinstance(obj, dict) and obj.get(mark) == version
            and isinstance(obj.get(W.ENTRIES), list)):
        return [], False
    return obj[W.ENTRIES], True


def _when(entry: Entry) -> float:
    t = entry.get(W.TIME)
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else 0.0


class _Read:
    """One object's read: done once per process; ``entries`` is ``None`` after a failure."""

    __slots__ = ("done", "entries", "skipped")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.entries: list[Entry] | None = None
        self.skipped = 0


class RemoteStore:
    """The ledger's objects under one prefix, reached through ``root`` (an ``epath.Path``
    or anything with its ``/``, ``read_bytes`` and ``write_bytes``)."""

    def __init__(self, url: str, root: Any, failopen: FailOpen, mark: str, version: int,
                 parse: Callable[[Any], Entry | None],
                 group_of: Callable[[Entry], tuple[str, str]], keep_per_group: int) -> None:
        self.url = url
        self._root = root
        self._failopen = failopen
        self._mark, self._version = mark, version
        self._parse, self._group_of, self._keep = parse, group_of, keep_per_group
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._jobs: list[tuple[str, int]] = []  # ("read" | "write", bucket), in order
        self._reads: dict[int, _Read] = {}
        self._content: dict[int, list[Entry]] = {}  # each object as last read or written
        self._pending: dict[int, list[Entry]] = {}  # entries not yet written, per object
        self._queued = 0  # entries in ``_pending``
        self._busy_since: float | None = None  # the job in flight started then
        self._failed_until = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self.dropped = 0  # entries of this process not written: queue full, store failing
        self.evicted = 0  # entries dropped from objects to keep them under BUCKET_BYTES
        self.writes = 0  # objects written
        self.reads = 0  # objects asked for

    # --- the compiling thread -----------------------------------------------------------

    def fetch(self, bucket: int, wait: float | None = None) -> tuple[list[Entry], int] | None:
        """The entries of one bucket as the store holds them, and how many were unreadable;
        ``None`` when the store did not answer within ``wait`` seconds or failed."""
        wait = READ_WAIT_S if wait is None else wait
        with self._lock:
            read = self._reads.get(bucket)
            if read is None:
                if not self._healthy():
                    return None  # failing: no request, no wait
                read = self._reads[bucket] = _Read()
                self._submit("read", bucket)
            elif not read.done.is_set() and not self._healthy():
                return None
        if not read.done.wait(wait):
            self._warn(f"did not answer a read within {wait:g} s")
            return None
        if read.entries is None:
            with self._lock:
                if self._reads.get(bucket) is read:
                    del self._reads[bucket]  # read again once the store is back
            return None
        return list(read.entries), read.skipped

    def record(self, bucket: int, entry: Entry) -> None:
        """Queue ``entry`` to be written into its bucket's object (never waits)."""
        with self._lock:
            if (self._closed or self._queued >= MAX_QUEUED
                    or (not self._healthy() and bucket not in self._pending)):
                self.dropped += 1
                return
            pending = self._pending.get(bucket)
            if pending is None:
                if len(self._pending) >= MAX_PENDING:
                    self.dropped += 1
                    return
                pending = self._pending[bucket] = []
                self._submit("write", bucket)
            pending.append(entry)
            self._queued += 1

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for queued writes: none while the store fails or a request
        was already overdue (a store that hangs), but a write that turns slow while this
        waits is waited for, up to ``timeout`` (a busy store still writes)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if not self._healthy():
                return not self._jobs and self._busy_since is None
            while self._jobs or self._busy_since is not None:
                left = deadline - time.monotonic()
                if left <= 0 or time.monotonic() < self._failed_until:
                    return False
                self._wake.wait(min(left, 0.05))
        return True

    # --- the worker ---------------------------------------------------------------------

    def _healthy(self) -> bool:
        """Called with the lock held: the store answered its last request, and the request
        in flight (if any) is not overdue."""
        now = time.monotonic()
        if now < self._failed_until:
            return False
        return self._busy_since is None or now - self._busy_since <= READ_WAIT_S

    def _submit(self, kind: str, bucket: int) -> None:
        self._jobs.append((kind, bucket))
        self._wake.notify_all()
        if self._thread is None:
            self._thread = _threads.daemon(self._work, "otel_jax-ledger")
            self._thread.start()
            _STORES.add(self)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs and not self._closed:
                    self._wake.wait()
                if not self._jobs:
                    return
                kind, bucket = self._jobs.pop(0)
                self._busy_since = time.monotonic()
            try:
                if kind == "read":
                    self._do_read(bucket)
                else:
                    self._do_write(bucket)
            except Exception as exc:  # the store failed: one warning, a pause
                self._failed(exc)
            finally:
                with self._lock:
                    self._busy_since = None
                    self._wake.notify_all()

    def _read_object(self, bucket: int) -> tuple[list[Entry], int]:
        path = self._root / object_name(bucket)
        for attempt in range(READ_ATTEMPTS):
            self.reads += 1  # requests, answered or not
            try:
                data = path.read_bytes()
                break
            except FileNotFoundError:
                return [], 0
            except Exception:
                # Told apart by what happens next, not by the error's type: a store that
                # is down fails again, one whose object was replaced mid-read does not.
                if attempt + 1 == READ_ATTEMPTS:
                    raise
        raw, ours = decode_bucket(data, self._mark, self._version)
        entries = [e for e in map(self._parse, raw) if e is not None]
        return entries, (len(raw) - len(entries)) if ours else 1

    def _do_read(self, bucket: int) -> None:
        with self._lock:
            read = self._reads.get(bucket)
        if read is None or read.done.is_set():
            return
        try:
            entries, skipped = self._read_object(bucket)
        except BaseException:
            read.done.set()  # entries None: failed
            raise
        with self._lock:
            self._content.setdefault(bucket, entries)
        read.entries, read.skipped = entries, skipped
        read.done.set()

    def _do_write(self, bucket: int) -> None:
        with self._lock:
            content = self._content.get(bucket)
        if content is None:  # never read here: read first, so others' entries are kept
            content, _ = self._read_object(bucket)
        with self._lock:
            pending = self._pending.pop(bucket, [])
            self._queued -= len(pending)
        if not pending:
            return
        data, dropped = encode_bucket([*content, *pending], self._mark, self._version,
                                      self._group_of, self._keep)
        try:
            (self._root / object_name(bucket)).write_bytes(data)
        except BaseException:
            with self._lock:
                self.dropped += len(pending)
            raise
        kept, _ = decode_bucket(data, self._mark, self._version)
        with self._lock:
            self._content[bucket] = kept
            self.writes += 1
            self.evicted += dropped

    def _failed(self, exc: BaseException) -> None:
        # Everything queued behind the failed request is given up at once (reads answer
        # "unknown"), so a store that is down costs one request per RETRY_AFTER_S.
        with self._lock:
            self._failed_until = time.monotonic() + RETRY_AFTER_S
            self.dropped += self._queued
            self._pending.clear()
            self._queued = 0
            self._jobs.clear()
            failed = [b for b, r in self._reads.items() if not r.done.is_set()]
            for bucket in failed:
                self._reads.pop(bucket).done.set()
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        self._warn(f"failed ({type(exc).__name__}{': ' + text if text else ''})")

    def _warn(self, what: str) -> None:
        self._failopen.warn_once(WarnKey(Topic.LEDGER, self.url), (
            f"otel_jax: the compile ledger's store {self.url} {what}; persistent-cache "
            "misses are explained from what is already known, and entries may go unrecorded "
            f"(tried again after {RETRY_AFTER_S:g} s). The program is unaffected."))


_STORES: weakref.WeakSet[RemoteStore] = weakref.WeakSet()


def flush_all(timeout: float) -> bool:
    """Wait up to ``timeout`` in all for every store's queued writes (``otel_jax.flush``)."""
    deadline = time.monotonic() + timeout
    done = True
    for store in list(_STORES):
        done = store.flush(max(0.0, deadline - time.monotonic())) and done
    return done


@atexit.register
def _close_all() -> None:
    """At exit: queued writes get ``EXIT_WAIT_S`` in all (none on a failing store)."""
    flush_all(EXIT_WAIT_S)
    for store in list(_STORES):
        with store._lock:
            store._closed = True
            store._wake.notify_all()
