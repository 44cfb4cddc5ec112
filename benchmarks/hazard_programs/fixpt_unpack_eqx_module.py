"""A plain ``jax.jit`` step returning an equinox Module of results, unpacked after the call
(``ema = out.ema``): the running average starts as a Python float and comes back an
array."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = [("train_step", "weak_type")]


class Out(eqx.Module):
    params: jax.Array
    ema: jax.Array


@jax.jit
def train_step(params, ema, x):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    return Out(params - 0.01 * grads, 0.9 * ema + 0.1 * loss)


params, ema, x = jnp.ones(4), 0.0, jnp.ones((8, 4))
for step in range(4):
    out = train_step(params, ema, x)
    params, ema = out.params, out.ema
