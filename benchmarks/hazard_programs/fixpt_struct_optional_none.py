"""A state NamedTuple whose momentum starts as None and is filled by the first step."""
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

EXPECT = [("step", "pytree_structure")]


class State(NamedTuple):
    params: jax.Array
    momentum: Optional[jax.Array]


@jax.jit
def step(state, grads):
    momentum = grads if state.momentum is None else 0.9 * state.momentum + grads
    return State(state.params - 0.01 * momentum, momentum)


state = State(jnp.zeros(3), None)
for _ in range(4):
    state = step(state, jnp.ones(3))
