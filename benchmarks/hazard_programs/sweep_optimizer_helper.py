"""A learning-rate sweep whose optimizer is built by a helper (``opt =
build_optimizer(cfg)``, the config made from the swept rate) and closed over by a step
jitted per rate: each rate is baked into a program of its own."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("make_step.<locals>.step", "function_identity")]


def build_optimizer(cfg):
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(cfg["lr"], weight_decay=cfg["wd"]))


def make_step(opt):
    def step(params, opt_state, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state
    return step


x = jnp.ones((8, 4))
for lr in (1e-4, 3e-4, 1e-3):
    cfg = {"lr": lr, "wd": 1e-4}
    opt = build_optimizer(cfg)
    step = jax.jit(make_step(opt))
    params = jnp.ones(4)
    opt_state = opt.init(params)
    for _ in range(3):
        params, opt_state = step(params, opt_state, x)
