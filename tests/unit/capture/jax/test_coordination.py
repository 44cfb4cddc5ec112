"""``_capture._jax._coordination``: the key-value calls on the job's coordination client
(a stand-in with the method names, arguments and error statuses of jaxlib's client)."""

from __future__ import annotations

import pytest

from otel_jax._capture._jax import _coordination


class Client:
    def __init__(self) -> None:
        self.store: dict[str, str] = {}

    def key_value_set(self, key, value, allow_overwrite=False):
        if key in self.store and not allow_overwrite:
            raise RuntimeError(f"ALREADY_EXISTS: {key}")
        self.store[key] = value

    def key_value_dir_get(self, directory):
        return [(k, v) for k, v in sorted(self.store.items()) if k.startswith(directory)]

    def key_value_delete(self, key):
        for k in [k for k in self.store if k == key or k.startswith(key + "/")]:
            del self.store[k]

    def key_value_increment(self, key, by):
        self.store[key] = str(int(self.store.get(key, "0")) + by)
        return int(self.store[key])

    def blocking_key_value_get(self, key, timeout_ms):
        if key == "broken":
            raise RuntimeError("UNAVAILABLE: the service is gone")
        if key not in self.store:
            raise RuntimeError("DEADLINE_EXCEEDED: waited")
        return self.store[key]


def test_the_first_writer_wins_and_a_set_overwrites():
    client = Client()
    assert _coordination.kv_create(client, "k", "a")
    assert not _coordination.kv_create(client, "k", "b")
    assert client.store["k"] == "a"
    _coordination.kv_set(client, "k", "c")
    assert client.store["k"] == "c"


def test_a_wait_past_its_deadline_is_none_any_other_error_raises():
    client = Client()
    assert _coordination.kv_wait(client, "k", 10) is None
    _coordination.kv_set(client, "k", "v")
    assert _coordination.kv_wait(client, "k", 10) == "v"
    with pytest.raises(RuntimeError, match="UNAVAILABLE"):
        _coordination.kv_wait(client, "broken", 10)


def test_counters_directories_and_deletes():
    client = Client()
    assert _coordination.kv_increment(client, "d/n") == 1
    assert _coordination.kv_increment(client, "d/n", 2) == 3
    _coordination.kv_set(client, "d/x", "1")
    assert _coordination.kv_dir_get(client, "d/") == [("d/n", "3"), ("d/x", "1")]
    _coordination.kv_delete(client, "d")
    assert client.store == {}


def test_the_methods_a_client_lacks():
    assert _coordination.coordination_missing(Client()) == ()
    assert _coordination.coordination_missing(object()) == _coordination.COORDINATION_METHODS


def test_a_single_process_has_no_coordination():
    assert _coordination.coordination() is None
