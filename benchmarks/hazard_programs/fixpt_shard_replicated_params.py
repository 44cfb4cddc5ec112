"""Data-parallel training on an 8-device ("data", "model") mesh: the weights are placed
split over "model", the step's out_shardings replicate every output (written once for the
loss), so the weights come back replicated and the next step compiles again."""
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

EXPECT = [("_step", "sharding")]

mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
replicated = NamedSharding(mesh, P())


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def _step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads), loss


train_step = jax.jit(_step, out_shardings=replicated)

params = {"w1": jax.device_put(jnp.ones((16, 32)) * 0.1, NamedSharding(mesh, P(None, "model"))),
          "w2": jax.device_put(jnp.ones((32, 4)) * 0.1, NamedSharding(mesh, P("model", None)))}
batch = NamedSharding(mesh, P("data"))
for step in range(5):
    x = jax.device_put(jnp.ones((32, 16)), batch)
    y = jax.device_put(jnp.zeros((32, 4)), batch)
    params, loss = train_step(params, x, y)
print(float(loss))
