"""Generation: a sampling step returning a NamedTuple; the temperature it anneals is read
back off the result's attribute."""
from typing import NamedTuple

import jax
import jax.numpy as jnp

EXPECT = [("sample_step", "weak_type")]


class Sampled(NamedTuple):
    tokens: jax.Array
    key: jax.Array
    temperature: jax.Array


@jax.jit
def sample_step(logits, key, temperature):
    key, sub = jax.random.split(key)
    tokens = jax.random.categorical(sub, logits / temperature)
    return Sampled(tokens, key, temperature * jnp.float32(0.95))


logits, key = jnp.zeros((2, 16)), jax.random.PRNGKey(0)
temperature = 1.0
for position in range(5):
    result = sample_step(logits, key, temperature)
    key, temperature = result.key, result.temperature
