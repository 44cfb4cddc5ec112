"""A static mode flag and a static split name that cycle through a few values, every epoch."""
import functools

import jax
import jax.numpy as jnp

EXPECT = []


@functools.partial(jax.jit, static_argnames=("train", "split"))
def forward(params, x, train, split):
    h = jnp.tanh(x @ params)
    if train:
        h = h * 0.9  # a stand-in for dropout
    return jnp.mean(h) if split != "test" else jnp.sum(h)


params, x = jnp.ones((4, 4)), jnp.ones((8, 4))
for _epoch in range(4):
    for _step in range(3):
        forward(params, x, train=True, split="train")
    for split in ("valid", "test", "holdout"):
        forward(params, x, train=False, split=split)
