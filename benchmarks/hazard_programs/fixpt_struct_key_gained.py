"""A training state dict that gains a key inside the step (a loss average started on the
first call), returned and fed back."""
import jax
import jax.numpy as jnp

EXPECT = [("train_step", "pytree_structure")]


@jax.jit
def train_step(state, x, y):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p - y) ** 2))(state["params"])
    new = {"params": state["params"] - 0.1 * grads, "step": state["step"] + 1}
    if "loss_avg" in state:
        new["loss_avg"] = 0.9 * state["loss_avg"] + 0.1 * loss
    else:
        new["loss_avg"] = loss
    return new


state = {"params": jnp.zeros(4), "step": jnp.zeros((), jnp.int32)}
x, y = jnp.ones((32, 4)), jnp.ones(32)
for epoch in range(5):
    state = train_step(state, x, y)
