"""Lengths padded to powers of two before the jitted call: a warm-up over buckets."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def embed(tokens):
    return jnp.sum(tokens * 2)


for n in (5, 12, 30, 60, 7, 14, 31, 3):
    size = 1 << (n - 1).bit_length()
    out = embed(jnp.zeros(size).at[:n].set(1.0))
