"""Compiles served from JAX's persistent compilation cache: marked, and not recompiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import io, json, sys
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(sys.argv[2]))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    import otel_jax

    reader = InMemoryMetricReader()
    buf = io.StringIO()
    otel_jax.install(log_output=buf, meter_provider=MeterProvider(metric_readers=[reader]))

    @jax.jit
    def cached(x):
        return jnp.tanh(x) * 3

    cached(jnp.ones(3))
    cached(jnp.ones(4))
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
""")


def run(tmp_path, cache_dir, min_compile_time=0.0):
    script = tmp_path / "cached.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, str(script), str(cache_dir), str(min_compile_time)],
                         env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


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
