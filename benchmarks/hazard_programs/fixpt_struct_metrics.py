"""Evaluation metrics summed over batches in a dict started empty: the first call returns
the keys it did not get, and the sums are fed back."""
import jax
import jax.numpy as jnp

EXPECT = [("eval_step", "pytree_structure")]


@jax.jit
def eval_step(params, batch, metrics):
    x, y = batch
    pred = x @ params
    out = {"loss": jnp.mean((pred - y) ** 2), "count": jnp.float32(x.shape[0])}
    return {k: metrics.get(k, 0.0) + v for k, v in out.items()}


params = jnp.ones(4)
batches = [(jnp.ones((8, 4)), jnp.zeros(8)) for _ in range(5)]
metrics = {}
for batch in batches:
    metrics = eval_step(params, batch, metrics)
print({k: float(v) for k, v in metrics.items()})
