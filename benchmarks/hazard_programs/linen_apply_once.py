"""flax linen: jax.jit(model.apply) made once, before the evaluation loop."""
import jax
import jax.numpy as jnp
from flax import linen as nn

EXPECT = []


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(4, (3, 3))(x)
        return nn.Dense(10)(x.reshape((x.shape[0], -1)))


model = CNN()
x = jnp.ones((2, 8, 8, 1))
params = model.init(jax.random.PRNGKey(0), x)
predict = jax.jit(model.apply)
for _ in range(4):
    logits = predict(params, x)
