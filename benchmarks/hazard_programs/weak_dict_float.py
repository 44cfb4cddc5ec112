"""The same dict, its learning rate read back as a Python float: no recompile."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def train_step(params, batch, lr):
    grads = jax.grad(lambda p: jnp.mean((batch @ p) ** 2))(params)
    new_lr = jnp.minimum(lr * jnp.float32(1.5), jnp.float32(0.1))
    return {"params": params - lr * grads, "lr": new_lr}


params, batch = jnp.ones(4), jnp.ones((8, 4))
lr = 0.01
for step in range(5):
    out = train_step(params, batch, lr)
    params = out["params"]
    lr = float(out["lr"])
