"""The same running mean, accumulated from loss.item(): a Python float each step."""
import jax
import jax.numpy as jnp

EXPECT = []


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
    running_loss = running_loss + (loss.item() - running_loss) / (step + 1)
