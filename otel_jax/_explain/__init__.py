"""Explain: the structured diff against the closest earlier signature, the cause
in words from its structure, and fix hints.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
