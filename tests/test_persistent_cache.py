"""Compiles served from JAX's persistent compilation cache: marked, and not recompiles."""

from __future__ import annotations

from conftest import run_persistent_cache_program

PROGRAM = """
    @jax.jit
    def cached(x):
        return jnp.tanh(x) * 3

    cached(jnp.ones(3))
    cached(jnp.ones(4))
    otel_jax.flush()
    lines = [json.loads(l) for l in buf.getvalue().splitlines()]
    counters = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name.startswith("jax.persistent_cache."):
                    counters[m.name] = sum(p.value for p in m.data.data_points)
                    for p in m.data.data_points:
                        if "reason" in p.attributes:
                            counters[m.name + ":" + p.attributes["reason"]] = p.value
    print(json.dumps({"lines": [l for l in lines if l["function"] == "cached"],
                      "counters": counters}))
"""


def run(tmp_path, cache_dir, min_compile_time=0.0):
    return run_persistent_cache_program(tmp_path, PROGRAM, cache_dir, min_compile_time)[0]


def test_persistent_cache_hits_are_marked_and_not_recompiles(tmp_path):
    cache_dir = tmp_path / "jax-cache"
    cold = run(tmp_path, cache_dir)
    assert [ln["persistent_cache_hit"] for ln in cold["lines"]] == [False, False]
    assert [ln["is_recompile"] for ln in cold["lines"]] == [False, True]
    assert cold["counters"]["jax.persistent_cache.misses"] >= 2

    warm = run(tmp_path, cache_dir)  # a new process: both compiles come from disk
    lines = warm["lines"]
    assert [ln["persistent_cache_hit"] for ln in lines] == [True, True]
    assert [ln["count"] for ln in lines] == [1, 2]
    assert [ln["is_recompile"] for ln in lines] == [False, False]
    assert lines[1]["cause_kind"] == "shape"  # the cause is still explained
    assert warm["counters"]["jax.persistent_cache.hits"] >= 2
    assert warm["counters"]["jax.persistent_cache.requests"] >= 2


def test_entries_not_written_are_counted_with_the_reason(tmp_path):
    out = run(tmp_path, tmp_path / "jax-cache", min_compile_time=3600.0)
    assert [ln["persistent_cache_hit"] for ln in out["lines"]] == [False, False]
    assert out["counters"]["jax.persistent_cache.not_written:compile_time_below_minimum"] >= 2
    assert out["counters"].get("jax.persistent_cache.writes", 0) == 0
