"""The default OpenTelemetry set-up when the application configured none, and respect for
the application's own providers (each case in a fresh process: providers are global)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import io, json, sys
    from opentelemetry import trace
    if sys.argv[1] == "app":
        from opentelemetry.sdk.trace import TracerProvider
        app_provider = TracerProvider()
        trace.set_tracer_provider(app_provider)
    import jax, jax.numpy as jnp, otel_jax
    buf = io.StringIO()
    handle = otel_jax.install(log_output=buf)
    jax.jit(lambda x: x + 1)(jnp.ones(2))
    line = json.loads(buf.getvalue().splitlines()[-1])
    print("RESULT " + json.dumps({
        "provider": type(trace.get_tracer_provider()).__module__,
        "same_as_app": sys.argv[1] == "app" and handle.tracer_provider is app_provider,
        "trace_id": line.get("trace_id"),
    }))
""")


def run(mode: str, **env: str) -> tuple[dict, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env={**base, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT ")), out.stdout + out.stderr


def test_default_sdk_when_nothing_is_configured():
    result, _ = run("bare")
    assert result["provider"].startswith("opentelemetry.sdk.trace")
    assert len(result["trace_id"]) == 32  # real ids, so log lines link to traces


def test_the_applications_provider_is_used_untouched():
    result, _ = run("app")
    assert result["same_as_app"] is True


def test_console_exporter_selected_by_environment():
    _, output = run("bare", OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none")
    assert '"name": "jax.compile <lambda>"' in output


def test_sdk_disabled_by_environment():
    result, _ = run("bare", OTEL_SDK_DISABLED="true")
    assert not result["provider"].startswith("opentelemetry.sdk")
    assert result["trace_id"] is None
