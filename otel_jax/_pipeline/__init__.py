"""Pipeline: a compile's frozen record, its assembly, the bounded history, the
engine that listens and delivers, the emitter contract it delivers through, the
policy (warm-up, storm warning, ``on_recompile``), and step spans.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
