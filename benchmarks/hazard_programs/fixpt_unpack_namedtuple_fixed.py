"""Look-alike: a NamedTuple of results unpacked after the call, whose optimizer state holds
its momentum from the first call: what comes back goes in again as it came."""
from typing import NamedTuple

import jax
import jax.numpy as jnp

EXPECT = []


class Result(NamedTuple):
    params: jax.Array
    opt_state: dict
    loss: jax.Array


@jax.jit
def train_step(params, opt_state, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    mom = 0.9 * opt_state["mom"] + grads
    return Result(params - 0.01 * mom, {"mom": mom}, loss)


params, opt_state, x = jnp.ones(4), {"mom": jnp.zeros(4)}, jnp.ones((8, 4))
for step in range(4):
    out = train_step(params, opt_state, x)
    params = out.params
    opt_state = out.opt_state
