"""The coordination service of a multi-process job: the distributed runtime client
``jax.distributed.initialize`` started, and its key-value calls.

Its own module: the client is read off ``jax._src.distributed.global_state``, and its
methods' names, arguments and error statuses are jaxlib's. Checked on JAX 0.8.0, 0.10.2
and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: no client (single
process, or the state moved): ranks are not compared; a client lacking a method
(``coordination_missing``) is said once and not used.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._core._where import jax_call

#: The key-value methods of JAX's distributed runtime client that ``_ranks`` uses (present
#: from JAX 0.8 to 0.12 with these names and arguments).
COORDINATION_METHODS = ("key_value_set", "key_value_dir_get", "key_value_delete",
                        "key_value_increment", "blocking_key_value_get")


class Coordination(NamedTuple):
    """The distributed runtime client ``jax.distributed.initialize`` started, and this
    process's place in the job."""

    client: Any
    process_index: int
    process_count: int


@jax_call
def coordination() -> Coordination | None:
    """The job's coordination client when this is one process of several, else ``None``.

    Reads only attributes (no backend is initialised): cheap enough to ask at every
    compile of a single-process program.
    """
    try:
        from jax._src import distributed
    except Exception:
        return None
    state = getattr(distributed, "global_state", None)
    client = getattr(state, "client", None)
    if client is None:
        return None
    count = getattr(state, "num_processes", None)
    index = getattr(state, "process_id", None)
    if not isinstance(count, int) or not isinstance(index, int) or count <= 1:
        return None
    return Coordination(client, index, count)


@jax_call
def coordination_missing(client: Any) -> tuple[str, ...]:
    """The key-value methods this JAX's client lacks (empty when all are there)."""
    return tuple(m for m in COORDINATION_METHODS if not callable(getattr(client, m, None)))


@jax_call
def kv_set(client: Any, key: str, value: str) -> None:
    client.key_value_set(key, value, True)  # allow_overwrite: a re-published entry


#: The status the client raises with when a key set without overwriting exists.
_EXISTS = "ALREADY_EXISTS"


@jax_call
def kv_create(client: Any, key: str, value: str) -> bool:
    """Sets the key only if it is not set: ``False`` when it was (first writer wins)."""
    try:
        client.key_value_set(key, value, False)
    except Exception as exc:
        if str(exc).startswith(_EXISTS):
            return False
        raise
    return True


@jax_call
def kv_dir_get(client: Any, directory: str) -> list[tuple[str, str]]:
    return list(client.key_value_dir_get(directory))


@jax_call
def kv_delete(client: Any, key: str) -> None:
    """Deletes the key and every key under ``key/`` (the service deletes directories)."""
    client.key_value_delete(key)


@jax_call
def kv_increment(client: Any, key: str, by: int = 1) -> int:
    """Adds ``by`` to the counter at ``key`` (made at 0 when absent): the value after it."""
    return int(client.key_value_increment(key, by))


#: The status the client raises with when a blocking read's timeout passed.
_DEADLINE = "DEADLINE_EXCEEDED"


@jax_call
def kv_wait(client: Any, key: str, timeout_ms: int) -> str | None:
    """The key's value, waiting at most ``timeout_ms`` for it to be set: ``None`` when the
    time passed first. One call on the service however long the wait (the client
    releases the GIL while it waits)."""
    try:
        return str(client.blocking_key_value_get(key, int(timeout_ms)))
    except Exception as exc:
        if str(exc).startswith(_DEADLINE):
            return None
        raise
