"""A learning-rate sweep with a trainer object per rate that jits its own bound method in
__init__: each trainer's step is a new function (its own self, its own lr), one program
per trainer."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._step", "function_identity")]


def loss_fn(params, x):
    return jnp.mean((x @ params) ** 2)


class Trainer:
    def __init__(self, lr, steps=3):
        self.lr = lr
        self.steps = steps
        self.step = jax.jit(self._step)

    def _step(self, params, x):
        grads = jax.grad(loss_fn)(params, x)
        return params - self.lr * grads

    def fit(self, params, x):
        for _ in range(self.steps):
            params = self.step(params, x)
        return params


x = jnp.ones((8, 4))
results = {}
for lr in [1e-3, 3e-3, 1e-2]:
    trainer = Trainer(lr)
    results[lr] = trainer.fit(jnp.ones(4), x)
