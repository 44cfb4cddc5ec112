"""A learning-rate sweep: a step made by a factory for each rate and jitted per rate, so
each rate is its own program."""
import jax
import jax.numpy as jnp

EXPECT = [("make_step.<locals>.step", "function_identity")]


def make_step(lr):
    def step(params, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
        return params - lr * grads
    return step


x = jnp.ones((8, 4))
results = {}
for lr in (1e-3, 3e-3, 1e-2, 3e-2):
    step = jax.jit(make_step(lr))
    params = jnp.ones(4)
    for _ in range(3):
        params = step(params, x)
    results[lr] = params
