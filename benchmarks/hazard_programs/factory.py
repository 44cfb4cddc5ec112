"""A step made once by a factory, then called in the loop."""
import jax
import jax.numpy as jnp

EXPECT = []


def make_step(scale):
    @jax.jit
    def step(x):
        return x * scale
    return step


step = make_step(0.5)
x = jnp.ones(3)
for _ in range(4):
    x = step(x)
