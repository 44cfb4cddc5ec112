"""An nnx.jit train step given a Python float running loss that comes back strongly typed."""
import jax.numpy as jnp
import optax
from flax import nnx

EXPECT = [("train_step", "weak_type")]


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.linear = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x):
        return self.linear(x)


@nnx.jit
def train_step(model, optimizer, x, y, ema):
    def loss_fn(model):
        return jnp.mean((model(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss, 0.9 * ema + 0.1 * loss


model = MLP(nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
x, y = jnp.ones((8, 4)), jnp.zeros((8, 1))
ema = 0.0
for _ in range(4):
    loss, ema = train_step(model, optimizer, x, y, ema)
