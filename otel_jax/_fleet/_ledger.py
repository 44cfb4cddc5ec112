"""The compile ledger: why JAX's persistent compilation cache did not serve a compile.

JAX hashes a program, its compile options, the jaxlib and backend versions, the XLA
flags, the devices (and more) into one persistent-cache key, and says what each part
hashed to only in DEBUG logs. For each compile that the cache did not serve (a user
function, not an eager op), otel_jax keeps one small JSON line: the function, its
signature and program fingerprints, the key's parts as hashes (JAX's own per-part
hash functions, read by ``_jax_read.cache_key_parts``), the readable values that are
cheap and safe (versions, XLA flags, backend, devices), and whether JAX wrote an
entry. A later run compiling the same function and signature finds the earlier line
and says why the cache missed: ``never_seen``, ``key_changed`` (naming the first part
that differs) or ``not_written`` (the entry was not written, or is gone).

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

Across processes: JAX writes cache entries from process 0 only, and every process is
served from those entries, so a miss on any process is explained against what any
process recorded under the same function and signature (each line names its process):
the same key as process 0's means process 0's entry is gone or was never written; a
key part that differs is named, against process 0's key when that is the closest.

Nothing is done on a persistent-cache hit. Everything here runs under the engine's
fail-open guard; a ledger that cannot be read or written costs one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import replace
from typing import Any

from .._capture import _jax_read
from .._capture._fingerprint import function_identity, of_signature
from .._capture._source import FunctionInfo
from .._core._failopen import FailOpen, Topic, WarnKey
from .._core._scrub import without_digests
from .._core._text import emitted, safe_repr, truncate
from .._core._vocab import LEDGER_ENV, MissReason, NotWrittenReason
from .._core._vocab import LedgerWire as W
from .._pipeline._record import PersistentCache

#: Default location: beside the cache directory, never inside it (JAX owns that one).
SUFFIX = W.SUFFIX
#: The same on a remote cache, where the ledger is a prefix of objects.
REMOTE_SUFFIX = W.REMOTE_SUFFIX
#: Tracing-context values kept per line (each cut to CONTEXT_VALUE chars), to name the
#: config value that changed when a miss has a new signature but the same arguments.
MAX_CONTEXT = 96
CONTEXT_VALUE = 60
#: The mark and version every ledger line carries; other lines are foreign.
MARK = W.MARK
VERSION = W.VERSION
#: A line is written with one ``write``; under PIPE_BUF, appends of several processes
#: never interleave.
MAX_LINE = 4096
#: Size of one ledger file before it is rotated (one older file is kept).
MAX_BYTES = 2 << 20
#: Distinct keys remembered per (function, signature), latest last.
KEEP_PER_KEY = 4
#: (function, signature) pairs indexed; the oldest are forgotten past it.
MAX_INDEXED = 20_000
DETAIL_LIMIT = 400
_OFF = frozenset({"off", "false", "0", "no", "none"})
#: This process's run, to tell "earlier in this process" from "an earlier run".
_RUN = os.urandom(6).hex()


def _process_start() -> float:
    """When this process started (wall clock): from ``/proc`` on Linux, else now (this
    module is imported before the first compile)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        # starttime: field 22 of stat, in clock ticks since boot
        return time.time() - uptime + int(after_name[19]) / os.sysconf("SC_CLK_TCK")
    except Exception:
        return time.time()


#: When this process started. Lines written since by a process that started within
#: ``SIBLING_START_S`` of it are not an earlier run's: they come from a process started
#: beside it (the other ranks of a job on this host).
_STARTED = _process_start()
SIBLING_START_S = 60.0

_NOT_WRITTEN_TEXT = {
    NotWrittenReason.NOT_PROCESS_0.value: "JAX writes entries from process 0 only",
    NotWrittenReason.COMPILE_TIME_BELOW_MINIMUM.value: (
        "it compiled faster than jax_persistent_cache_min_compile_time_secs"),
    NotWrittenReason.OTHER.value: ("under jax_persistent_cache_min_entry_size_bytes, a host "
                                   "callback, or a write error"),
}

Entry = dict[str, Any]


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


def parse_line(line: bytes) -> Entry | None:
    """One ledger line, or ``None`` for anything else (truncated, garbage, foreign)."""
    try:
        entry = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return parse_entry(entry)


def parse_entry(entry: Any) -> Entry | None:
    """One ledger entry (a line's or a remote object's), or ``None`` for anything else."""
    if not (isinstance(entry, dict) and entry.get(MARK) == VERSION
            and isinstance(entry.get(W.FUNCTION), str) and isinstance(entry.get(W.SIGNATURE), str)
            and isinstance(entry.get(W.KEY), dict)):
        return None
    return entry


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


def _key_of(entry: Entry) -> tuple[str, str]:
    return entry[W.FUNCTION], entry[W.SIGNATURE] or "program:" + str(entry.get(W.PROGRAM) or "")


def _same_key(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two keys agree on every part both know (a part JAX's hashing moved is ``""``)."""
    return all(not (a.get(p) and b.get(p)) or a.get(p) == b.get(p)
               for p in _jax_read.CACHE_KEY_PARTS)


def _differences(before: dict[str, Any], after: dict[str, Any]) -> int:
    return sum(1 for part in _jax_read.CACHE_KEY_PARTS
               if before.get(part) and after.get(part) and before.get(part) != after.get(part))


#: Key parts that name the devices a program runs on: they differ between the processes
#: of a job for a program of each process's local devices, and agree for a global one.
_PER_PROCESS_PARTS = frozenset({W.PART_COMPILE_OPTIONS, W.PART_ACCELERATOR_CONFIG})


def _differing(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {part for part in _jax_read.CACHE_KEY_PARTS
            if before.get(part) and after.get(part) and before.get(part) != after.get(part)}


def _first_difference(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    for part in _jax_read.CACHE_KEY_PARTS:
        if before.get(part) and after.get(part) and before.get(part) != after.get(part):
            return part
    return None


def _flags(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [emitted(str(v), 200) for v in value[:256]]


def _readable(value: Any) -> str:
    return emitted(str(value), 120) if value not in (None, "") else "?"


def describe_change(part: str, before: Entry, after: Entry) -> str:
    """One line naming a key part that changed, with before and after where readable."""
    if part == W.PART_COMPUTATION:
        where = after.get(W.CODE) or after.get(W.FUNCTION, "").partition("@")[0]
        return f"program changed under the same signature (code edited at {where}?)"
    if part == W.PART_JAXLIB:
        text = f"jaxlib {_readable(before.get(W.JAXLIB))} -> {_readable(after.get(W.JAXLIB))}"
        if before.get(W.JAX) != after.get(W.JAX):
            text += f" (jax {_readable(before.get(W.JAX))} -> {_readable(after.get(W.JAX))})"
        return text
    if part == W.PART_BACKEND:
        return (f"backend {_readable(before.get(W.BACKEND))} -> "
                f"{_readable(after.get(W.BACKEND))}")
    if part == W.PART_XLA_FLAGS:
        old, new = _flags(before.get(W.XLA_FLAGS)), _flags(after.get(W.XLA_FLAGS))
        changes = [f"+{f}" for f in new if f not in old] + [f"-{f}" for f in old if f not in new]
        return "XLA flags: " + (" ".join(changes) if changes else "changed (same flags, "
                                "other order or a registered flag prefix)")
    if part == W.PART_COMPILE_OPTIONS:
        return ("compile options changed (XLA debug options or flags set in code, jit "
                "compiler_options, or the device assignment)")
    if part == W.PART_ACCELERATOR_CONFIG:
        old_d, new_d = before.get(W.DEVICES), after.get(W.DEVICES)
        if old_d != new_d:
            return f"devices {_readable(old_d)} -> {_readable(new_d)}"
        return "accelerator topology changed (other devices of the same kind)"
    if part == W.PART_COMPRESSION:
        return (f"compression {_readable(before.get(W.COMPRESSION))} -> "
                f"{_readable(after.get(W.COMPRESSION))} (zstandard installed or removed?)")
    return "the cache key's custom hook (jax._src.cache_key.custom_hook) returned another value"


def _concurrent(entry: Entry) -> bool:
    """A line written, after this process started, by a process started beside it (a
    sibling rank): not an earlier run's. A run that ended before this one started (a
    restart), or started long after it (beside a notebook kernel), is one; so are lines
    without the writer's start time (older ledgers)."""
    started, t = entry.get(W.STARTED), entry.get(W.TIME)
    if (entry.get(W.RUN) == _RUN or type(started) not in (int, float)
            or type(t) not in (int, float)):
        return False
    return (float(t) >= _STARTED  # type: ignore[arg-type]
            and abs(float(started) - _STARTED) <= SIBLING_START_S)  # type: ignore[arg-type]


def _when(entry: Entry, proc: Any = None) -> str:
    """The run that wrote ``entry``, named from the process ``proc`` that reads it."""
    if entry.get(W.RUN) == _RUN:
        return "an earlier compile in this process"
    t = entry.get(W.TIME)
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        stamp = "?"
    other = entry.get(W.PROCESS)
    who = (f"process {other}'s run" if type(other) is int and type(proc) is int
           and other != proc else "the run")
    return f"{who} of {stamp} (pid {_readable(entry.get(W.PID))})"


#: The names of the tracing-context values seen in this process, by their digest: a line
#: keeps the values only (the names are the same for every line of one JAX version).
_CONTEXT_NAMES: dict[str, tuple[str, ...]] = {}


def context_items(context: Any) -> tuple[str, list[str]]:
    """The tracing context (JAX's named config values) as a digest of its names and its
    values as bounded text that compares across processes (no addresses, no per-process
    digests); ``("", [])`` when it cannot be read."""
    try:
        items = [(name, value) for name, value in tuple(context)[:MAX_CONTEXT]
                 if isinstance(name, str)]
        names = tuple(name for name, _ in items)
        values = [without_digests(safe_repr(value, CONTEXT_VALUE)) for _, value in items]
    except Exception:
        return "", []
    digest = hashlib.blake2b("\x1f".join(names).encode("utf-8", "backslashreplace"),
                             digest_size=4).hexdigest()
    if digest not in _CONTEXT_NAMES:
        if len(_CONTEXT_NAMES) >= 16:
            _CONTEXT_NAMES.clear()
        _CONTEXT_NAMES[digest] = names
    return digest, values


def describe_context(before: Entry, after: Entry) -> str:
    """The tracing-context values that differ between two lines, named with both values."""
    old, new = before.get(W.CONTEXT), after.get(W.CONTEXT)
    names = _CONTEXT_NAMES.get(str(after.get(W.CONTEXT_NAMES)))
    changes: list[str] = []
    if (names is not None and before.get(W.CONTEXT_NAMES) == after.get(W.CONTEXT_NAMES)
            and isinstance(old, list) and isinstance(new, list)
            and len(old) == len(new) == len(names)):
        changes = [f"{emitted(name, 80)} {_readable(a)} -> {_readable(b)}"
                   for name, a, b in zip(names, old, new) if a != b]
    if not changes:
        return ("tracing context changed (a config value such as jax_enable_x64 or "
                "jax_default_matmul_precision; its values were not recorded)")
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return "tracing context changed: " + ", ".join(changes[:4]) + more


def explain(earlier: list[Entry], now: Entry, alike: list[Entry] | None = None,
            writer: int | None = None) -> tuple[MissReason, str] | None:
    """Why the cache did not serve ``now``, given the earlier lines of its function and
    signature (latest last), and ``alike``: the function's earlier lines under another
    tracing context with the same arguments. ``None`` when no part of its key could be
    read. ``writer``: the only process whose lines are recorded (a remote ledger), when
    it is not this one."""
    proc = now.get(W.PROCESS)
    if not earlier and alike:
        if any(_same_key(e[W.KEY], now[W.KEY]) for e in alike):
            earlier = alike  # the context changed nothing JAX's cache key sees
        else:
            # Same arguments, statics and options, another tracing context: the config
            # value that changed is the cause (the program lowered under it differs).
            entry = alike[-1]
            return MissReason.KEY_CHANGED, (f"{describe_context(entry, now)}; since "
                                            f"{_when(entry, proc)}")
    if not earlier:
        if writer is not None:
            return MissReason.NEVER_SEEN, (
                f"process {writer} never recorded this function with this signature (the "
                f"ledger of a remote cache is written by process {writer}, as JAX's cache "
                "entries are: a function that only this process compiles is not cached)")
        return MissReason.NEVER_SEEN, ("no earlier run recorded this function with this "
                                       "signature")
    if not any(now[W.KEY].get(p) for p in _jax_read.CACHE_KEY_PARTS):
        return None  # JAX's key hashing moved: nothing to compare, no reason given
    same = [e for e in earlier if _same_key(e[W.KEY], now[W.KEY])]
    if same:
        # An entry written under this key by any process serves every process: prefer it.
        entry = next((e for e in reversed(same) if e.get(W.WRITTEN)), same[-1])
        if entry.get(W.WRITTEN):
            return MissReason.NOT_WRITTEN, (
                f"{_when(entry, proc)} wrote an entry under the same key; it is gone "
                "(evicted under jax_compilation_cache_max_size, or the cache directory was "
                "cleared)")
        reason = str(entry.get(W.NOT_WRITTEN_REASON) or NotWrittenReason.OTHER.value)
        why = _NOT_WRITTEN_TEXT.get(reason, _readable(reason))
        return MissReason.NOT_WRITTEN, (
            f"{_when(entry, proc)} compiled it under the same key but did not write an "
            f"entry ({reason}: {why})")
    # The closest earlier key (fewest parts differ; the latest among equals).
    entry = min(reversed(earlier), key=lambda e: _differences(e[W.KEY], now[W.KEY]))
    other = entry.get(W.PROCESS)
    differing = _differing(entry[W.KEY], now[W.KEY])
    if (type(other) is int and type(proc) is int and proc != 0 and other != proc
            and differing and differing <= _PER_PROCESS_PARTS):
        # Another process's key, different only in the parts that describe the devices as
        # each process sees them: JAX writes only process 0's, so this one never is.
        parts = " and ".join(p.replace("_", " ") for p in _jax_read.CACHE_KEY_PARTS
                             if p in differing)
        return MissReason.NOT_WRITTEN, (
            f"{_when(entry, proc)} compiled it under a key that differs from this "
            f"process's only in the {parts} (the parts that describe the devices, as each "
            "process sees them); this process's key is never written (not_process_0: JAX "
            "writes entries from process 0 only)")
    part = _first_difference(entry[W.KEY], now[W.KEY])
    text = describe_change(part, entry, now) if part else "the cache key changed"
    return MissReason.KEY_CHANGED, f"{text}; since {_when(entry, proc)}"


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
        return resolve(self.setting, _jax_read.persistent_cache_dir())

    # --- one compile ------------------------------------------------------------------

    def note(self, info: FunctionInfo, fingerprint: str, program: str, inputs: Any,
             cache: PersistentCache, compile_s: float,
             signature: Any = None) -> PersistentCache:
        """Record one compile the persistent cache did not serve, and say why it did not."""
        if cache.hit or inputs is None or not (fingerprint or program):
            return cache
        path = self.path()
        if path is None or path in self._off:
            return cache
        parts = _jax_read.cache_key_parts(inputs, program)
        if parts is None:
            return cache
        reason = cache.not_written_reason
        proc = _process_index()
        # The order of the keys is the order on disk.
        now: Entry = {
            W.MARK: W.VERSION, W.TIME: round(time.time(), 3), W.RUN: _RUN,
            W.PID: os.getpid(), W.STARTED: round(_STARTED, 3), W.PROCESS: proc,
            W.FUNCTION: function_identity(info), W.SIGNATURE: fingerprint,
            W.PROGRAM: program, W.KEY: parts.hashes, **parts.readable,
            W.CODE: _code(info), W.WRITTEN: bool(cache.written),
            W.NOT_WRITTEN_REASON: reason.value if reason is not None else None,
            W.COMPILE_S: round(max(0.0, compile_s), 4),
        }
        if fingerprint and signature is not None and getattr(signature, "captured", False):
            now[W.BASE] = of_signature(info, replace(signature, context=()))
            now[W.CONTEXT_NAMES], now[W.CONTEXT] = context_items(signature.context)
        if W.XLA_FLAGS in now:
            now[W.XLA_FLAGS] = _flags(now[W.XLA_FLAGS])
        key = _key_of(now)
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
            data = _encode(now)
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
            if _same_key(old[W.KEY], entry[W.KEY]):
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
        older = [e for e in entries if not _concurrent(e)]
        if not older:
            return
        mine = self._index
        self._index, self._alike = {}, {}  # both rebuilt: the older lines first
        for entry in sorted(older, key=lambda e: e[W.TIME] if type(e.get(W.TIME)) in (int, float)
                            else 0.0):
            self._remember(_key_of(entry), entry)
        for kept in mine.values():
            for entry in kept:
                self._remember(_key_of(entry), entry)

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
        root = _jax_read.cache_path(url)
        store = None
        if root is None:
            self._off.add(url)
            self.failopen.warn_once(WarnKey(Topic.LEDGER, url), (
                f"otel_jax: cannot reach the compile ledger {url}: install etils[epath] "
                "(and gcsfs or s3fs), as JAX's cache on it needs; persistent-cache misses "
                "are not explained. The program is unaffected."))
        else:
            store = _remote().RemoteStore(url, root, self.failopen, MARK, VERSION,
                                          parse_entry, _key_of, KEEP_PER_KEY)
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
                if _concurrent(entry):
                    continue
                self._remember(_key_of(entry), entry)
        if skipped:
            self.skipped += skipped
            self.failopen.warn_once(WarnKey(Topic.LEDGER_SKIPPED, str(path)), (
                f"otel_jax: skipped {skipped} unreadable line(s) of the compile ledger "
                f"{path} (truncated, or not written by otel_jax); the others are used."))

    # --- the file ---------------------------------------------------------------------

    def _append(self, path: str, entry: Entry) -> None:
        if path in self._broken:
            return
        data = _encode(entry)
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
        return _jax_read.process_index()
    except Exception:
        return None


def _code(info: FunctionInfo) -> str | None:
    if not info.file:
        return None
    name = os.path.basename(info.file)
    return f"{name}:{info.line}" if info.line is not None else name


def _encode(entry: Entry) -> bytes | None:
    """One line, under ``MAX_LINE`` bytes: the readable flags go first when it is longer."""
    data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True) + "\n").encode()
    for name, short in ((W.XLA_FLAGS, ["<too long to keep>"]), (W.CONTEXT, [])):
        if len(data) > MAX_LINE and name in entry:
            entry = {**entry, name: short}
            data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True)
                    + "\n").encode()
    return data if len(data) <= MAX_LINE else None


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
