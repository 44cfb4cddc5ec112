"""Capture: the JAX boundary (hooks on the miss path, readers with fallbacks) and
what a compile saw (naming, source, signature, leaves, fingerprint, wrappers).

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
