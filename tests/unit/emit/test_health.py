"""The export health model: answers told apart, and each signal's breaker."""

from __future__ import annotations

import socket
import warnings

import pytest

from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._emit import _health
from otel_jax._emit._health import Answer, Breaker, Health, answer_from_error, breaker_for


def test_answers_are_told_apart_by_status_code_and_exception_type():
    assert Answer(http_status=404).health is Health.NOT_ACCEPTED
    assert Answer(http_status=405).health is Health.NOT_ACCEPTED
    assert Answer(http_status=415).health is Health.NOT_ACCEPTED
    assert Answer(http_status=400).health is Health.REJECTED
    assert Answer(http_status=503).health is Health.REJECTED
    assert Answer(grpc_code="UNIMPLEMENTED").health is Health.NOT_ACCEPTED
    assert Answer(grpc_code="UNAVAILABLE").health is Health.UNREACHABLE
    assert Answer(grpc_code="DEADLINE_EXCEEDED").health is Health.UNREACHABLE
    assert Answer(grpc_code="PERMISSION_DENIED").health is Health.REJECTED
    assert answer_from_error(ConnectionRefusedError(111, "refused")).health is Health.UNREACHABLE
    assert answer_from_error(TimeoutError()).health is Health.UNREACHABLE
    assert answer_from_error(socket.gaierror(-2, "Name unknown")).health is Health.UNREACHABLE
    import requests

    assert answer_from_error(requests.exceptions.ReadTimeout()).health is Health.UNREACHABLE
    assert answer_from_error(requests.exceptions.InvalidURL("bad")).health is Health.FAILED
    # The text of an error never decides: a message that reads like a 404 is still an error.
    assert answer_from_error(RuntimeError("HTTP 404 not found")).health is Health.FAILED


def test_an_answer_says_whether_the_endpoint_answered_and_describes_it():
    assert Answer(http_status=503).answered and Answer(grpc_code="UNIMPLEMENTED").answered
    assert not Answer(grpc_code="UNAVAILABLE").answered
    assert not answer_from_error(ConnectionRefusedError(111, "refused")).answered
    full = Answer(http_status=429, reason="Too Many Requests", retry_after="30")
    assert full.describe() == "HTTP 429 Too Many Requests, Retry-After: 30"
    assert full.describe(short=True) == "HTTP 429"
    assert Answer(grpc_code="UNIMPLEMENTED").describe() == "gRPC UNIMPLEMENTED"
    assert answer_from_error(ValueError("x" * 500)).describe().endswith("...")
    assert len(answer_from_error(ValueError("x" * 500)).describe()) == 203
    assert Answer().describe() == "export failed"


@pytest.fixture
def endpoint():
    """A fresh endpoint: no breaker of it and no warning said for it yet."""
    url = "http://unit-health:4318"
    for signal in _health.SIGNALS:
        _health._breakers.pop((url, signal), None)
    _health._endpoints.pop(url, None)
    yield url
    for signal in _health.SIGNALS:
        _health._breakers.pop((url, signal), None)
    _health._endpoints.pop(url, None)


def said(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]


def test_a_failure_opens_the_breaker_and_warns_once_per_endpoint(endpoint):
    traces, logs = breaker_for(endpoint, "traces"), breaker_for(endpoint, "logs")
    assert breaker_for(endpoint, "traces") is traces  # one per pair
    traces.open_seconds = 60.0
    first = said(lambda: traces.failed(Health.UNREACHABLE, "ConnectionRefusedError: x"))
    assert len(first) == 1 and "cannot export traces" in first[0] and "unreachable" in first[0]
    assert not traces.allows() and traces.failures == 1
    assert logs.allows()  # another signal is not affected
    # The endpoint warned already: another signal's failure there is not said again.
    assert said(lambda: logs.failed(Health.REJECTED, "HTTP 503")) == []
    traces.succeeded()
    assert traces.allows()


def test_a_signal_the_endpoint_does_not_take_is_turned_off_naming_what_still_flows(endpoint):
    breaker_for(endpoint, "traces")
    logs = breaker_for(endpoint, "logs")
    text = said(lambda: logs.failed(Health.NOT_ACCEPTED, "", Answer(http_status=404)))
    assert text == [f"otel_jax: the OTLP endpoint does not accept logs (HTTP 404): logs off, "
                    f"traces still sent (endpoint {endpoint})."]
    assert logs.off == "HTTP 404" and not logs.allows() and logs.failures == 0
    assert said(lambda: logs.failed(Health.NOT_ACCEPTED, "", Answer(http_status=404))) == []


def test_what_still_flows_is_what_this_endpoint_still_takes(endpoint):
    other = "http://unit-health-other:4318"
    breaker_for(other, "metrics")  # sent elsewhere: not "still sent" to this endpoint
    try:
        logs = breaker_for(endpoint, "logs")
        text = said(lambda: logs.failed(Health.NOT_ACCEPTED, "", Answer(http_status=404)))
        assert text == [f"otel_jax: the OTLP endpoint does not accept logs (HTTP 404): "
                        f"logs off, nothing else is sent there (endpoint {endpoint})."]
    finally:
        _health._breakers.pop((other, "metrics"), None)
        _health._endpoints.pop(other, None)


class Window:
    def __init__(self) -> None:
        self.details: dict[str, str] = {}


def test_a_failure_in_a_window_is_left_for_the_window_to_say(endpoint):
    breaker = Breaker(endpoint, "metrics")
    window = Window()
    assert said(lambda: breaker.failed(Health.REJECTED, "HTTP 500", None, window)) == []
    assert window.details == {endpoint: "metrics: HTTP 500"}
    assert not breaker.allows()
