"""A running mean of the loss kept in Python, started as 0.0, logged by a jitted function
at each step before the update: after the first step it is an array."""
import jax
import jax.numpy as jnp

EXPECT = [("log_metrics", "weak_type")]


@jax.jit
def train_step(params, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - 0.01 * grads, loss


@jax.jit
def log_metrics(step, running_loss):
    return {"step": step, "loss": running_loss, "ppl": jnp.exp(running_loss)}


params, x = jnp.ones(4), jnp.ones((8, 4))
running_loss = 0.0
for step in range(5):
    metrics = log_metrics(step, running_loss)
    params, loss = train_step(params, x)
    running_loss = running_loss + (loss - running_loss) / (step + 1)
