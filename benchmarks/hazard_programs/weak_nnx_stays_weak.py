"""nnx.jit: a Python float decayed by another Python float comes back weakly typed, as it
went in: no recompile."""
import jax.numpy as jnp
from flax import nnx

EXPECT = []


class Scale(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(3, 3, rngs=rngs)

    def __call__(self, x):
        return self.linear(x)


@nnx.jit
def step(model, x, temperature):
    return model(x) / temperature, temperature * 0.97


model = Scale(nnx.Rngs(0))
x = jnp.ones((2, 3))
temperature = 1.0
for _ in range(4):
    y, temperature = step(model, x, temperature)
