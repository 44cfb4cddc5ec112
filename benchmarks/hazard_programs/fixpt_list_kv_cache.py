"""A decoding loop that keeps its key/value cache as a Python list of per-token arrays,
passed whole to the attention step: one compile per generated token."""
import jax
import jax.numpy as jnp

EXPECT = [("attend", "pytree_structure", 6)]


@jax.jit
def attend(query, cache):
    keys = jnp.stack(cache)
    scores = jax.nn.softmax(keys @ query)
    return scores @ keys


query = jnp.ones(16)
cache = [jnp.ones(16)]
for token in range(8):
    out = attend(query, cache)
    cache.append(jnp.tanh(out))
