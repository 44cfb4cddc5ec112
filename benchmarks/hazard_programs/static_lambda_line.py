"""A lambda passed as a static argument, written on the calling line inside a loop."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("transform", "static_argument")]


@functools.partial(jax.jit, static_argnums=1)
def transform(x, fn):
    return fn(x) + 1


x = jnp.ones(4)
for _ in range(3):
    y = transform(x, lambda v: v * 2)
