"""optax adam; a smoothed loss kept in Python from 0.0, reported by a jitted summary
before each step."""
import jax
import jax.numpy as jnp
import optax

EXPECT = [("summarize", "weak_type")]

optimizer = optax.adam(1e-2)


@jax.jit
def train_step(params, opt_state, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


@jax.jit
def summarize(step, smoothed):
    return {"step": step, "smoothed": smoothed, "log": jnp.log1p(smoothed)}


params = jnp.ones(4)
opt_state = optimizer.init(params)
x = jnp.ones((8, 4))
smoothed = 0.0
for step in range(5):
    summary = summarize(step, smoothed)
    params, opt_state, loss = train_step(params, opt_state, x)
    smoothed = 0.98 * smoothed + 0.02 * loss
