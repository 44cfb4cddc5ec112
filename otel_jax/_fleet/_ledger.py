"""The compile ledger: why JAX's persistent compilation cache did not serve a compile.

JAX hashes a program, its compile options, the jaxlib and backend versions, the XLA
flags, the devices (and more) into one persistent-cache key, and says what each part
hashed to only in DEBUG logs. For each compile that the cache did not serve (a user
function, not an eager op), otel_jax keeps one small JSON line: the function, its
signature and program fingerprints, the key's parts as hashes (JAX's own per-part
hash functions, read by ``_cache_key.cache_key_parts``), the readable values that are
cheap and safe (versions, XLA flags, backend, devices), and whether JAX wrote an
entry. A later run compiling the same function and signature finds the earlier line
and says why the cache missed: ``never_seen``, ``key_changed`` (naming the first part
that differs) or ``not_written`` (the entry was not written, or is gone). What a line
holds and what the earlier lines say are ``_ledger_lines``'s; this module keeps the
lines: the file, the index, and the remote store's hookup.

The file, shared by every process on a host:

* append-only: one ``os.write`` per line on an ``O_APPEND`` descriptor, each line at
  most ``PIPE_BUF`` (4096) bytes, so lines written by several processes at once never
  interleave and none is lost;
* bounded: past ``MAX_BYTES`` it is renamed to ``<path>.1`` (the older one dropped),
  under a lock file taken without waiting (a process that does not get it leaves the
  rotation to the one that has it);
* read once per path, at the first compile that needs it: ``<path>.1`` then
  ``<path>``, at most ``MAX_BYTES`` of each, into an index of (function, signature)
  -> the latest lines with distinct keys. A line that is not a ledger line (truncated,
  garbage, another program's) is skipped and counted: one warning, never an error.

On a remote cache (``gs://``, ``s3://``: any path JAX reaches through ``etils.epath``)
the ledger is a fixed set of small objects beside the cache directory
(``<cache dir>.otel_jax-ledger/``), written by process 0 only and read and written off
the compiling thread with a bounded wait (``_ledger_remote``).

Nothing is done on a persistent-cache hit. Everything here runs under the engine's
fail-open guard; a ledger that cannot be read or written costs one warning.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from typing import Any

from .._capture._jax import _cache_key, _devices, _persistent_cache
from .._capture._source import FunctionInfo
from .._core._failopen import FailOpen, Topic, WarnKey
from .._core._text import truncate
from .._core._vocab import LEDGER_ENV, MissReason
from .._core._vocab import LedgerWire as W
from .._pipeline._record import PersistentCache
from ._ledger_lines import (
    MARK,
    VERSION,
    Entry,
    encode_line,
    explain,
    is_concurrent,
    key_of,
    line_of,
    parse_entry,
    parse_line,
    same_key,
)

#: Default location: beside the cache directory, never inside it (JAX owns that one).
SUFFIX = W.SUFFIX
#: The same on a remote cache, where the ledger is a prefix of objects.
REMOTE_SUFFIX = W.REMOTE_SUFFIX
#: Size of one ledger file before it is rotated (one older file is kept).
MAX_BYTES = 2 << 20
#: Distinct keys remembered per (function, signature), latest last.
KEEP_PER_KEY = 4
#: (function, signature) pairs indexed; the oldest are forgotten past it.
MAX_INDEXED = 20_000
DETAIL_LIMIT = 400
_OFF = frozenset({"off", "false", "0", "no", "none"})


def is_remote(path: str) -> bool:
    """A path of a remote store (``gs://``, ``s3://``, ...), as JAX tells one apart."""
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://"):]
    return os.path.abspath(os.path.expanduser(path))


def default_path(cache_dir: str | None) -> str | None:
    """``<cache_dir>.otel_jax-ledger.jsonl`` for a local cache directory, the prefix
    ``<cache_dir>.otel_jax-ledger`` for a remote one; ``None`` without one."""
    if not cache_dir:
        return None
    if is_remote(cache_dir):
        directory = cache_dir.rstrip("/")
        return directory + REMOTE_SUFFIX if directory.partition("://")[2] else None
    directory = _local(cache_dir).rstrip("/\\")
    return directory + SUFFIX if directory else None


def _where(path: str) -> str:
    return path.rstrip("/") if is_remote(path) else _local(path)


def resolve(setting: Any, cache_dir: str | None) -> str | None:
    """The ledger's path: ``install(ledger_path=...)``, else ``OTEL_JAX_LEDGER``, else
    beside the cache directory; ``None`` (off) with the cache off or when asked."""
    if not cache_dir or setting is False:
        return None
    if isinstance(setting, str) and setting.strip().lower() in _OFF:
        return None
    if setting is not None and setting is not True:
        return _where(str(os.fspath(setting)))
    env = os.environ.get(LEDGER_ENV, "").strip()
    if env.lower() in _OFF:
        return None
    if env:
        return _where(env)
    return default_path(cache_dir)


def read_tail(path: str, limit: int | None = None) -> tuple[list[bytes], bool]:
    """The lines of the last ``limit`` bytes of ``path`` (the first, cut, dropped), and
    whether the file was missing."""
    limit = MAX_BYTES if limit is None else limit
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            cut = size > limit
            if cut:
                f.seek(size - limit)
            data = f.read(limit)
    except FileNotFoundError:
        return [], True
    lines = data.split(b"\n")
    if cut:
        lines = lines[1:]
    return lines, False


class Ledger:
    """The compile ledger of one process: the earlier runs' lines, and this run's."""

    def __init__(self, failopen: FailOpen) -> None:
        self.failopen = failopen
        self.setting: Any = None  # install(ledger_path=...): None, False or a path
        self.skipped = 0  # lines read that were not ledger lines
        self.unwritten = 0  # lines that could not be written
        self._lock = threading.RLock()
        self._path: str | None = None  # whose lines are indexed
        self._index: dict[tuple[str, str], list[Entry]] = {}
        #: (function, signature without its tracing context) -> lines of distinct contexts
        self._alike: dict[tuple[str, str], list[Entry]] = {}
        self._broken: set[str] = set()  # paths that could not be written
        self._off: set[str] = set()  # paths that are neither read nor written (one warning)
        self._unterminated: set[str] = set()  # paths whose last line was cut short
        self._stores: dict[str, Any] = {}  # remote ledgers: url -> RemoteStore (or None)
        self._fetched: set[int] = set()  # remote buckets indexed (of ``_path``)

    def configure(self, setting: Any) -> None:
        self.setting = setting

    def path(self) -> str | None:
        return resolve(self.setting, _persistent_cache.persistent_cache_dir())

    # --- one compile ------------------------------------------------------------------

    def note(self, info: FunctionInfo, fingerprint: str, program: str, inputs: Any,
             cache: PersistentCache, compile_s: float,
             signature: Any = None, base: str = "") -> PersistentCache:
        """Record one compile the persistent cache did not serve, and say why it did not."""
        if cache.hit or inputs is None or not (fingerprint or program):
            return cache
        path = self.path()
        if path is None or path in self._off:
            return cache
        parts = _cache_key.cache_key_parts(inputs, program)
        if parts is None:
            return cache
        proc = _process_index()
        now = line_of(info, fingerprint, program, parts, cache, compile_s, signature, proc,
                      base)
        key = key_of(now)
        remote = is_remote(path)
        store = self._store(path) if remote else None
        if remote and store is None:
            return cache
        with self._lock:
            if self._path != path:
                self._switch(path, remote)
            if path in self._off:
                return cache
            bucket = _remote().bucket_of(now[W.FUNCTION]) if remote else -1
            fetch = remote and bucket not in self._fetched
        if fetch and store is not None:  # outside the lock: a bounded wait for the store
            got = store.fetch(bucket)
            with self._lock:
                if got is not None and self._path == path and bucket not in self._fetched:
                    self._fetched.add(bucket)
                    self._index_older(got[0])
                    self._count_skipped(path, got[1])
        with self._lock:
            earlier = list(self._index.get(key, ()))
            alike = [e for e in self._alike.get((now[W.FUNCTION], now.get(W.BASE, "")), ())
                     if e[W.SIGNATURE] != now[W.SIGNATURE]] if now.get(W.BASE) else []
            self._remember(key, now)
        writer = 0 if remote and proc not in (0, None) else None
        explained = explain(earlier, now, alike, writer)
        if explained is not None and explained[0] is MissReason.NEVER_SEEN and remote:
            with self._lock:
                unread = bucket not in self._fetched
            if unread:
                explained = None  # the store did not answer: not known, not "never seen"
        if not remote:
            self._append(path, now)
        elif proc in (0, None):  # JAX's writer is the ledger's: one write per compile
            data = encode_line(now)
            if data is None:
                self.unwritten += 1
            elif store is not None:
                store.record(bucket, json.loads(data))
        if explained is None:
            return cache
        miss, detail = explained
        return replace(cache, miss_reason=miss, miss_detail=truncate(detail, DETAIL_LIMIT))

    # --- the index --------------------------------------------------------------------

    def _switch(self, path: str, remote: bool) -> None:
        self._path = path
        self._index, self._alike, self._fetched = {}, {}, set()
        if not remote:
            self._load(path)

    def _remember(self, key: tuple[str, str], entry: Entry) -> None:
        kept = self._index.pop(key, None) or []
        for i, old in enumerate(kept):
            if same_key(old[W.KEY], entry[W.KEY]):
                if old.get(W.WRITTEN) and not entry.get(W.WRITTEN):
                    # An entry was written under this key once: that is what matters.
                    entry = {**entry, W.WRITTEN: True, W.NOT_WRITTEN_REASON: None}
                del kept[i]
                break
        kept.append(entry)
        del kept[:-KEEP_PER_KEY]
        self._index[key] = kept
        if len(self._index) > MAX_INDEXED:
            del self._index[next(iter(self._index))]
        base = entry.get(W.BASE)
        if isinstance(base, str) and base:
            akey = (entry[W.FUNCTION], base)
            alike = [e for e in self._alike.pop(akey, ())
                     if e[W.SIGNATURE] != entry[W.SIGNATURE]]
            alike.append(entry)
            self._alike[akey] = alike[-KEEP_PER_KEY:]
            if len(self._alike) > MAX_INDEXED:
                del self._alike[next(iter(self._alike))]

    def _index_older(self, entries: list[Entry]) -> None:
        """Index lines read after this run's own (a remote object read late): they go
        under this run's, which stay the latest."""
        older = [e for e in entries if not is_concurrent(e)]
        if not older:
            return
        mine = self._index
        self._index, self._alike = {}, {}  # both rebuilt: the older lines first
        for entry in sorted(older, key=lambda e: e[W.TIME] if type(e.get(W.TIME)) in (int, float)
                            else 0.0):
            self._remember(key_of(entry), entry)
        for kept in mine.values():
            for entry in kept:
                self._remember(key_of(entry), entry)

    def _count_skipped(self, path: str, skipped: int) -> None:
        if skipped:
            self.skipped += skipped
            self.failopen.warn_once(WarnKey(Topic.LEDGER_SKIPPED, str(path)), (
                f"otel_jax: skipped {skipped} unreadable entr(y/ies) of the compile ledger "
                f"{path} (truncated, or not written by otel_jax); the others are used."))

    def _store(self, url: str) -> Any:
        """The remote store of ``url``, made once; ``None`` (one warning) without a
        file-system layer for it."""
        if url in self._stores:
            return self._stores[url]
        root = _persistent_cache.cache_path(url)
        store = None
        if root is None:
            self._off.add(url)
            self.failopen.warn_once(WarnKey(Topic.LEDGER, url), (
                f"otel_jax: cannot reach the compile ledger {url}: install etils[epath] "
                "(and gcsfs or s3fs), as JAX's cache on it needs; persistent-cache misses "
                "are not explained. The program is unaffected."))
        else:
            store = _remote().RemoteStore(url, root, self.failopen, MARK, VERSION,
                                          parse_entry, key_of, KEEP_PER_KEY)
        self._stores[url] = store
        return store

    def _load(self, path: str) -> None:
        """Index the earlier runs' lines of ``path`` (bounded: ``2 * MAX_BYTES`` read)."""
        if os.path.isdir(path):
            # One problem, one warning: neither read nor written from here on.
            self._off.add(path)
            self.failopen.warn_once(WarnKey(Topic.LEDGER, str(path)), (
                f"otel_jax: the compile ledger {path} is a directory, not a file; set "
                "OTEL_JAX_LEDGER or install(ledger_path=...) to a file, or 'off'. "
                "Persistent-cache misses are not explained; the program is unaffected."))
            return
        skipped = 0
        for name in (path + W.ROTATED, path):
            try:
                lines, _missing = read_tail(name)
            except OSError as exc:
                self.failopen.warn_once(WarnKey(Topic.LEDGER, str(path)), (
                    f"otel_jax: cannot read the compile ledger {name} ({type(exc).__name__}: "
                    f"{exc}); persistent-cache misses are explained from this run only."))
                continue
            if name == path and lines and lines[-1]:
                self._unterminated.add(path)  # the next line must not be glued to it
            for line in lines:
                if not line.strip():
                    continue
                entry = parse_line(line)
                if entry is None:
                    skipped += 1
                    continue
                if is_concurrent(entry):
                    continue
                self._remember(key_of(entry), entry)
        if skipped:
            self.skipped += skipped
            self.failopen.warn_once(WarnKey(Topic.LEDGER_SKIPPED, str(path)), (
                f"otel_jax: skipped {skipped} unreadable line(s) of the compile ledger "
                f"{path} (truncated, or not written by otel_jax); the others are used."))

    # --- the file ---------------------------------------------------------------------

    def _append(self, path: str, entry: Entry) -> None:
        if path in self._broken:
            return
        data = encode_line(entry)
        if data is None:
            self.unwritten += 1
            return
        if path in self._unterminated:
            self._unterminated.discard(path)
            data = b"\n" + data
        try:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except FileNotFoundError:  # its directory is not there yet (nor the cache's)
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
        except OSError as exc:
            self.unwritten += 1
            self._broken.add(path)
            self.failopen.warn_once(WarnKey(Topic.LEDGER, str(path)), (
                f"otel_jax: cannot write the compile ledger {path} ({type(exc).__name__}: "
                f"{exc}); set OTEL_JAX_LEDGER or install(ledger_path=...) to a writable "
                "file, or 'off'. The program is unaffected."))
            return
        if size > MAX_BYTES:
            rotate(path)


def _remote() -> Any:
    """The remote-store module, imported at the first remote ledger (its worker thread and
    exit hook are not needed otherwise)."""
    from . import _ledger_remote

    return _ledger_remote


def _process_index() -> int | None:
    try:
        return _devices.process_index()
    except Exception:
        return None


def rotate(path: str) -> bool:
    """Rename a full ledger to ``<path>.1``, once, whichever process gets there first.

    The lock file is taken without waiting: a process that does not get it goes on (the
    one that has it rotates). Appends that raced the rename land in ``<path>.1``: kept.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: rotate without the lock
        fcntl = None  # type: ignore[assignment]
    try:
        lock = os.open(path + W.LOCK, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
        try:
            if os.stat(path).st_size <= MAX_BYTES:
                return False  # another process rotated it already
            os.replace(path, path + W.ROTATED)
        except OSError:
            return False
        return True
    finally:
        os.close(lock)  # releases the lock
