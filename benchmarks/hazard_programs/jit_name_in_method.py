"""An evaluation method that jits a module-level function each call: the same function
object, which JAX's caches find again (no recompile)."""
import jax
import jax.numpy as jnp

EXPECT = []


def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(x @ params, -1) == y)


class Trainer:
    def __init__(self, params):
        self.params = params

    def evaluate(self, x, y):
        return jax.jit(accuracy)(self.params, x, y)


trainer = Trainer(jnp.ones((4, 3)))
x, y = jnp.ones((8, 4)), jnp.zeros(8, jnp.int32)
for epoch in range(4):
    acc = trainer.evaluate(x, y)
