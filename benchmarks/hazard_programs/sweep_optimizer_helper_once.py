"""Look-alike of the optimizer built by a helper per rate: the rate is kept in the
optimizer's state (``optax.inject_hyperparams``), the optimizer built and the step jitted
once; each rate is a new value of that state, one program for all."""
import jax
import jax.numpy as jnp
import optax

EXPECT = []


def build_optimizer(cfg):
    return optax.inject_hyperparams(optax.adamw)(learning_rate=cfg["lr"],
                                                 weight_decay=cfg["wd"])


opt = build_optimizer({"lr": 1e-4, "wd": 1e-4})


@jax.jit
def step(params, opt_state, x):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


x = jnp.ones((8, 4))
for lr in (1e-4, 3e-4, 1e-3):
    params = jnp.ones(4)
    opt_state = opt.init(params)
    opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
