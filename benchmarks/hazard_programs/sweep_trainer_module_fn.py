"""Look-alike of the trainer sweep: each trainer calls one module-level jitted step and
passes its learning rate as an argument: one program serves every trainer."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def train_step(params, x, lr):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - lr * grads


class Trainer:
    def __init__(self, lr, steps=3):
        self.lr = lr
        self.steps = steps
        self.step = train_step

    def fit(self, params, x):
        for _ in range(self.steps):
            params = self.step(params, x, self.lr)
        return params


x = jnp.ones((8, 4))
for lr in [1e-3, 3e-3, 1e-2]:
    trainer = Trainer(lr)
    params = trainer.fit(jnp.ones(4), x)
