"""``_capture._jax._listeners``: taking a ``jax.monitoring`` listener off again, whichever
way this JAX offers."""

from __future__ import annotations

from types import SimpleNamespace

from otel_jax._capture._jax import _listeners

NAMES = ("unregister_event_listener", "_unregister_event_listener_by_callback")


def listener(*args):
    pass


def test_by_jax_s_function_when_it_has_one():
    gone = []
    monitoring = SimpleNamespace(_unregister_event_listener_by_callback=gone.append,
                                 _event_listeners=[listener])
    _listeners.unregister(monitoring, NAMES, "_event_listeners", listener)
    assert gone == [listener]


def test_already_gone_is_not_an_error():
    def refuse(callback):
        raise AssertionError("not registered")

    monitoring = SimpleNamespace(unregister_event_listener=refuse, _event_listeners=[])
    _listeners.unregister(monitoring, NAMES, "_event_listeners", listener)


def test_off_jax_s_list_without_a_function():
    monitoring = SimpleNamespace(_event_listeners=[listener])
    _listeners.unregister(monitoring, NAMES, "_event_listeners", listener)
    assert monitoring._event_listeners == []


def test_the_phase_events():
    assert _listeners.PHASE_EVENTS == {_listeners.TRACE_EVENT, _listeners.LOWER_EVENT,
                                       _listeners.BACKEND_COMPILE_EVENT}
