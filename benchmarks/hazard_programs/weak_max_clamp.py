"""optax sgd with a learning rate the step decays, clamped to a floor in Python."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("train_step", "weak_type")]

DECAY = jnp.float32(0.9)


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p - y) ** 2))(params)
    updates, _ = optax.sgd(lr).update(grads, optax.sgd(lr).init(params))
    return optax.apply_updates(params, updates), loss, lr * DECAY


params, x, y = jnp.zeros(4), jnp.ones((16, 4)), jnp.ones(16)
lr = 0.1
for epoch in range(5):
    params, loss, lr = train_step(params, x, y, lr)
    lr = max(lr, 1e-3)
