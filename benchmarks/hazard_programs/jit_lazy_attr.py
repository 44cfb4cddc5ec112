"""A generator that jits its decode step on first use and keeps it on the object."""
import jax
import jax.numpy as jnp

EXPECT = []


class Generator:
    def __init__(self, w):
        self.w = w
        self._step = None

    def _decode(self, h):
        return jnp.tanh(h @ self.w)

    def step(self, h):
        if self._step is None:
            self._step = jax.jit(self._decode)
        return self._step(h)


gen = Generator(jnp.eye(4) * 0.5)
h = jnp.ones((1, 4))
for _ in range(6):
    h = gen.step(h)
