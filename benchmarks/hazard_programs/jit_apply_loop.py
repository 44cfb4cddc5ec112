"""flax linen: jax.jit(model.apply) made and called in the loop body."""
import jax
import jax.numpy as jnp
from flax import linen as nn

EXPECT = [("MLP.apply", "function_identity")]


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)


model = MLP()
x = jnp.ones((4, 3))
params = model.init(jax.random.PRNGKey(0), x)
for _ in range(3):
    forward = jax.jit(model.apply)
    y = forward(params, x)
