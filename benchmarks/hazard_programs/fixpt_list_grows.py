"""Each step's loss appended to a Python list, the whole list passed to a jitted
smoother: a new length, a new compile, every step."""
import jax
import jax.numpy as jnp

EXPECT = [("smoothed", "pytree_structure", 6)]


@jax.jit
def smoothed(losses):
    weights = jnp.linspace(0.5, 1.0, len(losses))
    return jnp.sum(jnp.stack(losses) * weights) / jnp.sum(weights)


@jax.jit
def train_step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * g, loss


w, x = jnp.ones(4), jnp.ones((8, 4))
losses = []
for step in range(9):
    w, loss = train_step(w, x)
    losses.append(loss)
    trend = smoothed(losses)
