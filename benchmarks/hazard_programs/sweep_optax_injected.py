"""Look-alike of the optimizer sweep, done right: the learning rate lives in the
optimizer's state (optax.inject_hyperparams), so one step jitted before the loop serves
every rate; each rate only sets a state value."""
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
opt = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)
step = jax.jit(make_step(opt))
for lr in [1e-3, 3e-3, 1e-2]:
    params = jnp.ones(4)
    opt_state = opt.init(params)
    opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
