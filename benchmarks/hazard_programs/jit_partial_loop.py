"""jax.jit(functools.partial(loss, ...)) made and called in the loop body."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("loss", "function_identity")]


def loss(params, x, scale):
    return jnp.sum((params * x) ** 2) * scale


params, x = jnp.ones(3), jnp.ones(3)
for _ in range(3):
    fn = jax.jit(functools.partial(loss, scale=2.0))
    value = fn(params, x)
