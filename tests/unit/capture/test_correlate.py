"""``_capture._correlate``: which of a thread's JAX events belong to one backend compile."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from otel_jax._capture import _correlate
from otel_jax._capture._correlate import Correlator, Traced
from otel_jax._capture._jax import _listeners
from otel_jax._core._failopen import FailOpen
from otel_jax._core._vocab import Phase

TRACE, LOWER = _listeners.TRACE_EVENT, _listeners.LOWER_EVENT


def traced(fun_name: str, key: str, started: float, signature: object = "sig") -> Traced:
    naming = SimpleNamespace(info=SimpleNamespace(key=key))
    return Traced(fun_name, naming, signature, started)  # type: ignore[arg-type]


def test_a_compile_takes_its_own_trace_and_lowering_and_leaves_another_functions():
    c = Correlator()
    c.phase(TRACE, "g", 1.0, 1.1)  # another function, compiled later (an AOT lowering)
    c.phase(TRACE, "f", 2.0, 2.2)
    c.phase(LOWER, "jit(f)", 2.2, 2.5)
    seen = c.take("jit(f)", 2.5, 3.0, FailOpen())
    assert seen.phases == ((Phase.TRACE, 2.0, 2.2), (Phase.LOWER, 2.2, 2.5),
                           (Phase.BACKEND_COMPILE, 2.5, 3.0))
    later = c.take("jit(g)", 4.0, 4.5, FailOpen())
    assert later.phases[0] == (Phase.TRACE, 1.0, 1.1)
    # taken once: a second compile of f finds only its own backend compile
    assert [p[0] for p in c.take("jit(f)", 5.0, 5.1, FailOpen()).phases] == [
        Phase.BACKEND_COMPILE]


def test_a_phase_older_than_the_window_is_nobodys():
    c = Correlator()
    c.phase(TRACE, "f", 0.0, 0.1)  # an eval_shape long ago, no compile followed
    start = 0.2 + _correlate.UNMATCHED_PHASE_WINDOW_S
    assert [p[0] for p in c.take("jit(f)", start, start + 1, FailOpen()).phases] == [
        Phase.BACKEND_COMPILE]


def test_pending_phases_stay_bounded():
    c = Correlator()
    for i in range(10 * _correlate.MAX_PENDING_PHASES):
        c.phase(TRACE, f"f{i}", float(i), float(i) + 0.5)
    assert len(c._tls.phases) <= _correlate.MAX_PENDING_PHASES


def test_cache_events_belong_to_the_next_compile_only():
    c = Correlator()
    c.cache_event(_listeners.CACHE_HIT_EVENT)
    first = c.take("jit(f)", 1.0, 1.1, FailOpen())
    second = c.take("jit(f)", 2.0, 2.1, FailOpen())
    assert (first.cache_hit, first.cache_written) == (True, False)
    assert (second.cache_hit, second.cache_written) == (False, False)


def test_one_trace_only_read_is_the_aot_compiles_and_two_name_it_only():
    c = Correlator()
    c.keep_traced(traced("f", "k", 1.0))
    seen = c.take("jit(f)", 2.0, 2.5, FailOpen())
    assert seen.traced is not None and seen.traced.signature == "sig"
    # two lowerings of f (two shapes): which one compiles is not known
    c.keep_traced(traced("f", "k", 3.0))
    c.keep_traced(traced("f", "k", 4.0))
    seen = c.take("jit(f)", 5.0, 5.5, FailOpen())
    assert seen.traced is not None and seen.traced.signature is None
    assert seen.traced.started == 3.0
    # two functions of one name: not even the name
    c.keep_traced(traced("f", "k", 6.0))
    c.keep_traced(traced("f", "other", 7.0))
    assert c.take("jit(f)", 8.0, 8.5, FailOpen()).traced is None


def test_trace_only_reads_are_kept_per_thread_and_bounded():
    c = Correlator()
    for i in range(3 * _correlate.MAX_TRACED):
        c.keep_traced(traced(f"f{i}", "k", float(i)))
        c.keep_traced(traced("f", "k", float(i)))
    kept = c._tls.traced
    assert len(kept) <= _correlate.MAX_TRACED
    assert len(kept["f"]) <= _correlate.MAX_TRACED
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(
        c.take("jit(f)", 1.0, 1.5, FailOpen()).traced))
    thread.start()
    thread.join()
    assert other == [None]  # another thread's compile never takes this thread's reads
