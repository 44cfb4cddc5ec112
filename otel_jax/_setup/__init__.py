"""Set-up: install()/uninstall() and the OpenTelemetry instrumentor.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
