"""A running average kept as a Python float: float() of what came back each pass."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def step(params, avg):
    loss = jnp.sum(params ** 2)
    return params * 0.5, 0.9 * avg + 0.1 * loss


params, avg = jnp.ones(3), 0.0
for _ in range(5):
    params, avg = step(params, avg)
    avg = float(avg)
