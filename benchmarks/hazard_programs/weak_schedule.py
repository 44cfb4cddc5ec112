"""A learning rate from a Python schedule each step: what comes back is dropped."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def step(params, lr):
    return params - lr * params, lr * jnp.float32(1.0)


params = jnp.ones(3)
for i in range(5):
    lr = 0.1 * 0.9 ** i
    params, lr = step(params, lr)
