"""What every process of a job, and every later run, says alike: a function named without
its directory, a placement without the local device its arrays are committed to, a pytree's
structure without addresses.

Capture's fingerprints hash these words (``_capture._fingerprint``) and the cross-rank
check sends them to its peers (``_fleet._ranks_name``): one rule for both, kept here, below
them, so that the fleet reads them without going back into capture.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Protocol

from ._idcache import IdentityCache
from ._scrub import without_digests
from ._text import safe_repr


class Named(Protocol):
    """A compiled function's source (``_capture._source.FunctionInfo``)."""

    @property
    def qualname(self) -> str: ...

    @property
    def file(self) -> str | None: ...


class Placed(Protocol):
    """Where an argument lives (``_capture._signature.Placement``)."""

    @property
    def text(self) -> str: ...

    @property
    def sharded(self) -> bool: ...


def function_identity(info: Named) -> str:
    """The function as every host names it: qualified name and file name, no directory."""
    name = os.path.basename(info.file) if info.file else ""
    return f"{info.qualname}@{name}"


def placement_text(placement: Placed) -> str:
    # Each rank commits its arrays to its own local device: "committed cpu:3"
    # on one rank is "committed cpu:0" on another for the same program.
    text = placement.text
    if not placement.sharded and text.startswith("committed "):
        return "committed"
    return text


_tree_digests: IdentityCache[bytes] = IdentityCache(1024)


def tree_digest(treedef: Any) -> bytes:
    """The whole structure (node types, dict keys, static fields; no addresses), hashed
    once per treedef object: signatures of one function share theirs when equal."""
    digest = _tree_digests.get(treedef)
    if digest is None:
        text = without_digests(safe_repr(treedef, 1 << 30))
        digest = _tree_digests.put(treedef, hashlib.blake2b(
            text.encode("utf-8", "backslashreplace"), digest_size=16).digest())
    return digest
