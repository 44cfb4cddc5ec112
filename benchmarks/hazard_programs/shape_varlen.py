"""Sequences of data-dependent lengths, fed unpadded to a jitted step."""
import jax
import jax.numpy as jnp
import numpy as np

EXPECT = [("encode", "shape", 6)]


@jax.jit
def encode(tokens):
    return jnp.cumsum(tokens, axis=0).mean()


rng = np.random.default_rng(0)
lengths = [13, 29, 7, 41, 22, 35, 18, 51, 9, 26]
for n in lengths:
    batch = rng.integers(0, 100, size=(n,))
    out = encode(jnp.asarray(batch))
