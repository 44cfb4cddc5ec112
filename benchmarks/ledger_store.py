"""The compile ledger on a remote store at scale: objects, bytes and requests.

Drives the real store code (``otel_jax._fleet._ledger_remote.RemoteStore``) against moto's S3
server (started here on 127.0.0.1) through ``etils.epath`` and ``s3fs``, as a job on S3
reaches it: process 0 records FUNCTIONS x SIGNATURES compiles of a long job (each entry
the size of a real ledger line), then a replacement process reads back the objects of
every function. Prints the objects and bytes the store holds (bounded whatever the
number of compiles), the requests made, and the cost on the compiling thread: of a
``record`` (never waits) and of a ``fetch`` (one object read, the wait a miss pays).

    python benchmarks/ledger_store.py [FUNCTIONS] [SIGNATURES]
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    functions = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    signatures = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-c", "from moto.server import main; main()",
                               "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="x",
                      AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto_server did not start") from None
                time.sleep(0.2)
        run(functions, signatures)
    finally:
        server.terminate()
        server.wait(timeout=20)


def run(functions: int, signatures: int) -> None:
    import boto3

    from otel_jax._capture._jax import _cache_key, _config, _persistent_cache
    from otel_jax._core._failopen import FailOpen
    from otel_jax._fleet import _ledger, _ledger_lines, _ledger_remote

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bench")
    url = "s3://bench/cache.otel_jax-ledger"

    def store() -> _ledger_remote.RemoteStore:
        return _ledger_remote.RemoteStore(
            url, _persistent_cache.cache_path(url), FailOpen(), _ledger_lines.MARK,
            _ledger_lines.VERSION, _ledger_lines.parse_entry, _ledger_lines.key_of,
            _ledger.KEEP_PER_KEY)

    key = {p: "0123456789abcdef" for p in _cache_key.CACHE_KEY_PARTS}
    names, values = _ledger_lines.context_items(_config.trace_context_items())
    writer = store()
    record_us = []
    started = time.perf_counter()
    for i in range(functions * signatures):
        fn = f"model.block{i % functions}.apply@train.py"
        entry = {_ledger_lines.MARK: _ledger_lines.VERSION, "t": time.time(), "run": "r",
                 "pid": 1,
                 "started": 0.0, "proc": 0, "fn": fn, "sig": f"{i // functions:016x}",
                 "prog": "f" * 16, "key": key, "jaxlib": "0.10.2", "jax": "0.10.2",
                 "backend": "cpu 0.10.2", "xla_flags": [], "compression": "zstandard",
                 "devices": "8 x TPU v5", "code": "train.py:120", "written": True,
                 "not_written_reason": None, "compile_s": 12.5, "base": "e" * 16,
                 "ctxn": names, "ctx": values}
        t0 = time.perf_counter()
        writer.record(_ledger_remote.bucket_of(fn), entry)
        record_us.append((time.perf_counter() - t0) * 1e6)
        if i % 2000 == 1999:  # compiles come over time; the queue holds MAX_QUEUED
            writer.flush(600)
    writer.flush(600)
    write_s = time.perf_counter() - started
    listed = s3.list_objects_v2(Bucket="bench", Prefix="cache.otel_jax-ledger/")
    sizes = [o["Size"] for o in listed.get("Contents", [])] or [0]

    reader = store()  # a replaced host: nothing known locally
    fetch_ms = []
    found = 0
    for i in range(functions):
        fn = f"model.block{i}.apply@train.py"
        t0 = time.perf_counter()
        got = reader.fetch(_ledger_remote.bucket_of(fn), wait=30)
        fetch_ms.append((time.perf_counter() - t0) * 1e3)
        found += bool(got and any(e["fn"] == fn for e in got[0]))

    def q(values: list[float], p: float) -> float:
        return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else values[0]

    print(f"compiles recorded: {functions * signatures} ({functions} functions x "
          f"{signatures} signatures), in {write_s:.1f} s of background writes")
    print(f"store: {len(sizes)} objects (bound {_ledger_remote.BUCKETS}), "
          f"{sum(sizes) / 1024:.0f} KiB, largest {max(sizes) / 1024:.1f} KiB "
          f"(bound {_ledger_remote.BUCKET_BYTES // 1024} KiB)")
    print(f"requests by process 0: {writer.writes} writes, {writer.reads} reads; entries "
          f"dropped to stay in bounds: {writer.evicted}, unrecorded: {writer.dropped}")
    print(f"record() on the compiling thread: p50 {q(record_us, 50):.1f} us, "
          f"p99 {q(record_us, 99):.1f} us")
    print(f"fetch() of a function's object by a new process: {reader.reads} reads for "
          f"{functions} functions; p50 {q(fetch_ms, 50):.2f} ms, p99 {q(fetch_ms, 99):.2f} ms "
          f"(first read of an object), found {found}/{functions}")


if __name__ == "__main__":
    main()
