"""jax.jit(lambda ...) made in the loop body and called there."""
import jax
import jax.numpy as jnp

EXPECT = [("<lambda>", "function_identity")]

x = jnp.ones(4)
for i in range(3):
    f = jax.jit(lambda v: jnp.sin(v) * 2)
    y = f(x)
