"""bfloat16 parameters updated by hand with a float32 learning rate: the update is
float32, not cast back, and fed back as the parameters."""
import jax
import jax.numpy as jnp

EXPECT = [("train_step", "dtype")]


def loss_fn(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred.astype(jnp.float32) - y) ** 2)


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, loss


params = {"w": jnp.zeros((4, 2), jnp.bfloat16), "b": jnp.zeros(2, jnp.bfloat16)}
x, y = jnp.ones((16, 4), jnp.bfloat16), jnp.ones((16, 2))
lr = jnp.float32(1e-2)
for step in range(5):
    params, loss = train_step(params, x, y, lr)
