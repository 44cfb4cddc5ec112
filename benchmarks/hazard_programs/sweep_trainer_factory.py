"""A learning-rate sweep whose trainer is built by a factory function (``trainer =
make_trainer(lr)``); the trainer jits its own bound method in ``__init__``: one program
per trainer, each with its rate baked in."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._step", "function_identity")]


class Trainer:
    def __init__(self, lr, steps=3):
        self.lr = lr
        self.steps = steps
        self.step = jax.jit(self._step)

    def _step(self, params, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        return params - self.lr * grads

    def fit(self, params, x):
        for _ in range(self.steps):
            params = self.step(params, x)
        return params


def make_trainer(lr):
    return Trainer(lr, steps=3)


x = jnp.ones((8, 4))
results = {}
for lr in [1e-3, 3e-3, 1e-2]:
    trainer = make_trainer(lr)
    results[lr] = trainer.fit(jnp.ones(4), x)
