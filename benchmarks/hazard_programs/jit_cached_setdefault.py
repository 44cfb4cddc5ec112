"""A compiled function per activation name, looked up in a cache each pass."""
import jax
import jax.numpy as jnp

EXPECT = []

compiled = {}
x = jnp.ones(4)
for step in range(6):
    name = "tanh" if step % 2 else "relu"
    if name not in compiled:
        compiled[name] = jax.jit(jnp.tanh if name == "tanh" else jax.nn.relu)
    y = compiled[name](x)
