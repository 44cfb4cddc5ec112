"""A training step given the step number as a static, for its warm-up schedule."""
import functools

import jax
import jax.numpy as jnp
import optax

EXPECT = [("train_step", "static_argument", 6)]

WARMUP = 100


@functools.partial(jax.jit, static_argnums=3)
def train_step(params, opt_state, batch, step):
    scale = min(1.0, (step + 1) / WARMUP)  # Python arithmetic on the static step

    def loss(p):
        return jnp.mean((batch @ p - 1.0) ** 2)

    grads = jax.grad(loss)(params)
    grads = jax.tree_util.tree_map(lambda g: g * scale, grads)
    updates, opt_state = optimizer.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state


optimizer = optax.sgd(0.1)
params = jnp.ones(4)
opt_state = optimizer.init(params)
batch = jnp.ones((8, 4))
for step in range(10):
    params, opt_state = train_step(params, opt_state, batch, step)
