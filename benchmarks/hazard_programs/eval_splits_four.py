"""Evaluation over a list of four held-out sets of different sizes, every epoch."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def score(params, x):
    return jnp.sum(jnp.tanh(x @ params))


params = jnp.ones(3)
held_out = [jnp.ones((n, 3)) for n in (50, 17, 90, 23)]
for epoch in range(3):
    scores = [score(params, x) for x in held_out]
