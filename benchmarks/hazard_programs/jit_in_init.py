"""Serving done right: the forward pass jitted once in __init__, called per request."""
import jax
import jax.numpy as jnp

EXPECT = []


class Predictor:
    def __init__(self, params):
        self.params = params
        self._jitted = jax.jit(self._forward)

    def _forward(self, x):
        return jax.nn.softmax(x @ self.params["w"])

    def predict(self, x):
        return self._jitted(x)


model = Predictor({"w": jnp.ones((4, 3))})
for i in range(4):
    probs = model.predict(jnp.ones((1, 4)) * i)
