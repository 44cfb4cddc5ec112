"""A method jitted with a static self, called on an object made on the calling line."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("Scaler.apply", "static_argument")]


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    @functools.partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.factor


x = jnp.ones(4)
for _ in range(3):
    y = Scaler(2.0).apply(x)
