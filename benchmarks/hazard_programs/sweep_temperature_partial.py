"""A temperature sweep for generation: jax.jit(partial(sample, temperature=t)) per t."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("sample", "function_identity")]


def sample(key, logits, temperature):
    return jax.random.categorical(key, logits / temperature)


logits = jnp.zeros((2, 8))
for temperature in [0.5, 0.7, 1.0, 1.3]:
    sampler = jax.jit(functools.partial(sample, temperature=temperature))
    key = jax.random.PRNGKey(0)
    for _ in range(3):
        key, sub = jax.random.split(key)
        tokens = sampler(sub, logits)
