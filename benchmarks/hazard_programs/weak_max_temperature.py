"""Sampling with a temperature the step anneals (by a strong factor), floored in Python."""
import jax
import jax.numpy as jnp

EXPECT = [("sample", "weak_type")]

ANNEAL = jnp.float32(0.8)


@jax.jit
def sample(key, logits, temperature):
    key, sub = jax.random.split(key)
    token = jax.random.categorical(sub, logits / temperature)
    return key, token, temperature * ANNEAL


key, logits = jax.random.PRNGKey(0), jnp.zeros(8)
temperature = 1.0
tokens = []
for _ in range(5):
    key, token, temperature = sample(key, logits, temperature)
    temperature = max(0.1, temperature)
    tokens.append(token)
