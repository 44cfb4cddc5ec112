"""A collector's answer costs a bounded read: a huge body is read to a cap, never whole, and
the warning says the endpoint answered and how (not "no answer")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest
from conftest import clean_env, needs_loopback

from otel_jax._emit import _answer_body, _bounded, _health, _providers
from otel_jax._pipeline._engine import OtelJaxWarning

ROOT = Path(__file__).resolve().parent.parent
BODY = 100 << 20


class Flooding:
    """A collector that answers every request with ``status`` and a 100 MB body, written in
    chunks for as long as the client reads (``trickle``: a byte every 50 ms); counts the
    bytes it got out."""

    def __init__(self, status: int, trickle: bool = False) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        owner = self
        self.sent: list[int] = []
        self.closing = False
        self.answering = threading.Event()  # the status and headers of an answer went out

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(BODY))
                self.end_headers()
                self.wfile.flush()
                owner.answering.set()
                chunk, sent = b"\0" * (1 if trickle else 1 << 20), 0
                try:
                    while sent < BODY and not owner.closing:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        sent += len(chunk)
                        if trickle:
                            time.sleep(0.05)
                except OSError:  # the client stopped reading and closed
                    pass
                owner.sent.append(sent)

            def log_message(self, *args):
                pass

        needs_loopback()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_sent(self) -> list[int]:
        """What each answer got out, once the first ended (bounded)."""
        deadline = time.monotonic() + 60
        while not self.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.sent

    def close(self) -> None:
        self.closing = True
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def flooding(request):
    server = Flooding(*request.param) if isinstance(request.param, tuple) \
        else Flooding(request.param)
    yield server
    server.close()


# The program: a compile exported at exit; what its memory peaked at, beyond what it held
# once JAX had compiled, printed last (registered before otel_jax's own exit handler).
PROGRAM = textwrap.dedent("""
    import atexit, json, resource, time
    import jax, jax.numpy as jnp, otel_jax
    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    jax.jit(lambda x: x * 2)(jnp.ones(3)).block_until_ready()
    before = peak()
    started = []
    atexit.register(lambda: print("RESULT " + json.dumps(
        {"grown": peak() - before, "exit_s": time.monotonic() - started[0]}), flush=True))
    otel_jax.install(log_output=None)
    jax.jit(lambda x: x + 1)(jnp.ones(2)).block_until_ready()
    started.append(time.monotonic())
""")


@pytest.mark.parametrize("flooding", [200], indirect=True)
def test_a_collector_answering_a_huge_body_costs_no_memory_and_is_named(flooding):
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=flooding.endpoint,
                    OTEL_EXPORTER_OTLP_TIMEOUT="3")
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    # Three signals, each answered with 100 MB: read whole, that is 100-300 MB more.
    assert result["grown"] < 50 << 20, (result, proc.stderr[-3000:])
    assert max(flooding.wait_sent() or [BODY]) < BODY // 2, flooding.sent
    said = [ln for ln in proc.stderr.splitlines() if "OtelJaxWarning" in ln]
    assert len(said) == 1, proc.stderr[-3000:]
    assert (f"the OTLP endpoint {flooding.endpoint} answered HTTP 200 with a body over "
            f"{_answer_body.MAX_ANSWER_BYTES >> 10} KiB, read no further") in said[0]
    assert "no answer" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("flooding", [400], indirect=True)
def test_a_refusal_with_a_huge_body_says_both(flooding, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", flooding.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    endpoint = flooding.endpoint
    _health._breakers.pop((endpoint, "traces"), None)
    _health._endpoints.pop(endpoint, None)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = _providers._exporter("traces")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        provider.get_tracer("t").start_span("s").end()
    provider.shutdown()
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1, ours
    assert (f"answered HTTP 400 Bad Request, with a body over "
            f"{_answer_body.MAX_ANSWER_BYTES >> 10} KiB, read no further") in ours[0], ours
    assert max(flooding.wait_sent() or [BODY]) < BODY // 2, flooding.sent


@pytest.mark.parametrize("flooding", [(200, True)], indirect=True)
def test_a_body_still_coming_when_the_window_closes_is_said_as_an_answer(flooding,
                                                                         monkeypatch):
    # The status came, the body trickles: what the window says names the answer, not
    # "no answer within 3 s".
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", flooding.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    endpoint = flooding.endpoint
    _health._breakers.pop((endpoint, "traces"), None)
    _health._endpoints.pop(endpoint, None)
    from opentelemetry.sdk.trace import TracerProvider

    exporter = _providers._exporter("traces")
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("s")
    span.end()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        window = _bounded.open_window(3.0, "uninstall()")
        try:
            exporter.export([span])  # cut by the window, the status long come
            assert flooding.answering.is_set()
        finally:
            _bounded.close_window(window)
    ours = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(ours) == 1, ours
    assert (f"uninstall() dropped 1 spans that could not be exported to {endpoint} (it "
            f"answered HTTP 200 OK, {_answer_body.READING})") in ours[0], ours
