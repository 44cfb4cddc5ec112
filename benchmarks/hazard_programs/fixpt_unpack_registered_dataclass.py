"""A train state kept in a dataclass registered with ``jax.tree_util.register_dataclass``
and returned in another: the optimizer state, unpacked from the result (``opt_state =
out.opt_state``), gains a momentum entry at the first step."""
import dataclasses
import functools

import jax
import jax.numpy as jnp

EXPECT = [("train_step", "pytree_structure")]


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["params", "opt_state", "loss"], meta_fields=[])
@dataclasses.dataclass
class Result:
    params: jax.Array
    opt_state: dict
    loss: jax.Array


@jax.jit
def train_step(params, opt_state, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    mom = 0.9 * opt_state["mom"] + grads if "mom" in opt_state else grads
    return Result(params - 0.01 * mom, {"mom": mom}, loss)


params, opt_state, x = jnp.ones(4), {}, jnp.ones((8, 4))
for step in range(4):
    out = train_step(params, opt_state, x)
    params = out.params
    opt_state = out.opt_state
