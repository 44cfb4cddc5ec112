"""The same bfloat16 update, cast back to each parameter's dtype: what comes back is
typed as what went in."""
import jax
import jax.numpy as jnp

EXPECT = []


def loss_fn(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred.astype(jnp.float32) - y) ** 2)


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), params, grads)
    return params, loss


params = {"w": jnp.zeros((4, 2), jnp.bfloat16), "b": jnp.zeros(2, jnp.bfloat16)}
x, y = jnp.ones((16, 4), jnp.bfloat16), jnp.ones((16, 2))
lr = jnp.float32(1e-2)
for step in range(5):
    params, loss = train_step(params, x, y, lr)
