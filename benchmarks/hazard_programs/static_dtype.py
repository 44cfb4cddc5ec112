"""A dtype passed as a static argument, the same spelling each time."""
import functools

import jax
import jax.numpy as jnp

EXPECT = []


@functools.partial(jax.jit, static_argnames="dtype")
def cast_sum(x, dtype):
    return jnp.sum(x.astype(dtype))


for _ in range(3):
    total = cast_sum(jnp.ones(4), dtype=jnp.bfloat16)
