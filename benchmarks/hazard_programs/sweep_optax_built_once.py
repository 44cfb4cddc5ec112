"""Look-alike of the optimizer sweep: the optimizer and its jitted step are built once,
before the loop over seeds, which only makes new parameters: one program for all."""
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
opt = optax.adam(1e-3)
step = jax.jit(make_step(opt))
for seed in [0, 1, 2]:
    params = jax.random.normal(jax.random.PRNGKey(seed), (4,))
    opt_state = opt.init(params)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
