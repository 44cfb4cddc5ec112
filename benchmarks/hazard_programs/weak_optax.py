"""optax adam: the jitted step also keeps a running loss, started as a Python float."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("train_step", "weak_type")]

optimizer = optax.adam(1e-2)


@jax.jit
def train_step(params, opt_state, x, y, running):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p - y) ** 2))(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, 0.95 * running + 0.05 * loss


params = jnp.zeros(4)
opt_state = optimizer.init(params)
x, y = jnp.ones((16, 4)), jnp.ones(16)
running = 0.0
for _ in range(5):
    params, opt_state, running = train_step(params, opt_state, x, y, running)
