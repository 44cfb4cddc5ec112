"""A fingerprint of a compile's signature that other processes and later runs can compare.

Two ranks of one job, or two runs of one job a day apart, compute the same
fingerprint for the same call: it hashes what JAX's cache compares (argument
paths and types, pytree structure, static values, tracing context, jit
options) and leaves out what differs between processes for the same program
(object ids, memory addresses, absolute paths, the local device a rank's
arrays are committed to). The function is named by module-relative qualified
name and file name, never by its absolute path.

Cost: per-leaf parts are hashed chunk by chunk, and a chunk shared with the
function's previous signature (see ``_leaves``) is hashed once, so a
recompile that changed one leaf of a 10,000-leaf argument hashes one chunk;
a part shared whole is one lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from .._core._idcache import IdentityCache
from .._core._portable import function_identity, placement_text, tree_digest
from .._core._scrub import without_digests
from .._core._text import safe_repr
from ._leaves import Leaves
from ._signature import Signature
from ._source import FunctionInfo

#: Hex digits of a fingerprint: 64 bits, plenty to tell a job's compiles apart.
DIGITS = 16
_SEP = "\x1f"
_MAX_CHUNK_DIGESTS = 8192
_MAX_LEAVES_DIGESTS = 1024

Fingerprint = str


_chunk_digests: IdentityCache[bytes] = IdentityCache(_MAX_CHUNK_DIGESTS)


def _chunk_digest(chunk: tuple[Any, ...], text: Any) -> bytes:
    """The digest of one chunk of leaves, once per chunk object."""
    digest = _chunk_digests.get(chunk)
    if digest is None:
        digest = _chunk_digests.put(chunk, hashlib.blake2b(
            _SEP.join(map(text, chunk)).encode("utf-8", "backslashreplace"),
            digest_size=16).digest())
    return digest


#: The chunk digests of a whole part, per Leaves object and text function.
_part_digests: IdentityCache[tuple[Any, bytes]] = IdentityCache(_MAX_LEAVES_DIGESTS)


def _leaf_parts(hasher: Any, values: Iterable[Any] | Leaves[Any], text: Any) -> None:
    if isinstance(values, Leaves):
        # A part shared whole with the previous signature (the same Leaves object)
        # is one lookup; the bytes are the chunk digests, fed as they would be one by one.
        found = _part_digests.get(values)
        if found is not None and found[0] is text:
            joined = found[1]
        else:
            joined = b"".join([_chunk_digest(chunk, text) for chunk in values._chunks])
            _part_digests.put(values, (text, joined))
        hasher.update(joined)
        return
    hasher.update(_SEP.join(map(text, values)).encode("utf-8", "backslashreplace"))


_contexts: dict[Any, bytes] = {}


def _context_digest(context: tuple[tuple[str, Any], ...]) -> bytes:
    """The tracing context's values as text, hashed once per distinct context (JAX keys
    its own caches on these values, so they hash; a process sees a handful)."""
    try:
        found = _contexts.get(context)
    except TypeError:  # an unhashable config value: hashed each time
        found, context_key = None, None
    else:
        context_key = context
    if found is not None:
        return found
    h = hashlib.blake2b(digest_size=16)
    for name, value in context:
        config = without_digests(safe_repr(value, 200))
        h.update(f"|{name}={config}".encode("utf-8", "backslashreplace"))
    digest = h.digest()
    if context_key is not None:
        if len(_contexts) >= 256:
            _contexts.clear()
        _contexts[context_key] = digest
    return digest


def of_signature(info: FunctionInfo, signature: Signature) -> Fingerprint:
    """The fingerprint of one compile's signature (an empty string if it was not captured)."""
    if not signature.captured:
        return ""
    h = hashlib.blake2b(digest_size=DIGITS // 2)
    h.update(function_identity(info).encode("utf-8", "backslashreplace"))
    h.update(signature.transform.encode() + b"|" + signature.program.encode())
    for part, text in ((signature.paths, str), (signature.types, str),
                       (signature.placements, placement_text)):
        h.update(b"|")
        _leaf_parts(h, part, text)
    h.update(b"|" + tree_digest(signature.treedef))
    h.update(b"|" + _SEP.join(signature.top_names).encode("utf-8", "backslashreplace"))
    for static in signature.statics:
        # An identity-hashed value is a new object in every process: its type is
        # what two processes can agree on.
        value = f"<{static.type}>" if static.identity_hashed else without_digests(static.repr)
        h.update(f"|{static.kind.value}:{static.name}={value}".encode("utf-8", "backslashreplace"))
    h.update(_context_digest(signature.context))
    for name, option in signature.options:
        h.update(f"|jit({name})={option}".encode("utf-8", "backslashreplace"))
    return h.hexdigest()
