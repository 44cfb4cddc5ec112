"""A state dict holding a Python float step size, passed and returned whole."""
import jax
import jax.numpy as jnp

EXPECT = [("update", "weak_type")]


@jax.jit
def update(state, x):
    params = state["params"] - state["scale"] * x
    return {"params": params, "scale": state["scale"] * jnp.float32(0.5)}


state = {"params": jnp.zeros(3), "scale": 1.0}
for _ in range(4):
    state = update(state, jnp.ones(3))
