"""Request observers: what each request of one of otel_jax's exports met, and log noise."""

from __future__ import annotations

import logging
import warnings

from conftest import loopback_listener

from otel_jax._core import _failopen
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._emit._bounded import run_bounded
from otel_jax._emit._health import Answer, Health
from otel_jax._emit._observe import (
    _observe,
    _QuietExportNoise,
    observe_grpc,
    observing_session,
)


def test_an_answer_is_recorded_on_our_export_call_only():
    _observe(Answer(http_status=500))  # not inside one of our exports: nothing to record
    call = run_bounded(_observe, 5.0, Answer(http_status=404))
    assert call is not None and call.answer == Answer(http_status=404)


def closed_port() -> int:
    with loopback_listener() as s:
        return int(s.getsockname()[1])


def test_the_session_records_a_connection_that_failed():
    url = f"http://127.0.0.1:{closed_port()}/v1/traces"
    session = observing_session()
    call = run_bounded(lambda: session.post(url, data=b"", timeout=5), 10.0)
    assert call is not None and call.error is not None
    assert call.answer is not None and call.answer.health is Health.UNREACHABLE
    assert call.answer.describe().startswith("ConnectionError: ")


def test_an_exporter_not_laid_out_as_known_is_not_observed():
    assert observe_grpc(object()) is False


def record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                             logging.WARNING, __file__, 1, msg, None, None)


def test_retry_lines_of_our_exports_are_dropped_and_others_said_once():
    _failopen.reset_warnings()
    noise = _QuietExportNoise()
    assert noise.filter(record("Something else entirely"))
    call = run_bounded(noise.filter, 5.0, record("Transient error 503 encountered"))
    assert call is not None and call.result is False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not noise.filter(record("Failed to export batch code: 404"))
        assert not noise.filter(record("Failed to export batch code: 404"))
    said = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert said == ["otel_jax: an OpenTelemetry exporter reports: Failed to export batch "
                    "code: 404. Its further retry and export-failure messages are not printed "
                    "(one warning instead of one line per attempt); its telemetry is dropped "
                    "while its exports fail."]
