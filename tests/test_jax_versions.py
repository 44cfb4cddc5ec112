"""A JAX newer than the newest tested: internals that moved cost facts, never the program.

JAX 0.11 (not installable here) merged ``Jaxpr`` and ``ClosedJaxpr``, gave
``_cached_lowering_to_hlo`` an ``out_avals`` parameter, made ``inline`` an enum and removed
the public ``jax.interpreters.pxla`` symbols; a later one may rename what the jit miss path
calls. Each is simulated on the installed JAX by changing JAX's own modules the same way,
and the user's program runs as before: compiles are counted with their durations, the
user's results are intact, and one warning names what is lost.
"""

from __future__ import annotations

import enum
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import Telemetry
from jax._src import compiler, pjit
from jax._src.interpreters import pxla as pxla_internal

import otel_jax
from otel_jax import Capability


class Inline(enum.IntEnum):
    """``jax.jit(inline=...)`` as an enum (JAX 0.11), with the booleans' values."""

    NEVER = 0
    ALWAYS = 1


class MergedJaxpr:
    """A ``ClosedJaxpr``'s contents as one object (JAX 0.11's merged ``core.Jaxpr``): no
    ``.jaxpr`` attribute, the equations and debug info on the object itself."""

    def __init__(self, closed):
        self.closed = closed
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.consts = closed.consts
        self.effects = closed.effects
        self.eqns = closed.jaxpr.eqns
        self.debug_info = closed.jaxpr.debug_info


def _jit_miss_v2(fun, jit_info, args, kwargs):  # a miss-path entry otel_jax does not know
    raise AssertionError("never called")


def simulate_newer_jax(monkeypatch, *, miss_path_moved: bool) -> None:
    """Change the installed JAX as 0.11 changed it (and, if asked, rename its miss path)."""
    from jax.interpreters import pxla as pxla_public

    for name in [n for n in dir(pxla_public) if not n.startswith("_")]:
        monkeypatch.delattr(pxla_public, name)

    lowering = pxla_internal._cached_lowering_to_hlo

    def _cached_lowering_to_hlo(*args, out_avals=None, **kwargs):  # the parameter 0.11 added
        return lowering(*args, **kwargs)

    if hasattr(lowering, "cache_clear"):
        _cached_lowering_to_hlo.cache_clear = lowering.cache_clear
    monkeypatch.setattr(pxla_internal, "_cached_lowering_to_hlo", _cached_lowering_to_hlo)

    parse = pjit._parse_jit_arguments

    def _parse_jit_arguments(*args, **kwargs):
        info = parse(*args, **kwargs)
        return info._replace(inline=Inline(bool(info.inline)))

    monkeypatch.setattr(pjit, "_parse_jit_arguments", _parse_jit_arguments)

    # jit_p's evaluation (a jitted function run under grad/vmap outside jit) hands
    # _pjit_call_impl_python the merged Jaxpr; JAX's own code below gets its ClosedJaxpr.
    run_python = pjit._pjit_call_impl_python

    def _pjit_call_impl_python(*args, jaxpr, **params):
        closed = jaxpr.closed if isinstance(jaxpr, MergedJaxpr) else jaxpr
        return run_python(*args, jaxpr=closed, **params)

    monkeypatch.setattr(pjit, "_pjit_call_impl_python", _pjit_call_impl_python)

    def impl(*args, jaxpr, **params):
        return pjit._pjit_call_impl_python(*args, jaxpr=MergedJaxpr(jaxpr), **params)[0]

    monkeypatch.setattr(pjit.jit_p, "impl", impl)

    if miss_path_moved:
        cpp_pjit = pjit._cpp_pjit

        def _cpp_pjit(fun, jit_info):
            def cache_miss(*args, **kwargs):  # what a renamed miss path calls
                return _jit_miss_v2(fun, jit_info, args, kwargs)

            del cache_miss
            return cpp_pjit(fun, jit_info)

        monkeypatch.setattr(pjit, "_cpp_pjit", _cpp_pjit)


def _install(t: Telemetry):
    return otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                            log_output=t.log)


def _unavailable_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, otel_jax.OtelJaxWarning)
            and "unavailable" in str(w.message)]


def test_moved_miss_path_keeps_counts_durations_and_results(monkeypatch):
    otel_jax.uninstall()
    simulate_newer_jax(monkeypatch, miss_path_moved=True)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            otel_jax.uninstall()  # installed again: still one warning
            handle = _install(t)

            @jax.jit
            def scale(x, k):
                return x * k

            @jax.jit
            def loss(w, x):
                return jnp.sum(jnp.tanh(x @ w) ** 2)

            results = [scale(jnp.arange(3.0), 2.0), scale(jnp.arange(4.0), 3.0)]
            inlined = jax.jit(lambda x: x + 1, inline=True)(jnp.ones(2))
            grads = jax.grad(loss)(jnp.ones((3, 2)), jnp.ones((4, 3)))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == {Capability.CAUSES, Capability.TRANSFORMED_CAUSES}
    [message] = _unavailable_warnings(caught)
    assert f"on jax {jax.__version__}" in message
    assert "recompile causes (cause 'unknown')" in message and "_run_python_pjit" in message
    assert "Compile counts, durations and phases are kept" in message
    # The user's results, as without otel_jax.
    np.testing.assert_allclose(results[0], [0.0, 2.0, 4.0])
    np.testing.assert_allclose(results[1], [0.0, 3.0, 6.0, 9.0])
    np.testing.assert_allclose(inlined, [2.0, 2.0])
    expected = jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2))(jnp.ones((3, 2)),
                                                                   jnp.ones((4, 3)))
    np.testing.assert_allclose(grads, expected, rtol=1e-6)
    # Every compile counted, with its durations; causes fall back to 'unknown'.
    spans = [s for s in t.compiles() if s.attributes["code.function.name"] == "scale"]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                      "unknown"]
    for span in spans:
        assert span.attributes["jax.compile.backend_compile_s"] > 0
        assert span.attributes["jax.compile.duration_s"] > 0
        assert span.attributes["jax.compile.trace_s"] > 0  # phases: monitoring events
    points = [p for p in t.metric_points("jax.compilations")
              if p.attributes["code.function.name"] == "scale"]
    assert sum(p.value for p in points) == 2
    durations = [p for p in t.metric_points("jax.compile.duration")
                 if p.attributes["code.function.name"] == "scale"]
    assert sum(p.count for p in durations) == 2 and sum(p.sum for p in durations) > 0
    assert any(s.attributes["code.function.name"] == "loss" for s in t.compiles())


def test_moved_internals_with_the_miss_path_in_place_keep_the_causes(monkeypatch):
    """Only the 0.11 changes: the causes are still read, through the merged Jaxpr and the
    enum ``inline`` too, and nothing is said to be lost."""
    otel_jax.uninstall()
    simulate_newer_jax(monkeypatch, miss_path_moved=False)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            @jax.jit
            def loss(w, x):
                return jnp.sum(jnp.tanh(x @ w) ** 2)

            def add(x):
                return x + 1

            grad = jax.grad(loss)
            w = jnp.ones((3, 2))
            first = grad(w, jnp.ones((8, 3)))
            grad(w, jnp.ones((5, 3)))
            plain = jax.jit(add)(jnp.ones(2))
            inlined = jax.jit(add, inline=True)(jnp.ones(2))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == frozenset() and not _unavailable_warnings(caught)
    assert first.shape == (3, 2)
    np.testing.assert_allclose(plain, inlined)
    name = ("test_moved_internals_with_the_miss_path_in_place_keep_the_causes"
            ".<locals>.loss")
    spans = t.compiles(name)
    # grad's forward and backward programs, for each batch size: read off the merged
    # Jaxpr, with the definition site from its debug info.
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == [
        "first_compile", "function_identity", "shape", "shape"]
    assert all(s.attributes["code.file.path"] == __file__ for s in spans)
    # jit options read with the enum inline (a top-level inline=True call is a cache hit
    # for JAX, as before).
    adds = t.compiles(name.replace("loss", "add"))
    assert [s.attributes["jax.compile.cause.kind"] for s in adds] == ["first_compile"]


def test_a_compile_entry_that_takes_other_arguments_costs_program_facts_only(monkeypatch):
    otel_jax.uninstall()
    original = compiler.compile_or_get_cached

    def compile_or_get_cached(client, module, devices, options, callbacks, *rest, **kwargs):
        return original(client, module, devices, options, callbacks, *rest, **kwargs)

    monkeypatch.setattr(compiler, "compile_or_get_cached", compile_or_get_cached)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            @jax.jit
            def double(x):
                return x * 2

            out = [double(jnp.ones(2)), double(jnp.ones(3))]
            wrapped = compiler.compile_or_get_cached is not compile_or_get_cached
        finally:
            otel_jax.uninstall()
    assert not wrapped  # an entry called another way is left as it is
    assert handle.unavailable == {Capability.PROGRAM_FINGERPRINTS,
                                  Capability.CACHE_MISS_REASONS}
    [message] = _unavailable_warnings(caught)
    assert "program fingerprints" in message and "takes other arguments" in message
    assert "recompile causes" not in message
    np.testing.assert_allclose(out[1], [2.0, 2.0, 2.0])
    spans = [s for s in t.compiles() if s.attributes["code.function.name"].endswith("double")]
    assert [s.attributes["jax.compile.cause.kind"] for s in spans] == ["first_compile",
                                                                      "shape"]
    assert all(s.attributes["jax.compile.backend_compile_s"] > 0 for s in spans)


def test_the_tested_versions_lack_nothing():
    otel_jax.uninstall()
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        otel_jax.uninstall()
    assert handle.unavailable == frozenset() and not _unavailable_warnings(caught)


@pytest.mark.parametrize("capability", list(Capability))
def test_every_capability_says_what_is_lost(capability):
    assert capability.lost and capability.value == capability.name.lower()


def test_a_miss_path_that_cannot_be_wrapped_whole_is_not_wrapped_at_all(monkeypatch):
    from otel_jax._capture._jax import _miss_path

    otel_jax.uninstall()

    def refuse(original, trace_inside):
        raise TypeError("a scope JAX changed")

    monkeypatch.setattr(_miss_path, "wrap_run_python_pjit", refuse)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            patched = _miss_path.pjit_patched()

            @jax.jit
            def triple(x):
                return x * 3

            out = triple(jnp.ones(2))
        finally:
            otel_jax.uninstall()
    assert not patched  # the trace entry wrapped first was taken off again
    assert handle.unavailable == {Capability.CAUSES, Capability.TRANSFORMED_CAUSES}
    [message] = _unavailable_warnings(caught)
    assert "TypeError reading jax._src.pjit" in message
    np.testing.assert_allclose(out, [3.0, 3.0])
    [span] = [s for s in t.compiles() if s.attributes["code.function.name"].endswith("triple")]
    assert span.attributes["jax.compile.backend_compile_s"] > 0


# --- the program readers, decided by what they do on a real program --------------------

@pytest.fixture
def program_hashing_unknown(monkeypatch):
    """How ``_hash_computation`` is called is found afresh in this test (once per process
    otherwise), and found again after it."""
    from otel_jax._capture._jax import _program

    monkeypatch.setattr(_program.ProgramHashing, "tail", None)
    monkeypatch.setattr(_program.ProgramHashing, "failure", None)
    return _program


def _from_jax(cache_key) -> bool:
    """Whether the caller's caller is JAX's own cache-key code (its persistent cache keys
    each compile with these functions too: a simulated change must leave JAX working)."""
    import sys

    return sys._getframe(2).f_code.co_filename == cache_key.__file__


def _hash_all_value():
    """The value of ``_hash_computation``'s third parameter meaning "hash everything" on the
    installed JAX: ``IgnoreCallbacks.NO`` up to 0.10, ``False`` (``ignore_custom_partitioning``)
    from 0.11."""
    from jax._src import cache_key

    return getattr(getattr(cache_key, "IgnoreCallbacks", None), "NO", False)


def simulate_boolean_third_parameter(monkeypatch) -> list:
    """JAX 0.11's ``_hash_computation(hash_obj, module, ignore_custom_partitioning: bool)``
    on whichever JAX is installed; what otel_jax passed it. ``IgnoreCallbacks`` stays where
    the installed JAX has it (its own code uses it): a stale name otel_jax must not trust."""
    from jax._src import cache_key

    original = cache_key._hash_computation
    hash_all = _hash_all_value()
    passed: list = []

    def _hash_computation(hash_obj, module, ignore_custom_partitioning: bool):
        if _from_jax(cache_key):
            return original(hash_obj, module, ignore_custom_partitioning)
        passed.append(ignore_custom_partitioning)
        if type(ignore_custom_partitioning) is not bool:
            raise TypeError("ignore_custom_partitioning must be a bool")
        if ignore_custom_partitioning:
            raise AssertionError("only the whole program is hashed")
        return original(hash_obj, module, hash_all)

    monkeypatch.setattr(cache_key, "_hash_computation", _hash_computation)
    return passed


def _program_fingerprints(t: Telemetry, name: str) -> list[str]:
    return [s.attributes.get("jax.compile.program_fingerprint", "")
            for s in t.compiles() if s.attributes["code.function.name"].endswith(name)]


def test_a_program_hash_whose_third_parameter_changed_still_fingerprints(
        monkeypatch, program_hashing_unknown, persistent_cache):
    """JAX 0.11 renamed ``_hash_computation``'s third parameter and made it a bool (and
    removed ``IgnoreCallbacks``): the reader still works, so nothing is said to be lost."""
    passed = simulate_boolean_third_parameter(monkeypatch)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            probed = list(passed)  # tried at install, on the probe program

            @jax.jit
            def halve(x):
                return x / 2

            halve(jnp.ones(2))
            halve(jnp.ones(3))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == frozenset() and not _unavailable_warnings(caught)
    assert probed and probed[-1] is False
    prints = _program_fingerprints(t, "halve")
    assert len(prints) == 2 and all(len(p) == 16 for p in prints) and prints[0] != prints[1]


def test_the_program_hash_is_called_as_the_installed_jax_calls_it(
        program_hashing_unknown, persistent_cache):
    """On the installed JAX, the whole program is hashed, as its persistent cache does."""
    from jax._src import cache_key

    otel_jax.uninstall()
    handle = _install(Telemetry())
    otel_jax.uninstall()
    assert handle.unavailable == frozenset()
    assert program_hashing_unknown.ProgramHashing.tail == (_hash_all_value(),)
    lowered = jax.jit(lambda x: x * 3).lower(jnp.ones(2)).compiler_ir("stablehlo")
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    cache_key._hash_computation(h, lowered, _hash_all_value())
    assert program_hashing_unknown.program_digest(lowered) == h.digest()


def test_a_program_hash_that_fails_on_every_program_costs_fingerprints_only(
        monkeypatch, program_hashing_unknown, persistent_cache):
    from jax._src import cache_key

    original = cache_key._hash_computation

    def _hash_computation(hash_obj, module, *rest):
        if _from_jax(cache_key):
            return original(hash_obj, module, *rest)
        raise RuntimeError("the module API moved")

    monkeypatch.setattr(cache_key, "_hash_computation", _hash_computation)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            @jax.jit
            def quarter(x):
                return x / 4

            out = quarter(jnp.ones(2))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == {Capability.PROGRAM_FINGERPRINTS}
    [message] = _unavailable_warnings(caught)
    assert "program fingerprints (none)" in message
    assert "_hash_computation fails on a lowered program (RuntimeError: the module API moved)" \
        in message
    np.testing.assert_allclose(out, [0.25, 0.25])
    assert _program_fingerprints(t, "quarter") == [""]


def test_probing_the_readers_at_install_traces_and_compiles_nothing(program_hashing_unknown):
    """The probe program is parsed, not lowered: a user's own JAX listeners, and the
    compile counts, see nothing of it."""
    from jax._src import monitoring

    seen: list[str] = []

    def on_span(event, *args, **kwargs):
        seen.append(event)

    def on_event(event, **kwargs):
        seen.append(event)

    otel_jax.uninstall()
    monitoring.register_event_time_span_listener(on_span)
    monitoring.register_event_listener(on_event)
    t = Telemetry()
    try:
        _install(t)
        otel_jax.uninstall()
    finally:
        for name in ("unregister_event_time_span_listener",
                     "_unregister_event_time_span_listener_by_callback"):
            if hasattr(monitoring, name):
                getattr(monitoring, name)(on_span)
                break
        for name in ("unregister_event_listener", "_unregister_event_listener_by_callback"):
            if hasattr(monitoring, name):
                getattr(monitoring, name)(on_event)
                break
    assert program_hashing_unknown.ProgramHashing.tail is not None  # the probe ran
    assert seen == [] and t.compiles() == []


def test_a_probe_that_cannot_be_built_leaves_the_decision_to_the_first_compile(
        monkeypatch, program_hashing_unknown, persistent_cache):
    def unbuildable():
        raise ImportError("no MLIR parser here")

    monkeypatch.setattr(program_hashing_unknown, "_probe_program", unbuildable)
    passed = simulate_boolean_third_parameter(monkeypatch)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            said_at_install = _unavailable_warnings(caught)

            @jax.jit
            def fifth(x):
                return x / 5

            fifth(jnp.ones(2))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == frozenset() and said_at_install == []
    assert passed and passed[-1] is False  # found on the user's program
    assert not _unavailable_warnings(caught)
    [program] = _program_fingerprints(t, "fifth")
    assert len(program) == 16


def test_a_program_hash_failing_on_the_first_compile_is_said_once(
        monkeypatch, program_hashing_unknown, persistent_cache):
    """Undecided at install (no probe program), every way of calling it fails on the first
    real program: one warning then, worded as install's, and no fingerprints after."""
    from jax._src import cache_key

    def unbuildable():
        raise ImportError("no MLIR parser here")

    calls: list[int] = []
    original = cache_key._hash_computation

    def _hash_computation(hash_obj, module, *rest):
        if _from_jax(cache_key):
            return original(hash_obj, module, *rest)
        calls.append(1)
        raise RuntimeError("the module API moved")

    monkeypatch.setattr(program_hashing_unknown, "_probe_program", unbuildable)
    monkeypatch.setattr(cache_key, "_hash_computation", _hash_computation)
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _install(t)
        try:
            @jax.jit
            def sixth(x):
                return x / 6

            out = [sixth(jnp.ones(2))]
            otel_jax.flush()
            tried_first = len(calls)
            out += [sixth(jnp.ones(n)) for n in (3, 4)]
            otel_jax.flush()
        finally:
            otel_jax.uninstall()
    [message] = _unavailable_warnings(caught)
    assert "program fingerprints (none)" in message and "RuntimeError" in message
    # Each way tried once on the first program, none again after all failed.
    assert tried_first == len(program_hashing_unknown._hash_tails(cache_key))
    assert len(calls) == tried_first
    np.testing.assert_allclose(out[2], [1 / 6] * 4, rtol=1e-6)
    assert _program_fingerprints(t, "sixth") == ["", "", ""]


def test_a_cache_key_part_failing_on_its_first_real_input_is_said_once(
        monkeypatch, persistent_cache):
    """The backend's part of the key can only be hashed at a compile (install starts no
    backend): when JAX's hash of it fails there, the cache-miss reasons say so once."""
    from jax._src import cache_key

    from otel_jax._capture._jax import _cache_key

    original = cache_key._hash_platform

    def _hash_platform(hash_obj, backend):
        if _from_jax(cache_key):
            return original(hash_obj, backend)
        raise AttributeError("'Client' object has no attribute 'platform_version'")

    monkeypatch.setattr(cache_key, "_hash_platform", _hash_platform)
    monkeypatch.setattr(_cache_key, "_static_parts", {})
    t = Telemetry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = _install(t)
        try:
            @jax.jit
            def seventh(x):
                return x / 7

            for n in (2, 3):
                seventh(jnp.ones(n))
        finally:
            otel_jax.uninstall()
    assert handle.unavailable == frozenset()
    [message] = _unavailable_warnings(caught)
    assert "why the persistent cache missed" in message
    assert "hashing the backend version part of the key fails (AttributeError" in message
    assert all(len(p) == 16 for p in _program_fingerprints(t, "seventh"))
