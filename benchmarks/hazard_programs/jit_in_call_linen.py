"""flax linen evaluation: an evaluator whose __call__ jits model.apply, once per batch."""
import jax
import jax.numpy as jnp
from flax import linen as nn

EXPECT = [("Classifier.apply", "function_identity")]


class Classifier(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(3)(nn.relu(nn.Dense(8)(x)))


class Evaluator:
    def __init__(self, model, params):
        self.model, self.params = model, params

    def __call__(self, x, y):
        logits = jax.jit(self.model.apply)(self.params, x)
        return jnp.mean(jnp.argmax(logits, -1) == y)


model = Classifier()
x = jnp.ones((8, 4))
params = model.init(jax.random.PRNGKey(0), x)
evaluate = Evaluator(model, params)
batches = [(x * i, jnp.zeros(8, jnp.int32)) for i in range(4)]
accuracy = [evaluate(bx, by) for bx, by in batches]
