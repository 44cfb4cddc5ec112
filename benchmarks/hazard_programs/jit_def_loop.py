"""A loss function defined in the epoch loop, jitted and called there."""
import jax
import jax.numpy as jnp

EXPECT = [("loss", "function_identity")]

params, x = jnp.ones(4), jnp.ones((8, 4))
for epoch in range(3):
    @jax.jit
    def loss(p, batch):
        return jnp.mean((batch @ p) ** 2)

    value = loss(params, x)
