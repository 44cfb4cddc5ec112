"""A learning-rate sweep through the optimizer: optax.adam(lr) built per rate, and a step
made from that optimizer jitted per rate. Each rate is baked into its step's program
through the optimizer the step closes over: one program per rate."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("make_step.<locals>.step", "function_identity")]


def make_step(opt):
    def step(params, opt_state, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state
    return step


x = jnp.ones((8, 4))
for lr in [1e-3, 3e-3, 1e-2]:
    opt = optax.adam(lr)
    step = jax.jit(make_step(opt))
    params = jnp.ones(4)
    opt_state = opt.init(params)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
