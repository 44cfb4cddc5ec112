"""A weight-decay sweep over an optax chain built per item (clipping, then adamw with the
item's decay), the step jitted per item from that optimizer: one program per decay."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("make_step.<locals>.step", "function_identity")]


def make_step(tx):
    def step(params, opt_state, batch):
        x, y = batch
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p["w"] + p["b"] - y) ** 2))(
            params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step


batch = (jnp.ones((16, 4)), jnp.zeros((16,)))
for i, weight_decay in enumerate([1e-4, 1e-3, 1e-2]):
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4, weight_decay=weight_decay))
    train_step = jax.jit(make_step(tx))
    params = {"w": jnp.zeros(4), "b": jnp.zeros(())}
    opt_state = tx.init(params)
    for _ in range(3):
        params, opt_state, loss = train_step(params, opt_state, batch)
