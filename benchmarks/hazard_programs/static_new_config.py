"""A plain config class passed as a static argument, made anew on the calling line."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("forward", "static_argument")]


class Config:
    def __init__(self, depth):
        self.depth = depth


@functools.partial(jax.jit, static_argnums=1)
def forward(x, config):
    for _ in range(config.depth):
        x = jnp.tanh(x)
    return x


x = jnp.ones(4)
for _ in range(3):
    y = forward(x, Config(2))
