"""Weak-scalar feedback through a small helper: the helper's line assigns the value back,
and the training loop calls the helper."""
import jax
import jax.numpy as jnp

EXPECT = [("step", "weak_type")]


@jax.jit
def step(params, momentum):
    return params * 0.9, momentum * jnp.float32(0.9) + 0.1


def train_one(params, momentum):
    params, momentum = step(params, momentum)
    return params, momentum


params, momentum = jnp.ones(3), 0.0
for _ in range(4):
    params, momentum = train_one(params, momentum)
