"""A rematerialisation policy built on each step and passed static: a new function each time."""
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

EXPECT = [("train_step", "static_argument", 6)]

cp = jax.checkpoint_policies


@functools.partial(jax.jit, static_argnums=2)
def train_step(w, x, policy):
    def loss(w):
        h = checkpoint_name(jnp.tanh(x @ w), "hidden")
        return jnp.sum(h ** 2)

    return w - 0.1 * jax.grad(jax.checkpoint(loss, policy=policy))(w)


w, x = jnp.ones((4, 4)), jnp.ones((8, 4))
for _ in range(8):
    policy = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden"))
    w = train_step(w, x, policy)
