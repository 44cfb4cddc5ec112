"""jax.jit(lambda ...) made in the loop body on the first pass only, kept in a dict."""
import jax
import jax.numpy as jnp

EXPECT = []

cache = {}
x = jnp.ones(4)
for i in range(4):
    key = "double"
    if key not in cache:
        cache[key] = jax.jit(lambda v: v * 2)
    y = cache[key](x)
