"""Comparing optax optimizers: one jitted step per optimizer, which is what is meant."""
import jax
import jax.numpy as jnp
import optax

EXPECT = []


def make_step(opt):
    def step(params, opt_state, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state
    return step


x = jnp.ones((8, 4))
for name, opt in [("sgd", optax.sgd(0.1)), ("adam", optax.adam(1e-3))]:
    step = jax.jit(make_step(opt))
    params = jnp.ones(4)
    opt_state = opt.init(params)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
