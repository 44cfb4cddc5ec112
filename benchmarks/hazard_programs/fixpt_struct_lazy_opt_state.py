"""A trainer whose optimizer state is None until the first step makes it, kept in a state
dict stored back on the object."""
import jax
import jax.numpy as jnp

EXPECT = [("update", "pytree_structure")]


@jax.jit
def update(state, grads):
    momentum = state["momentum"]
    momentum = grads if momentum is None else 0.9 * momentum + grads
    return {"params": state["params"] - 0.01 * momentum, "momentum": momentum}


class Trainer:
    def __init__(self):
        self.state = {"params": jnp.zeros(5), "momentum": None}

    def run(self, steps):
        for _ in range(steps):
            self.state = update(self.state, jnp.ones(5))
        return self.state


Trainer().run(4)
