"""Look-alike of the list of trainers: each trainer keeps one module-level step, jitted
once, and passes its rate as an argument; the sweep is one program."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def sgd_step(params, x, lr):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - lr * grads


class Trainer:
    def __init__(self, lr):
        self.lr = jnp.float32(lr)

    def step(self, params, x):
        return sgd_step(params, x, self.lr)


trainers = [Trainer(lr) for lr in [1e-3, 3e-3, 1e-2, 3e-2]]
x = jnp.ones((8, 4))
for trainer in trainers:
    params = jnp.ones(4)
    for _ in range(3):
        params = trainer.step(params, x)
