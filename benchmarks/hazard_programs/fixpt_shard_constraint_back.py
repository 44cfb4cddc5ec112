"""The transposed recurrent update, constrained back to the state's own placement with
with_sharding_constraint (and a spec written P('data', None) where the state was placed
P('data'): JAX takes the two as one placement): every step hits the cache."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

EXPECT = []

mesh = Mesh(np.array(jax.devices()), ("data",))


@jax.jit
def rollout_step(state, kernel):
    mixed = jnp.tanh(kernel @ state.T)
    mixed = jax.lax.with_sharding_constraint(mixed, NamedSharding(mesh, P("data", None)))
    return mixed, jnp.mean(mixed)


state = jax.device_put(jnp.ones((64, 64)) * 0.01, NamedSharding(mesh, P("data")))
kernel = jax.device_put(jnp.eye(64), NamedSharding(mesh, P(None, "data")))
for t in range(5):
    state, energy = rollout_step(state, kernel)
print(float(energy))
