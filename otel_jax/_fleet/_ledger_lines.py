"""The compile ledger's lines: what one holds, how it is parsed and encoded, and what the
earlier lines of a function and signature say about a persistent-cache miss.

Its own module: the format and the explanation are functions of lines alone (no file,
no store), the same for a local ledger (``_ledger``) and a remote one
(``_ledger_remote``, handed ``MARK``, ``VERSION``, ``parse_entry`` and ``key_of``).

A line keeps the function, its signature and program fingerprints, the key's parts as
hashes (JAX's own per-part hash functions, read by ``_cache_key.cache_key_parts``), the
readable values that are cheap and safe (versions, XLA flags, backend, devices), and
whether JAX wrote an entry. A later run compiling the same function and signature finds
the earlier line and says why the cache missed: ``never_seen``, ``key_changed`` (naming
the first part that differs) or ``not_written`` (the entry was not written, or is gone).

Across processes: JAX writes cache entries from process 0 only, and every process is
served from those entries, so a miss on any process is explained against what any
process recorded under the same function and signature (each line names its process):
the same key as process 0's means process 0's entry is gone or was never written; a
key part that differs is named, against process 0's key when that is the closest.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from .._capture._jax import _cache_key
from .._capture._source import FunctionInfo
from .._core._portable import function_identity
from .._core._scrub import without_digests
from .._core._text import emitted, safe_repr
from .._core._vocab import LedgerWire as W
from .._core._vocab import MissReason, NotWrittenReason
from .._pipeline._record import PersistentCache

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


def line_of(info: FunctionInfo, fingerprint: str, program: str,
            parts: _cache_key.CacheKeyParts, cache: PersistentCache, compile_s: float,
            signature: Any, proc: int | None, base: str = "") -> Entry:
    """The line of one compile the persistent cache did not serve; ``base``: its
    signature's fingerprint without the tracing context (the pipeline makes it)."""
    reason = cache.not_written_reason
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
        now[W.BASE] = base
        now[W.CONTEXT_NAMES], now[W.CONTEXT] = context_items(signature.context)
    if W.XLA_FLAGS in now:
        now[W.XLA_FLAGS] = _flags(now[W.XLA_FLAGS])
    return now


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


def key_of(entry: Entry) -> tuple[str, str]:
    return entry[W.FUNCTION], entry[W.SIGNATURE] or "program:" + str(entry.get(W.PROGRAM) or "")


def same_key(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two keys agree on every part both know (a part JAX's hashing moved is ``""``)."""
    return all(not (a.get(p) and b.get(p)) or a.get(p) == b.get(p)
               for p in _cache_key.CACHE_KEY_PARTS)


def _differences(before: dict[str, Any], after: dict[str, Any]) -> int:
    return sum(1 for part in _cache_key.CACHE_KEY_PARTS
               if before.get(part) and after.get(part) and before.get(part) != after.get(part))


#: Key parts that name the devices a program runs on: they differ between the processes
#: of a job for a program of each process's local devices, and agree for a global one.
_PER_PROCESS_PARTS = frozenset({W.PART_COMPILE_OPTIONS, W.PART_ACCELERATOR_CONFIG})


def _differing(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {part for part in _cache_key.CACHE_KEY_PARTS
            if before.get(part) and after.get(part) and before.get(part) != after.get(part)}


def _first_difference(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    for part in _cache_key.CACHE_KEY_PARTS:
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


def is_concurrent(entry: Entry) -> bool:
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
        if any(same_key(e[W.KEY], now[W.KEY]) for e in alike):
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
    if not any(now[W.KEY].get(p) for p in _cache_key.CACHE_KEY_PARTS):
        return None  # JAX's key hashing moved: nothing to compare, no reason given
    same = [e for e in earlier if same_key(e[W.KEY], now[W.KEY])]
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
        parts = " and ".join(p.replace("_", " ") for p in _cache_key.CACHE_KEY_PARTS
                             if p in differing)
        return MissReason.NOT_WRITTEN, (
            f"{_when(entry, proc)} compiled it under a key that differs from this "
            f"process's only in the {parts} (the parts that describe the devices, as each "
            "process sees them); this process's key is never written (not_process_0: JAX "
            "writes entries from process 0 only)")
    part = _first_difference(entry[W.KEY], now[W.KEY])
    text = describe_change(part, entry, now) if part else "the cache key changed"
    return MissReason.KEY_CHANGED, f"{text}; since {_when(entry, proc)}"


def _code(info: FunctionInfo) -> str | None:
    if not info.file:
        return None
    name = os.path.basename(info.file)
    return f"{name}:{info.line}" if info.line is not None else name


def encode_line(entry: Entry) -> bytes | None:
    """One line, under ``MAX_LINE`` bytes: the readable flags go first when it is longer."""
    data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True) + "\n").encode()
    for name, short in ((W.XLA_FLAGS, ["<too long to keep>"]), (W.CONTEXT, [])):
        if len(data) > MAX_LINE and name in entry:
            entry = {**entry, name: short}
            data = (json.dumps(entry, separators=(",", ":"), ensure_ascii=True)
                    + "\n").encode()
    return data if len(data) <= MAX_LINE else None
