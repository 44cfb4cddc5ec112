"""A loss total summed after each step, then reported by a jitted function: an array from
its first call on, so nothing compiles again."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def train_step(params, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return params - 0.01 * grads, loss


@jax.jit
def report(total, n):
    return total / n


params, x = jnp.ones(4), jnp.ones((8, 4))
total = 0.0
for n in range(1, 5):
    params, loss = train_step(params, x)
    total += loss
    mean = report(total, n)
