"""The same state, its loss average present (zero) from the first call: one structure."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def train_step(state, x, y):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p - y) ** 2))(state["params"])
    return {"params": state["params"] - 0.1 * grads, "step": state["step"] + 1,
            "loss_avg": 0.9 * state["loss_avg"] + 0.1 * loss}


state = {"params": jnp.zeros(4), "step": jnp.zeros((), jnp.int32),
         "loss_avg": jnp.zeros((), jnp.float32)}
x, y = jnp.ones((32, 4)), jnp.ones(32)
for epoch in range(5):
    state = train_step(state, x, y)
