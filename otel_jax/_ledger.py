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

Nothing is done on a persistent-cache hit. Everything here runs under the engine's
fail-open guard; a ledger that cannot be written costs one warning.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from typing import Any

from . import _jax_read
from ._failopen import FailOpen
from ._fingerprint import function_identity
from ._record import PersistentCache
from ._source import FunctionInfo
from ._text import emitted, truncate
from ._vocab import LEDGER_ENV, MissReason

#: Default location: beside the cache directory, never inside it (JAX owns that one).
SUFFIX = ".otel_jax-ledger.jsonl"
#: The mark and version every ledger line carries; other lines are foreign.
MARK = "otel_jax_ledger"
VERSION = 1
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
    "not_process_0": "JAX writes entries from process 0 only",
    "compile_time_below_minimum": "it compiled faster than "
                                  "jax_persistent_cache_min_compile_time_secs",
    "other": "under jax_persistent_cache_min_entry_size_bytes, a host callback, "
             "or a write error",
}

Entry = dict[str, Any]


def default_path(cache_dir: str | None) -> str | None:
    """``<cache_dir>.otel_jax-ledger.jsonl`` for a local cache directory, else ``None``."""
    if not cache_dir or "://" in cache_dir:
        return None  # a remote cache (gs://...): no atomic appends there
    directory = os.path.abspath(os.path.expanduser(cache_dir)).rstrip("/\\")
    return directory + SUFFIX if directory else None


def resolve(setting: Any, cache_dir: str | None) -> str | None:
    """The ledger's path: ``install(ledger_path=...)``, else ``OTEL_JAX_LEDGER``, else
    beside the cache directory; ``None`` (off) with the cache off or when asked."""
    if not cache_dir or setting is False:
        return None
    if isinstance(setting, str) and setting.strip().lower() in _OFF:
        return None
    if setting is not None and setting is not True:
        return str(os.path.abspath(os.path.expanduser(os.fspath(setting))))
    env = os.environ.get(LEDGER_ENV, "").strip()
    if env.lower() in _OFF:
        return None
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return default_path(cache_dir)


def parse_line(line: bytes) -> Entry | None:
    """One ledger line, or ``None`` for anything else (truncated, garbage, foreign)."""
    try:
        entry = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not (isinstance(entry, dict) and entry.get(MARK) == VERSION
            and isinstance(entry.get("fn"), str) and isinstance(entry.get("sig"), str)
            and isinstance(entry.get("key"), dict)):
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
    return entry["fn"], entry["sig"] or "program:" + str(entry.get("prog") or "")


def _same_key(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two keys agree on every part both know (a part JAX's hashing moved is ``""``)."""
    return all(not (a.get(p) and b.get(p)) or a.get(p) == b.get(p)
               for p in _jax_read.CACHE_KEY_PARTS)


def _differences(before: dict[str, Any], after: dict[str, Any]) -> int:
    return sum(1 for part in _jax_read.CACHE_KEY_PARTS
               if before.get(part) and after.get(part) and before.get(part) != after.get(part))


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
    if part == "computation":
        where = after.get("code") or after.get("fn", "").partition("@")[0]
        return f"program changed under the same signature (code edited at {where}?)"
    if part == "jax_lib version":
        text = f"jaxlib {_readable(before.get('jaxlib'))} -> {_readable(after.get('jaxlib'))}"
        if before.get("jax") != after.get("jax"):
            text += f" (jax {_readable(before.get('jax'))} -> {_readable(after.get('jax'))})"
        return text
    if part == "backend version":
        return f"backend {_readable(before.get('backend'))} -> {_readable(after.get('backend'))}"
    if part == "XLA flags":
        old, new = _flags(before.get("xla_flags")), _flags(after.get("xla_flags"))
        changes = [f"+{f}" for f in new if f not in old] + [f"-{f}" for f in old if f not in new]
        return "XLA flags: " + (" ".join(changes) if changes else "changed (same flags, "
                                "other order or a registered flag prefix)")
    if part == "compile_options":
        return ("compile options changed (XLA debug options or flags set in code, jit "
                "compiler_options, or the device assignment)")
    if part == "accelerator_config":
        old_d, new_d = before.get("devices"), after.get("devices")
        if old_d != new_d:
            return f"devices {_readable(old_d)} -> {_readable(new_d)}"
        return "accelerator topology changed (other devices of the same kind)"
    if part == "compression":
        return (f"compression {_readable(before.get('compression'))} -> "
                f"{_readable(after.get('compression'))} (zstandard installed or removed?)")
    return "the cache key's custom hook (jax._src.cache_key.custom_hook) returned another value"


def _concurrent(entry: Entry) -> bool:
    """A line written, after this process started, by a process started beside it (a
    sibling rank): not an earlier run's. A run that ended before this one started (a
    restart), or started long after it (beside a notebook kernel), is one; so are lines
    without the writer's start time (older ledgers)."""
    started, t = entry.get("started"), entry.get("t")
    if (entry.get("run") == _RUN or type(started) not in (int, float)
            or type(t) not in (int, float)):
        return False
    return (float(t) >= _STARTED  # type: ignore[arg-type]
            and abs(float(started) - _STARTED) <= SIBLING_START_S)  # type: ignore[arg-type]


def _when(entry: Entry) -> str:
    if entry.get("run") == _RUN:
        return "an earlier compile in this process"
    t = entry.get("t")
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        stamp = "?"
    return f"the run of {stamp} (pid {_readable(entry.get('pid'))})"


def explain(earlier: list[Entry], now: Entry) -> tuple[MissReason, str] | None:
    """Why the cache did not serve ``now``, given the earlier lines of its function and
    signature (latest last); ``None`` when no part of its key could be read."""
    if not earlier:
        return MissReason.NEVER_SEEN, ("no earlier run recorded this function with this "
                                       "signature")
    if not any(now["key"].get(p) for p in _jax_read.CACHE_KEY_PARTS):
        return None  # JAX's key hashing moved: nothing to compare, no reason given
    same = [e for e in earlier if _same_key(e["key"], now["key"])]
    if same:
        entry = same[-1]
        if entry.get("written"):
            return MissReason.NOT_WRITTEN, (
                f"{_when(entry)} wrote an entry under the same key; it is gone (evicted "
                "under jax_compilation_cache_max_size, or the cache directory was cleared)")
        reason = str(entry.get("not_written_reason") or "other")
        why = _NOT_WRITTEN_TEXT.get(reason, _readable(reason))
        return MissReason.NOT_WRITTEN, (
            f"{_when(entry)} compiled it under the same key but did not write an entry "
            f"({reason}: {why})")
    # The closest earlier key (fewest parts differ; the latest among equals).
    entry = min(reversed(earlier), key=lambda e: _differences(e["key"], now["key"]))
    part = _first_difference(entry["key"], now["key"])
    text = describe_change(part, entry, now) if part else "the cache key changed"
    return MissReason.KEY_CHANGED, f"{text}; since {_when(entry)}"


class Ledger:
    """The compile ledger of one process: the earlier runs' lines, and this run's."""

    def __init__(self, failopen: FailOpen) -> None:
        self.failopen = failopen
        self.setting: Any = None  # install(ledger_path=...): None, False or a path
        self.skipped = 0  # lines read that were not ledger lines
        self.unwritten = 0  # lines that could not be written
        self._lock = threading.Lock()
        self._path: str | None = None  # whose lines are indexed
        self._index: dict[tuple[str, str], list[Entry]] = {}
        self._broken: set[str] = set()  # paths that could not be written
        self._unterminated: set[str] = set()  # paths whose last line was cut short

    def configure(self, setting: Any) -> None:
        self.setting = setting

    def path(self) -> str | None:
        return resolve(self.setting, _jax_read.persistent_cache_dir())

    # --- one compile ------------------------------------------------------------------

    def note(self, info: FunctionInfo, fingerprint: str, program: str, inputs: Any,
             cache: PersistentCache, compile_s: float) -> PersistentCache:
        """Record one compile the persistent cache did not serve, and say why it did not."""
        if cache.hit or inputs is None or not (fingerprint or program):
            return cache
        path = self.path()
        if path is None:
            return cache
        parts = _jax_read.cache_key_parts(inputs, program)
        if parts is None:
            return cache
        reason = cache.not_written_reason
        now: Entry = {
            MARK: VERSION, "t": round(time.time(), 3), "run": _RUN, "pid": os.getpid(),
            "started": round(_STARTED, 3),
            "fn": function_identity(info), "sig": fingerprint, "prog": program,
            "key": parts.hashes, **parts.readable,
            "code": _code(info), "written": bool(cache.written),
            "not_written_reason": reason.value if reason is not None else None,
            "compile_s": round(max(0.0, compile_s), 4),
        }
        if "xla_flags" in now:
            now["xla_flags"] = _flags(now["xla_flags"])
        key = _key_of(now)
        with self._lock:
            if self._path != path:
                self._load(path)
            earlier = list(self._index.get(key, ()))
            self._remember(key, now)
        explained = explain(earlier, now)
        self._append(path, now)
        if explained is None:
            return cache
        miss, detail = explained
        return replace(cache, miss_reason=miss, miss_detail=truncate(detail, DETAIL_LIMIT))

    # --- the index --------------------------------------------------------------------

    def _remember(self, key: tuple[str, str], entry: Entry) -> None:
        kept = self._index.pop(key, None) or []
        for i, old in enumerate(kept):
            if _same_key(old["key"], entry["key"]):
                if old.get("written") and not entry.get("written"):
                    # An entry was written under this key once: that is what matters.
                    entry = {**entry, "written": True, "not_written_reason": None}
                del kept[i]
                break
        kept.append(entry)
        del kept[:-KEEP_PER_KEY]
        self._index[key] = kept
        if len(self._index) > MAX_INDEXED:
            del self._index[next(iter(self._index))]

    def _load(self, path: str) -> None:
        """Index the earlier runs' lines of ``path`` (bounded: ``2 * MAX_BYTES`` read)."""
        self._path = path
        self._index = {}
        skipped = 0
        for name in (path + ".1", path):
            try:
                lines, _missing = read_tail(name)
            except OSError as exc:
                self.failopen.warn_once(f"ledger-read:{path}", (
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
            self.failopen.warn_once(f"ledger-skipped:{path}", (
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
            self.failopen.warn_once(f"ledger-write:{path}", (
                f"otel_jax: cannot write the compile ledger {path} ({type(exc).__name__}: "
                f"{exc}); set OTEL_JAX_LEDGER or install(ledger_path=...) to a writable "
                "file, or 'off'. The program is unaffected."))
            return
        if size > MAX_BYTES:
            rotate(path)


def _code(info: FunctionInfo) -> str | None:
    if not info.file:
        return None
    name = os.path.basename(info.file)
    return f"{name}:{info.line}" if info.line is not None else name


def _encode(entry: Entry) -> bytes | None:
    """One line, under ``MAX_LINE`` bytes: the readable flags go first when it is longer."""
    data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True) + "\n").encode()
    if len(data) > MAX_LINE and "xla_flags" in entry:
        entry = {**entry, "xla_flags": ["<too long to keep>"]}
        data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True) + "\n").encode()
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
        lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o644)
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
            os.replace(path, path + ".1")
        except OSError:
            return False
        return True
    finally:
        os.close(lock)  # releases the lock
