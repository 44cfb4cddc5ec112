"""Fleet: multi-process jobs (each compile compared across ranks) and the compile
ledger that explains persistent-cache misses across restarts.

Modules are imported where used, not here, so ``import otel_jax`` stays light."""
