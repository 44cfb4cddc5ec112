"""jax.jit train step: a Python float learning rate decayed inside and assigned back."""
import jax
import jax.numpy as jnp

EXPECT = [("train_step", "weak_type")]


@jax.jit
def train_step(params, x, lr):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - lr * grads, lr * jnp.float32(0.99)


params, x, lr = jnp.ones(4), jnp.ones((8, 4)), 0.1
for _ in range(5):
    params, lr = train_step(params, x, lr)
