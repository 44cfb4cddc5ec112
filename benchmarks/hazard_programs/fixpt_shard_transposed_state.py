"""A recurrent state placed by rows over 8 devices, updated by a step whose result XLA's
sharding propagation places by columns (the state is transposed through the update): fed
back, the next step is given another sharding and compiles again."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

EXPECT = [("rollout_step", "sharding")]

mesh = Mesh(np.array(jax.devices()), ("data",))


@jax.jit
def rollout_step(state, kernel):
    mixed = jnp.tanh(kernel @ state.T)
    return mixed, jnp.mean(mixed)


state = jax.device_put(jnp.ones((64, 64)) * 0.01, NamedSharding(mesh, P("data", None)))
kernel = jax.device_put(jnp.eye(64), NamedSharding(mesh, P(None, "data")))
for t in range(5):
    state, energy = rollout_step(state, kernel)
print(float(energy))
