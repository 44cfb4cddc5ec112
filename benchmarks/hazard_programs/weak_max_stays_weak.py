"""The same clamp, with a decay by a Python float: what comes back stays weakly typed."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p - y) ** 2))(params)
    return params - lr * grads, loss, lr * 0.9


params, x, y = jnp.zeros(4), jnp.ones((16, 4)), jnp.ones(16)
lr = 0.1
for epoch in range(5):
    params, loss, lr = train_step(params, x, y, lr)
    lr = max(lr, 1e-3)
