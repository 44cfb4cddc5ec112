"""flax nnx with an optimizer: one nnx.jit train step, a fixed batch shape."""
import jax.numpy as jnp
import optax
from flax import nnx

EXPECT = []


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(4, 8, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.relu(self.hidden(x)))


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss


model = MLP(nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
x, y = jnp.ones((16, 4)), jnp.zeros((16, 1))
for _ in range(5):
    loss = train_step(model, optimizer, x, y)
