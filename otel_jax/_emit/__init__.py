"""Emit: records to spans, metrics and JSON / OpenTelemetry logs; the default
OpenTelemetry providers and fail-open exporters.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
