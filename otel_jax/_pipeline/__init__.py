"""Pipeline: a compile's frozen record, its assembly, the bounded history, the
engine that listens, delivers and applies policy, and step spans.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
