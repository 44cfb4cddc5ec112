"""Lowered programs kept in a folder, to read and to diff (``install(programs=DIR)``,
``OTEL_JAX_PROGRAMS``, ``otel-jax run --programs DIR``).

Each distinct program is kept once, by its program fingerprint (the same program compiled
again, in this run or another, is not written twice), gzip-compressed, as
``<function>-<fingerprint>.mlir.gz``: the text JAX's ``Lowered.as_text(debug_info=True)``
gives, with its source locations, large constants elided (their values are never written).
The folder is bounded in bytes (``MAX_BYTES``): past it, the oldest programs are dropped
first. Written where the record is made (off the compiling thread by default); a folder
that cannot be written costs one ``OtelJaxWarning`` and the programs, never the compile.
Nothing of a program leaves the process unless this folder is asked for.
"""

from __future__ import annotations

import gzip
import os
import re
import threading

from .._core._failopen import Topic, WarnKey, warn_once

#: The folder's bound in bytes: past it, the oldest programs are dropped first.
MAX_BYTES = 256 << 20
#: The suffix of a kept program (the report lists these).
SUFFIX = ".mlir.gz"
#: The longest function name part of a file name.
_NAME_LIMIT = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

_lock = threading.Lock()


def file_name(function: str, fingerprint: str) -> str:
    """``<function>-<fingerprint>.mlir.gz``, the function's name made safe for a file."""
    name = _UNSAFE.sub("_", function).strip("._")[:_NAME_LIMIT] or "program"
    return f"{name}-{fingerprint}{SUFFIX}"


def keep(folder: str, function: str, fingerprint: str, text: str,
         max_bytes: int = MAX_BYTES) -> str:
    """Keep ``text`` in ``folder`` as the program ``fingerprint`` of ``function``, unless
    kept already; the path, or ``""`` when it could not be written (said once)."""
    path = os.path.join(folder, file_name(function, fingerprint))
    try:
        with _lock:
            if os.path.exists(path):
                return path
            os.makedirs(folder, exist_ok=True)
            data = gzip.compress(text.encode("utf-8", "replace"), compresslevel=6)
            if len(data) > max_bytes:
                return ""
            partial = f"{path}.{os.getpid()}.part"
            with open(partial, "wb") as f:
                f.write(data)
            os.replace(partial, path)  # another process reading the folder sees it whole
            _bound(folder, max_bytes, keep=path)
        return path
    except OSError as exc:
        warn_once(WarnKey(Topic.PROGRAMS, folder),
                  f"otel_jax: cannot keep programs in {folder} ({type(exc).__name__}: "
                  f"{exc}); compiles are reported without their program files")
        return ""


def _bound(folder: str, max_bytes: int, keep: str) -> None:
    """Drop the oldest kept programs until the folder's programs fit in ``max_bytes``."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                found.append((stat.st_mtime_ns, entry.name, stat.st_size, entry.path))
    total = sum(size for _, _, size, _ in found)
    for _, _, size, path in sorted(found):
        if total <= max_bytes:
            break
        if path == keep:
            continue
        try:
            os.remove(path)
        except OSError:  # another process dropped it first
            pass
        total -= size
