"""The fail-open core: the vocabulary, bounded and scrubbed text, the one guard,
OtelJaxWarning and the one warning path, small caches. Standard library only.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
