"""The compile ledger on a remote cache: real restarts against a real S3 server.

moto's server mode (``moto_server``) runs on 127.0.0.1 as a subprocess; JAX's cache and
the ledger reach it through ``etils.epath`` and ``s3fs``, with ``AWS_ENDPOINT_URL``
pointing at it, as a job on S3 would. Each run is a fresh process with its own home and
temporary directories (a replaced host: nothing carried over on local disk). The layout's
bounds and the store's failure handling are checked in-process against a directory.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import PERSISTENT_CACHE_PREAMBLE, clean_env, free_port, loopback_listener

from otel_jax._capture._jax import _cache_key, _persistent_cache
from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import LedgerWire
from otel_jax._fleet import _ledger, _ledger_lines, _ledger_remote

pytest.importorskip("moto")
pytest.importorskip("s3fs")
pytest.importorskip("etils.epath")

TIMEOUT_S = 180
SERVER_START_S = 60

PROGRAM = """
    import time
    if len(sys.argv) > 3 and sys.argv[3] != "-":
        jax.config.update("jax_default_matmul_precision", sys.argv[3])

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x.T) * SCALE

    started = time.perf_counter()
    out = step(jnp.ones((4, 4)))
    first_call_s = time.perf_counter() - started
    started = time.perf_counter()
    step(jnp.ones((5, 4)))  # a second miss, in another shape
    second_call_s = time.perf_counter() - started
    otel_jax.flush(120)  # the telemetry, and the ledger's writes (none on a failing store)
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    print(json.dumps({"lines": [l for l in lines if l["function"] == "step"],
                      "value": float(out[0, 0]), "first_call_s": first_call_s,
                      "second_call_s": second_call_s}))
"""


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """A real S3 endpoint: moto's server, started and stopped by the test module."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from moto.server import main; main()",
             "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        deadline = time.monotonic() + SERVER_START_S
        while True:  # ready when it answers S3's ListBuckets
            try:
                with urllib.request.urlopen(url + "/", timeout=2) as answer:
                    if answer.status == 200 and b"ListAllMyBucketsResult" in answer.read():
                        break
            except OSError:
                pass
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _aws(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _bucket(endpoint: str) -> str:
    import boto3

    name = "jobs-" + uuid.uuid4().hex[:12]
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                 aws_secret_access_key="testing", region_name="us-east-1").create_bucket(
        Bucket=name)
    return name


def _objects(endpoint: str, bucket: str, prefix: str) -> dict[str, bytes]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            for o in listed}


def _run(tmp_path, cache, endpoint, *, scale="3", precision="-", env=None, host="a"):
    """One run on a fresh host: its own home, temporary and working directories."""
    home = tmp_path / f"host-{host}-{uuid.uuid4().hex[:6]}"
    home.mkdir()
    body = PROGRAM.replace("SCALE", scale)
    extra = {**_aws(endpoint), "HOME": str(home), "TMPDIR": str(home), **(env or {})}
    script = home / "program.py"
    script.write_text(PERSISTENT_CACHE_PREAMBLE + textwrap.dedent(body))
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(script), cache, "0", precision],
                         env=clean_env(**extra), capture_output=True, text=True,
                         timeout=TIMEOUT_S, cwd=home)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"], result["run_s"] = out.stderr, time.monotonic() - started
    return result, result["lines"][0]


@pytest.mark.slow
def test_restarts_on_s3_explain_a_flag_a_program_and_a_context_change(tmp_path, s3_server):
    bucket = _bucket(s3_server)
    cache = f"s3://{bucket}/jax-cache"
    out, first = _run(tmp_path, cache, s3_server, host="a")
    assert first["persistent_cache_hit"] is False
    assert first["persistent_cache_miss_reason"] == "never_seen"
    ledger = _objects(s3_server, bucket, "jax-cache.otel_jax-ledger/")
    assert ledger and all(len(v) <= _ledger_remote.BUCKET_BYTES for v in ledger.values())
    assert not list(tmp_path.rglob("*otel_jax-ledger*"))  # nothing on a host's disk

    # Another host, same program: JAX's cache on S3 serves it; nothing is recorded.
    _, same = _run(tmp_path, cache, s3_server, host="b")
    assert same["persistent_cache_hit"] is True
    assert "persistent_cache_miss_reason" not in same
    assert _objects(s3_server, bucket, "jax-cache.otel_jax-ledger/") == ledger

    # An XLA flag set on the replacement host: named, with its value.
    _, flag = _run(tmp_path, cache, s3_server, host="c",
                   env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"})
    assert flag["persistent_cache_miss_reason"] == "key_changed"
    assert flag["persistent_cache_miss_detail"].startswith(
        "XLA flags: +--xla_cpu_enable_fast_math=true; since the run of ")

    # The program edited under the same signature.
    _, edited = _run(tmp_path, cache, s3_server, scale="4", host="d")
    assert edited["persistent_cache_miss_reason"] == "key_changed"
    assert edited["persistent_cache_miss_detail"].startswith(
        "program changed under the same signature (code edited at program.py:")

    # A tracing-context value changed: the config value is named, not "never seen".
    out, context = _run(tmp_path, cache, s3_server, scale="4", precision="highest", host="e")
    assert context["persistent_cache_miss_reason"] == "key_changed", context
    assert context["persistent_cache_miss_detail"].startswith(
        "tracing context changed: jax_default_matmul_precision None -> "), context
    assert "highest" in context["persistent_cache_miss_detail"]
    assert "compile ledger" not in out["stderr"]  # no warning on a working store
    assert not list(tmp_path.rglob("*otel_jax-ledger*"))


# --- item: a miss on a process that did not write the entry -------------------------

RANK_PROGRAM = textwrap.dedent("""
    import io, json, sys
    import jax
    rank, port, cache = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_platforms", "cpu")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                               process_id=rank, initialization_timeout=60)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    import otel_jax

    buf = io.StringIO()
    otel_jax.install(log_output=buf)

    @jax.jit
    def step(x):  # one program over the devices of both processes
        return jnp.tanh(x) * 3

    @jax.jit
    def local_step(x):  # a program of each process's own device
        return jnp.tanh(x) * 5

    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("d")),
                                               np.ones(4, np.float32))
    jax.block_until_ready(step(x))
    local_step(jnp.ones(3))
    assert otel_jax.flush(120)  # the telemetry, and process 0's ledger writes
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    print("RESULT " + json.dumps({l["function"]: l for l in lines
                                  if l["function"] in ("step", "local_step")}))
""")


def _job(tmp_path, cache, endpoint, env=None):
    """One run of a 2-process job (jax.distributed over 127.0.0.1, gloo): each rank's
    compile lines by function."""
    script = tmp_path / "rank.py"
    script.write_text(RANK_PROGRAM)
    port = free_port()
    extra = {**_aws(endpoint), "PYTHONHASHSEED": "0",
             "XLA_FLAGS": "--xla_force_host_platform_device_count=1", **(env or {})}
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(port), cache],
                              env=clean_env(**extra), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
             for r in range(2)]
    results = []
    try:
        for r, proc in enumerate(procs):
            out, err = proc.communicate(timeout=TIMEOUT_S)
            lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            assert proc.returncode == 0 and lines, f"rank {r}:\n{out}\n{err[-3000:]}"
            results.append(json.loads(lines[-1][len("RESULT "):]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    return results


@pytest.mark.slow
def test_a_miss_on_process_1_is_explained_by_what_process_0_recorded(tmp_path, s3_server):
    """JAX writes entries from process 0 only, and so does the ledger: process 1's misses
    are explained against process 0's keys."""
    bucket = _bucket(s3_server)
    cache = f"s3://{bucket}/jax-cache"
    first = _job(tmp_path, cache, s3_server)
    assert [r["step"]["persistent_cache_miss_reason"] for r in first] == ["never_seen"] * 2
    assert first[1]["step"]["persistent_cache_miss_detail"].startswith(
        "process 0 never recorded this function with this signature")

    # Restarted: process 0 is served from its entries. Process 1 is not: on JAX's CPU
    # backend its key differs from process 0's in the parts that describe the devices,
    # and JAX writes process 0's entries only. That is what its miss says, not "never
    # seen", though process 1 never wrote a line itself.
    again = _job(tmp_path, cache, s3_server)
    assert not again[1]["local_step"]["persistent_cache_hit"]  # its own device's program
    for name in ("step", "local_step"):
        assert again[0][name]["persistent_cache_hit"] is True
        line = again[1][name]
        if line["persistent_cache_hit"]:  # a backend whose keys agree across processes
            continue
        assert line["persistent_cache_miss_reason"] == "not_written", line
        detail = line["persistent_cache_miss_detail"]
        assert detail.startswith("process 0's run of "), detail
        assert "differs from this process's only in the " in detail
        assert detail.endswith("(not_process_0: JAX writes entries from process 0 only)")

    # Restarted with a flag changed on every host: both ranks name it.
    flagged = _job(tmp_path, cache, s3_server, env={
        "XLA_FLAGS": "--xla_force_host_platform_device_count=1 "
                     "--xla_cpu_enable_fast_math=true"})
    # (Process 1 may compile after process 0 wrote the new entry: where the processes' keys
    # of this program agree, it is then served from it, and has no miss to explain.)
    for rank, r in enumerate(flagged):
        if rank == 1 and r["step"]["persistent_cache_hit"]:
            continue
        assert r["step"].get("persistent_cache_miss_reason") == "key_changed", json.dumps([rank, r["step"]])
        assert r["step"]["persistent_cache_miss_detail"].startswith(
            "XLA flags: +--xla_cpu_enable_fast_math=true; since ")
    if not flagged[1]["step"]["persistent_cache_hit"]:
        assert "; since process 0's run of " in flagged[1]["step"][
            "persistent_cache_miss_detail"]
    assert "; since the run of " in flagged[0]["step"]["persistent_cache_miss_detail"]


# --- a store that is down, slow or refuses writes -------------------------------------

@pytest.fixture
def silent_endpoint():
    """An endpoint that accepts connections and never answers (a store that hangs)."""
    server = loopback_listener()
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.slow
def test_a_store_that_hangs_costs_one_warning_and_a_bounded_wait(tmp_path, silent_endpoint):
    cache = str(tmp_path / "jax-cache")  # JAX's cache is local; the ledger's store hangs
    out, line = _run(tmp_path, cache, silent_endpoint,
                     env={"OTEL_JAX_LEDGER": "s3://ledgers/job"})
    assert out["value"] == pytest.approx(3 * 0.999329299739067)  # tanh(4) * 3
    assert "persistent_cache_miss_reason" not in line  # unknown: not a guess
    assert out["stderr"].count("otel_jax: the compile ledger's store") == 1, out["stderr"]
    assert "did not answer a read within 2 s" in out["stderr"]
    # The first miss waits for the store at most READ_WAIT_S; the next does not wait.
    assert out["first_call_s"] < _ledger_remote.READ_WAIT_S + 10, out
    assert out["second_call_s"] < 10, out
    assert out["run_s"] < 60  # exit is bounded too (botocore would wait 60 s per try)


@pytest.mark.slow
def test_a_store_that_refuses_writes_costs_one_warning(tmp_path, s3_server):
    # JAX's cache works on S3; the ledger's location (a bucket not there) refuses writes.
    cache = f"s3://{_bucket(s3_server)}/jax-cache"
    out, line = _run(tmp_path, cache, s3_server,
                     env={"OTEL_JAX_LEDGER": f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/l"})
    assert out["value"] == pytest.approx(3 * 0.999329299739067)
    assert line["persistent_cache_miss_reason"] == "never_seen"  # nothing there to read
    assert out["stderr"].count("otel_jax: the compile ledger's store") == 1, out["stderr"]
    assert "bucket does not exist" in out["stderr"]
    assert out["run_s"] < 60


# --- the layout's bounds (in-process, against a directory) -----------------------------

def _entry(fn, sig, t, **extra):
    key = {p: "k" for p in _cache_key.CACHE_KEY_PARTS}
    return {_ledger_lines.MARK: _ledger_lines.VERSION, "fn": fn, "sig": sig, "t": t, "key": key,
            "xla_flags": ["--xla_flag_" + "x" * 200], **extra}


def _store(root: Path, warned: list[str] | None = None) -> _ledger_remote.RemoteStore:
    failopen = FailOpen(warn=lambda msg, *a, **k: (warned if warned is not None
                                                   else []).append(msg))
    return _ledger_remote.RemoteStore(str(root), root, failopen, _ledger_lines.MARK,
                                      _ledger_lines.VERSION, _ledger_lines.parse_entry,
                                      _ledger_lines.key_of, _ledger.KEEP_PER_KEY)


def test_an_object_keeps_the_latest_groups_under_its_byte_bound():
    entries = [_entry(f"f{i % 300}", f"s{i % 7}", float(i)) for i in range(3000)]
    data, dropped = _ledger_remote.encode_bucket(
        entries, _ledger_lines.MARK, _ledger_lines.VERSION, _ledger_lines.key_of,
        _ledger.KEEP_PER_KEY)
    assert len(data) <= _ledger_remote.BUCKET_BYTES
    kept, ours = _ledger_remote.decode_bucket(data, _ledger_lines.MARK, _ledger_lines.VERSION)
    assert ours and dropped == len(entries) - len(kept) > 0
    assert max(e["t"] for e in kept) == 2999.0  # the newest is kept
    groups: dict = {}
    for e in kept:
        groups.setdefault((e["fn"], e["sig"]), []).append(e)
    assert all(len(g) <= _ledger.KEEP_PER_KEY for g in groups.values())
    oldest_kept = min(g[-1]["t"] for g in groups.values())
    newest_dropped = max((e["t"] for e in entries if (e["fn"], e["sig"]) not in groups),
                         default=-1)
    assert newest_dropped < oldest_kept  # whole groups, oldest first


def test_the_store_stays_within_its_object_count_and_size(tmp_path, monkeypatch):
    monkeypatch.setattr(_ledger_remote, "BUCKETS", 16)
    monkeypatch.setattr(_ledger_remote, "BUCKET_BYTES", 8 << 10)
    store = _store(tmp_path)
    for i in range(2000):
        fn = f"module.fn{i}@train.py"
        store.record(_ledger_remote.bucket_of(fn), _entry(fn, "s", float(i)))
        if i % 200 == 0:
            assert store.flush(30)
    assert store.flush(30)
    objects = list(tmp_path.iterdir())
    assert 0 < len(objects) <= 16
    assert all(p.stat().st_size <= 8 << 10 for p in objects)
    assert store.evicted > 0 and store.dropped == 0
    # A function's entries are found again by its bucket, by another process.
    fn = "module.fn1999@train.py"
    got = _store(tmp_path).fetch(_ledger_remote.bucket_of(fn), wait=30)
    assert got is not None and any(e["fn"] == fn for e in got[0])


def test_other_entries_of_an_object_are_kept_when_it_is_rewritten(tmp_path):
    bucket = _ledger_remote.bucket_of("a@x.py")
    first = _store(tmp_path)
    first.record(bucket, _entry("a@x.py", "s", 1.0))
    assert first.flush(30)
    other = _store(tmp_path)  # another run: it has not read the object
    other.record(bucket, _entry("a@x.py", "t", 2.0))
    assert other.flush(30)
    got = _store(tmp_path).fetch(bucket, wait=30)
    assert got is not None
    assert sorted(e["sig"] for e in got[0]) == ["s", "t"]


class _Hanging:
    """A path whose store never answers (until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __truediv__(self, name: str) -> _Hanging:
        return self

    def read_bytes(self) -> bytes:
        self.release.wait(30)
        raise FileNotFoundError

    def write_bytes(self, data: bytes) -> None:
        self.release.wait(30)


def test_a_hanging_store_is_waited_for_once_then_not_at_all():
    root = _Hanging()
    warned: list[str] = []
    store = _ledger_remote.RemoteStore("s3://x/l", root, FailOpen(
        warn=lambda msg, *a, **k: warned.append(msg)), _ledger_lines.MARK, _ledger_lines.VERSION,
        _ledger_lines.parse_entry, _ledger_lines.key_of, _ledger.KEEP_PER_KEY)
    started = time.monotonic()
    assert store.fetch(1, wait=0.3) is None
    waited = time.monotonic() - started
    assert 0.3 <= waited < 5
    time.sleep(_ledger_remote.READ_WAIT_S + 0.2)  # the read in flight is now overdue
    started = time.monotonic()
    assert store.fetch(2) is None and store.fetch(1) is None
    store.record(3, _entry("f", "s", 1.0))
    assert time.monotonic() - started < 0.2  # no wait while the store hangs
    assert store.dropped == 1 and store.flush(5) is False
    assert len(warned) == 1 and "did not answer" in warned[0]
    root.release.set()  # it answers: the store is used again
    deadline = time.monotonic() + 10
    while store.fetch(1, wait=1) is None:
        assert time.monotonic() < deadline, "the store was not used again"
        time.sleep(0.05)
    assert len(warned) == 1


def test_a_write_that_turns_slow_is_waited_for_by_flush(tmp_path, monkeypatch):
    """A write slower than the read bound (a store under load) is still waited for by a
    flush, within its timeout (a store already hanging when the flush starts is not:
    ``test_a_hanging_store_is_waited_for_once_then_not_at_all``)."""
    monkeypatch.setattr(_ledger_remote, "READ_WAIT_S", 0.2)
    bucket = _ledger_remote.bucket_of("a@x.py")
    store = _ledger_remote.RemoteStore("s3://x/l", _Prefix(tmp_path, write_delay=1.0), FailOpen(
        warn=lambda *a, **k: None), _ledger_lines.MARK, _ledger_lines.VERSION,
        _ledger_lines.parse_entry, _ledger_lines.key_of, _ledger.KEEP_PER_KEY)
    store.record(bucket, _entry("a@x.py", "s", 1.0))
    assert _ledger_remote.flush_all(30) is True
    assert store.writes == 1
    written = json.loads((tmp_path / _ledger_remote.object_name(bucket)).read_bytes())
    assert [e["sig"] for e in written[LedgerWire.ENTRIES]] == ["s"]


def test_a_failing_store_pauses_and_warns_once(tmp_path):
    (tmp_path / "a-file").write_text("")
    warned: list[str] = []
    store = _store(tmp_path / "a-file", warned)  # every read and write fails
    for i in range(5):
        store.record(i, _entry("f", str(i), 1.0))
        store.fetch(i, wait=5)
    assert len(warned) == 1 and "failed (" in warned[0]
    assert store.dropped >= 4 and store.writes == 0


class _Prefix:
    """A prefix in a directory, as a busy object store serves it: the first ``failures``
    reads fail as s3fs's do when another process rewrote the object between its requests
    (``FileExpired``, an ``OSError``), and each write takes ``write_delay`` seconds."""

    def __init__(self, root: Path, failures: int = 0, write_delay: float = 0.0) -> None:
        self.root, self.failures, self.write_delay = root, failures, write_delay

    def __truediv__(self, name: str) -> _Object:
        return _Object(self, self.root / name)


class _Object:
    def __init__(self, prefix: _Prefix, path: Path) -> None:
        self.prefix, self.path = prefix, path

    def read_bytes(self) -> bytes:
        if self.prefix.failures:
            self.prefix.failures -= 1
            raise OSError(errno.EBUSY, "The remote file no longer exists")
        return self.path.read_bytes()

    def write_bytes(self, data: bytes) -> None:
        time.sleep(self.prefix.write_delay)
        self.path.write_bytes(data)


def test_an_object_replaced_while_it_is_read_is_read_again(tmp_path):
    bucket = _ledger_remote.bucket_of("a@x.py")
    writer = _store(tmp_path)
    writer.record(bucket, _entry("a@x.py", "s", 1.0))
    assert writer.flush(30)
    warned: list[str] = []
    root = _Prefix(tmp_path, failures=_ledger_remote.READ_ATTEMPTS - 1)
    store = _ledger_remote.RemoteStore("s3://x/l", root, FailOpen(
        warn=lambda msg, *a, **k: warned.append(msg)), _ledger_lines.MARK,
        _ledger_lines.VERSION, _ledger_lines.parse_entry, _ledger_lines.key_of,
        _ledger.KEEP_PER_KEY)
    got = store.fetch(bucket, wait=30)
    assert got is not None and [e["sig"] for e in got[0]] == ["s"]
    assert warned == [] and store.reads == _ledger_remote.READ_ATTEMPTS
    # A store whose every read fails is still one warning, after a bounded number of reads.
    failing = _Prefix(tmp_path, failures=10 * _ledger_remote.READ_ATTEMPTS)
    store = _ledger_remote.RemoteStore("s3://x/m", failing, FailOpen(
        warn=lambda msg, *a, **k: warned.append(msg)), _ledger_lines.MARK,
        _ledger_lines.VERSION, _ledger_lines.parse_entry, _ledger_lines.key_of,
        _ledger.KEEP_PER_KEY)
    assert store.fetch(bucket, wait=30) is None
    assert len(warned) == 1 and "failed (OSError" in warned[0]
    assert store.reads == _ledger_remote.READ_ATTEMPTS


def test_remote_ledger_without_a_file_system_layer_costs_one_warning(monkeypatch):
    warned: list[str] = []
    ledger = _ledger.Ledger(FailOpen(warn=lambda msg, *a, **k: warned.append(msg)))
    monkeypatch.setattr(_persistent_cache, "cache_path", lambda url: None)
    assert ledger._store("gs://b/l") is None and ledger._store("gs://b/l") is None
    assert len(warned) == 1 and "etils[epath]" in warned[0]
    assert "gs://b/l" in ledger._off


def test_the_store_is_reached_through_jax_path_layer():
    from etils import epath


    path = _persistent_cache.cache_path("s3://bucket/prefix")
    assert isinstance(path, epath.Path) and str(path) == "s3://bucket/prefix"
    assert os.fspath(_persistent_cache.cache_path("/tmp/x")) == "/tmp/x"



def test_entries_waiting_to_be_written_are_bounded(monkeypatch):
    monkeypatch.setattr(_ledger_remote, "MAX_QUEUED", 50)
    root = _Hanging()  # the first write hangs: everything else waits behind it
    store = _ledger_remote.RemoteStore("s3://x/l", root, FailOpen(warn=lambda *a, **k: None),
                                       _ledger_lines.MARK, _ledger_lines.VERSION,
                                       _ledger_lines.parse_entry, _ledger_lines.key_of,
                                       _ledger.KEEP_PER_KEY)
    for i in range(80):
        store.record(i % 7, _entry(f"f{i}", "s", float(i)))
    assert store._queued <= 50 and store.dropped == 80 - store._queued
    root.release.set()
    assert store.flush(30)
    assert store._queued == 0
