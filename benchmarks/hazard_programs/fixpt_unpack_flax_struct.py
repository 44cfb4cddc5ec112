"""A step returning a flax struct dataclass, unpacked on the next lines (``params =
out.params``): its bfloat16 parameters come back float32, updated with a float32 learning
rate and not cast back."""
import jax
import jax.numpy as jnp
from flax import struct

EXPECT = [("train_step", "dtype")]


@struct.dataclass
class StepOut:
    params: dict
    loss: jax.Array


def loss_fn(params, x):
    return jnp.mean((x @ params["w"]).astype(jnp.float32) ** 2)


@jax.jit
def train_step(params, x, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    return StepOut(params=jax.tree.map(lambda p, g: p - lr * g, params, grads), loss=loss)


params = {"w": jnp.ones((4, 2), jnp.bfloat16)}
x, lr = jnp.ones((8, 4), jnp.bfloat16), jnp.float32(1e-2)
for step in range(4):
    out = train_step(params, x, lr)
    params = out.params
    loss = out.loss
