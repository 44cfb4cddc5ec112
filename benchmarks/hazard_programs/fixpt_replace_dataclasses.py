"""A state kept in a frozen dataclass (a registered pytree) and renewed with
``dataclasses.replace(state, opt_state=...)`` from what a jitted update returns: the
optimizer state gains a key at the first step."""
import dataclasses

import jax
import jax.numpy as jnp

EXPECT = [("update", "pytree_structure")]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    params: jax.Array
    opt_state: dict
    step: int = dataclasses.field(default=0, metadata={"static": True})


@jax.jit
def update(params, opt_state, x):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    count = opt_state["count"] + 1 if "count" in opt_state else jnp.ones((), jnp.int32)
    return params - 0.01 * grads, {"count": count}


state, x = State(jnp.ones(4), {}), jnp.ones((8, 4))
for i in range(4):
    params, opt_state = update(state.params, state.opt_state, x)
    state = dataclasses.replace(state, params=params, opt_state=opt_state)
