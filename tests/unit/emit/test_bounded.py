"""Bounded calls and windows: no call is waited for past its timeout or its window."""

from __future__ import annotations

import threading
import time
import warnings

import pytest

from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._emit import _bounded, _health
from otel_jax._emit._bounded import (
    _Call,
    _inside_our_export,
    _Spares,
    close_window,
    open_window,
    run_all_bounded,
    run_bounded,
)


def test_a_finished_call_gives_its_result_or_error():
    call = run_bounded(lambda a, b=0: a + b, 5.0, 1, b=2)
    assert call is not None and call.result == 3 and call.error is None

    def fails() -> None:
        raise KeyError("x")

    call = run_bounded(fails, 5.0)
    assert call is not None and isinstance(call.error, KeyError)


def test_a_call_still_running_is_not_waited_for():
    release = threading.Event()
    started = time.monotonic()
    assert run_bounded(release.wait, 0.1, 30.0) is None
    assert time.monotonic() - started < 5.0
    release.set()


def test_calls_side_by_side_are_waited_for_until_the_deadline_only():
    release, ran = threading.Event(), []
    started = time.monotonic()
    run_all_bounded([(release.wait, (30.0,)), (ran.append, ("quick",))],
                    time.monotonic() + 0.2)
    assert time.monotonic() - started < 5.0 and ran == ["quick"]
    release.set()


def test_the_call_on_its_thread_is_known_while_it_runs_only():
    seen = []
    call = run_bounded(lambda: seen.append((_inside_our_export.call, _inside_our_export.active)),
                       5.0)
    assert call is not None and seen == [(call, True)]
    assert getattr(_inside_our_export, "call", None) is None


def test_a_failure_answer_is_none_after_a_successful_request():
    call = _Call(lambda: None, (), {})
    call.answer = _health.Answer(http_status=200)
    assert call.failure_answer() is None
    call.answer = _health.Answer(http_status=503)
    assert call.failure_answer() == _health.Answer(http_status=503)


def test_where_no_thread_can_start_a_prestarted_spare_takes_the_call(monkeypatch):
    spares = _Spares()
    monkeypatch.setattr(_bounded, "_SPARES", spares)
    spares.prestart(1)

    def refuse(self, *args, **kwargs):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    release = threading.Event()
    first = _Call(lambda: release.wait(30.0) and "ran", (), {})
    _bounded._start(first, "unit")
    # The one spare is busy: the call is not made, and nobody waits for it.
    second = _Call(lambda: "ran", (), {})
    _bounded._start(second, "unit")
    assert second.done.is_set() and second.result is None
    release.set()
    assert first.done.wait(30.0) and first.result == "ran"
    # Done, the spare serves the next call.
    third = _Call(lambda: "ran", (), {})
    deadline = time.monotonic() + 30.0
    while spares.idle < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    _bounded._start(third, "unit")
    assert third.done.wait(30.0) and third.result == "ran"


@pytest.fixture
def endpoint():
    url = "http://unit-bounded:4318"
    _health._breakers.pop((url, "traces"), None)
    _health._endpoints.pop(url, None)
    yield url
    _health._breakers.pop((url, "traces"), None)
    _health._endpoints.pop(url, None)


def test_a_window_says_once_what_its_deadline_cut(endpoint):
    _health.breaker_for(endpoint, "traces")
    window = open_window(0.1, "exit")
    assert _bounded._window is window and window.remaining() <= 0.1
    cut = _Call(lambda: None, (), {})
    window.begin(cut, endpoint, "traces", 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        close_window(window)
    assert _bounded._window is None
    assert not window.end(cut)  # counted by the window: not the caller's to count again
    said = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert said == [f"otel_jax: exit dropped 3 spans that could not be exported to {endpoint} "
                    "(no answer within 0.1 s); exit waits at most 0.1 s for telemetry."]
    assert _health._endpoints[endpoint].warned


def test_a_call_that_ended_in_the_window_is_the_callers():
    window = open_window(5.0, "uninstall()")
    call = _Call(lambda: None, (), {})
    window.begin(call, "http://unit-bounded-ended:4318", "logs", 1)
    assert window.end(call)
    close_window(window)
    assert window.dropped == {}
