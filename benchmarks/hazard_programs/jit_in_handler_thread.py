"""Serving from a worker thread: the handler jits a closure over the model per request.

The handler is called by the thread pool, not by a loop of the program's own, so the
first compile cannot tell it runs again; the second compile, made anew at the same line,
shows it does."""
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp

EXPECT = [("Server.handle.<locals>.score", "function_identity", 3)]


class Server:
    def __init__(self, w):
        self.w = w

    def handle(self, request):
        def score(x):
            return jnp.tanh(x @ self.w)

        return jax.jit(score)(request)


server = Server(jnp.ones((4, 2)))
requests = [jnp.ones((2, 4)) * i for i in range(5)]
with ThreadPoolExecutor(max_workers=1) as pool:
    replies = list(pool.map(server.handle, requests))
