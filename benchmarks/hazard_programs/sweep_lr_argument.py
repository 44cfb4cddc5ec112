"""The sweep done right: one jitted step, the learning rate passed as an argument."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def step(params, x, lr):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - lr * grads


x = jnp.ones((8, 4))
for lr in (1e-3, 3e-3, 1e-2, 3e-2):
    params = jnp.ones(4)
    for _ in range(3):
        params = step(params, x, lr)
