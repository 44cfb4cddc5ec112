"""flax nnx serving: __call__ jits a lambda over the model per request, from a queue."""
import queue

import jax.numpy as jnp
from flax import nnx

EXPECT = [("Service.__call__.<locals>.<lambda>", "function_identity")]


class Service:
    def __init__(self):
        self.model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))

    def __call__(self, x):
        return nnx.jit(lambda m, v: m(v))(self.model, x)


service = Service()
requests = queue.Queue()
for i in range(4):
    requests.put(jnp.ones((1, 4)) * i)
requests.put(None)
while True:
    request = requests.get()
    if request is None:
        break
    reply = service(request)
