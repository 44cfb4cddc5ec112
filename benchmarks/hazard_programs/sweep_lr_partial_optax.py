"""An optax weight-decay sweep over np.logspace: jax.jit(functools.partial(step, wd))."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

EXPECT = [("train_step", "function_identity")]


def train_step(weight_decay, params, opt_state, x):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2) + weight_decay * jnp.sum(p ** 2))(params)
    updates, opt_state = optax.sgd(0.1).update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state


x = jnp.ones((8, 4))
for weight_decay in np.logspace(-5, -2, 4):
    step = jax.jit(functools.partial(train_step, float(weight_decay)))
    params = jnp.ones(4)
    opt_state = optax.sgd(0.1).init(params)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
