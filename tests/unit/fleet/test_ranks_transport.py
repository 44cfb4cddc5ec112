"""``_fleet._ranks_transport``: the cross-rank check's calls on a key-value store (failing
open), the generations of a key every rank reads, and waits that closing ends."""

from __future__ import annotations

import threading
import time

from otel_jax._core._failopen import FailOpen
from otel_jax._fleet import _ranks_transport
from otel_jax._fleet._ranks_transport import WAKE, Channel, ClientStore, Read, Store, Wait


class Dict:
    """A ``Store`` in one dict; its waits answer at once (or block, ``blocking=True``)."""

    def __init__(self, blocking: bool = False) -> None:
        self.data: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.blocking = blocking
        self.cond = threading.Condition()

    def set(self, key: str, value: str) -> None:
        with self.cond:
            self.calls.append(("set", key))
            self.data[key] = value
            self.cond.notify_all()

    def create(self, key: str, value: str) -> bool:
        with self.cond:
            self.calls.append(("create", key))
            if key in self.data:
                return False
            self.data[key] = value
            self.cond.notify_all()
            return True

    def increment(self, key: str, by: int) -> int:
        self.calls.append(("increment", key))
        value = _ranks_transport.counter_sum(self.data.get(key), by)
        self.data[key] = str(value)
        return value

    def dir_get(self, directory: str) -> list[tuple[str, str]]:
        self.calls.append(("dir_get", directory))
        return sorted((k, v) for k, v in self.data.items() if k.startswith(directory))

    def delete(self, key: str) -> None:
        self.calls.append(("delete", key))
        for k in [k for k in self.data if k == key or k.startswith(key + "/")]:
            del self.data[k]

    def wait(self, key: str, timeout_ms: int) -> str | None:
        with self.cond:
            self.calls.append(("wait", key))
            if self.blocking:
                self.cond.wait_for(lambda: key in self.data, timeout_ms / 1000)
            return self.data.get(key)


class Failing(Dict):
    def set(self, key: str, value: str) -> None:
        self.calls.append(("set", key))
        raise RuntimeError("UNAVAILABLE: Failed to send RPC to coordination service")


def _channel(store: Store, warned: list[str] | None = None) -> Channel:
    failopen = FailOpen(warn=lambda message, *a, **k: (warned if warned is not None
                                                       else []).append(message))
    return Channel(store, time.monotonic, failopen)


def test_a_shared_key_is_written_once_first_writer_wins():
    store = Dict()
    channel = _channel(store)
    assert channel.publish_shared("v", '{"g":1}')
    assert channel.publish_shared("v", '{"g":2}')  # set already: it stands
    assert store.data == {"v": '{"g":1}'}


def test_a_shared_key_a_rank_woke_is_written_at_its_next_generation():
    store = Dict()
    store.data["v"] = WAKE  # a rank closed while reading it
    channel = _channel(store)
    assert channel.publish_shared("v", "verdict")
    assert store.data == {"v": WAKE, "v~1": "verdict"}
    # and a reader of ``v`` that finds that WAKE (not its own) reads ``v~1``
    assert channel.wait(Wait("v", time.monotonic() + 1, Read.SHARED)) == "verdict"
    # a key only this process waits for, found WAKE: its read was ended (closing)
    assert channel.wait(Wait("v", time.monotonic() + 1, Read.OWN)) is None


def test_a_shared_key_gives_up_after_its_generations():
    store = Dict()
    for n in range(_ranks_transport.MAX_GENERATIONS):
        store.data["v" if n == 0 else f"v~{n}"] = WAKE
    channel = _channel(store)
    assert not channel.publish_shared("v", "verdict")
    assert channel.wait(Wait("v", time.monotonic() + 1, Read.SHARED)) is None


def test_calls_fail_open_and_the_check_stops_after_repeated_failures():
    warned: list[str] = []
    store = Failing()
    channel = _channel(store, warned)
    for _ in range(_ranks_transport.MAX_FAILURES + 2):
        assert channel.set("publish", "k", "v") is False
    assert channel.off
    assert len(store.calls) == _ranks_transport.MAX_FAILURES  # off: no call more
    [message] = warned
    assert "failed 3 times (publish: RuntimeError: " in message
    assert channel.increment("takeover", "t") is None
    assert channel.dir_get("read", "d/") is None


def test_a_call_that_succeeds_resets_the_failures():
    store = Dict()
    channel = _channel(store)
    assert channel.increment("publish", "n") == 1 and channel.increment("publish", "n", 2) == 3
    assert channel.dir_get("read", "n") == [("n", "3")]
    assert channel.delete("clean-up", "n") and store.data == {}
    channel._failures = _ranks_transport.MAX_FAILURES - 1
    assert channel.set("publish", "k", "v") and channel._failures == 0
    assert not channel.off


def test_closing_cuts_calls_off_and_ends_reads():
    store = Dict()
    channel = _channel(store)
    channel.close(time.monotonic() - 1)
    assert not channel.set("publish", "k", "v") and store.calls == []
    assert channel.wait(Wait("k", time.monotonic() + 1)) is None


def test_waking_ends_the_reads_in_flight_at_once():
    store = Dict(blocking=True)
    channel = _channel(store)
    got: dict[str, str | None] = {}
    readers = [threading.Thread(target=lambda k=k, r=r: got.__setitem__(
        k, channel.wait(Wait(k, time.monotonic() + 30, r)))) for k, r in
        (("own", Read.OWN), ("shared", Read.SHARED))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 10
    while len(channel._reading) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    channel.close(started + 1)
    channel.wake()
    for reader in readers:
        reader.join(5)
    assert time.monotonic() - started < 2
    assert got == {"own": None, "shared": None}
    # an own key is set to WAKE; a shared one created as WAKE (it was not set)
    assert store.data == {"own": WAKE, "shared": WAKE}
    assert ("set", "own") in store.calls and ("create", "shared") in store.calls


def test_drive_runs_the_steps_with_the_stores_reads():
    store = Dict()
    store.data["a"] = "1"
    channel = _channel(store)

    def steps():
        first = yield Wait("a", time.monotonic() + 1)
        second = yield Wait("b", time.monotonic() + 0.01)
        return (first, second)

    assert channel.drive(steps()) == ("1", None)
    channel.close(time.monotonic())
    assert channel.drive(steps()) is None  # closed: not settled here


class _Client:
    """JAX's client as the service answers: statuses in the exception's text."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def key_value_set(self, key, value, allow_overwrite=False):
        if not allow_overwrite and key in self.data:
            raise RuntimeError(f"ALREADY_EXISTS: key {key} already exists.")
        self.data[key] = value

    def blocking_key_value_get(self, key, timeout_in_ms):
        if key not in self.data:
            raise RuntimeError(f"DEADLINE_EXCEEDED: GetKeyValue() timed out with key: {key}")
        return self.data[key]

    def key_value_increment(self, key, increment):
        self.data[key] = str(int(self.data.get(key, "0")) + increment)
        return int(self.data[key])

    def key_value_dir_get(self, prefix):
        return [(k, v) for k, v in self.data.items() if k.startswith(prefix)]

    def key_value_delete(self, key):
        self.data.pop(key, None)


def test_the_client_store_speaks_the_clients_statuses():
    client = _Client()
    store = ClientStore(client)
    assert store.create("k", "1") and not store.create("k", "2")
    store.set("k", "3")  # overwrites
    assert store.wait("k", 10) == "3" and store.wait("absent", 10) is None
    assert store.increment("n", 1) == 1 and store.increment("n", 5) == 6
    assert store.dir_get("n") == [("n", "6")]
    store.delete("n")
    assert client.data == {"k": "3"}
