"""A method jitted with a static self, called on the same object each time."""
import functools

import jax
import jax.numpy as jnp

EXPECT = []


class Normalizer:
    def __init__(self, eps):
        self.eps = eps

    @functools.partial(jax.jit, static_argnums=0)
    def __call__(self, x):
        return x / (jnp.linalg.norm(x) + self.eps)


norm = Normalizer(1e-6)
for i in range(4):
    y = norm(jnp.ones(4) * (i + 1))
