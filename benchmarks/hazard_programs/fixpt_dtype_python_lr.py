"""bfloat16 parameters, the learning rate a Python float: the factor is weakly typed, so
the update stays bfloat16 and feeding it back compiles nothing."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def sgd_step(params, x, y):
    grads = jax.grad(lambda p: jnp.mean((x @ p["w"] - y) ** 2))(params)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)


params = {"w": jnp.zeros((4, 2), jnp.bfloat16)}
x, y = jnp.ones((16, 4), jnp.bfloat16), jnp.ones((16, 2), jnp.bfloat16)
for step in range(5):
    params = sgd_step(params, x, y)
