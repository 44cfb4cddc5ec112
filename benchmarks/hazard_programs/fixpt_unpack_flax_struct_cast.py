"""Look-alike of the flax struct dataclass unpacked after the call: the update is cast
back to the parameters' dtype, so what comes back goes in again as it came."""
import jax
import jax.numpy as jnp
from flax import struct

EXPECT = []


@struct.dataclass
class StepOut:
    params: dict
    loss: jax.Array


def loss_fn(params, x):
    return jnp.mean((x @ params["w"]).astype(jnp.float32) ** 2)


@jax.jit
def train_step(params, x, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    new = jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), params, grads)
    return StepOut(params=new, loss=loss)


params = {"w": jnp.ones((4, 2), jnp.bfloat16)}
x, lr = jnp.ones((8, 4), jnp.bfloat16), jnp.float32(1e-2)
for step in range(4):
    out = train_step(params, x, lr)
    params = out.params
    loss = out.loss
