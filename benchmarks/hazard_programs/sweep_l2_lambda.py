"""An L2 sweep over np.linspace: a lambda per rate, jitted per rate."""
import jax
import jax.numpy as jnp
import numpy as np

EXPECT = [("<lambda>", "function_identity")]


def loss_fn(params, x, l2):
    return jnp.mean((x @ params) ** 2) + l2 * jnp.sum(params ** 2)


x = jnp.ones((8, 4))
for l2 in np.linspace(0.0, 0.3, 4):
    grad = jax.jit(lambda p, v: jax.grad(loss_fn)(p, v, l2))
    params = jnp.ones(4)
    for _ in range(3):
        params = params - 0.1 * grad(params, x)
