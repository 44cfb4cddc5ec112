"""Look-alikes of a growing list: the per-layer weights kept in a list of fixed length,
and a few crop counts for test-time augmentation cycled every epoch."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def mlp(layers, x):
    for w in layers:
        x = jnp.tanh(x @ w)
    return x


@jax.jit
def average_crops(crops):
    return jnp.mean(jnp.stack(crops), axis=0)


layers = [jnp.eye(4) * 0.5 for _ in range(3)]
x = jnp.ones((2, 4))
for epoch in range(3):
    for step in range(4):
        y = mlp(layers, x)
        layers = [w * 0.99 for w in layers]
    for n in (1, 2, 3):
        avg = average_crops([y * i for i in range(n)] if n > 1 else [y])
