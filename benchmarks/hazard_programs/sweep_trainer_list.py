"""A sweep that builds every trainer first (``trainers = [Trainer(lr) for lr in rates]``)
and then trains each: every trainer jitted its own bound method in ``__init__``, one
program per trainer."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._step", "function_identity")]


class Trainer:
    def __init__(self, lr):
        self.lr = lr
        self.step = jax.jit(self._step)

    def _step(self, params, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        return params - self.lr * grads


rates = [1e-3, 3e-3, 1e-2, 3e-2]
trainers = [Trainer(lr) for lr in rates]
x = jnp.ones((8, 4))
for trainer in trainers:
    params = jnp.ones(4)
    for _ in range(3):
        params = trainer.step(params, x)
