"""A training script whose main() jits a partial of the loss once, then loops."""
import functools

import jax
import jax.numpy as jnp

EXPECT = []


def loss(weight_decay, params, x):
    return jnp.mean((x @ params) ** 2) + weight_decay * jnp.sum(params ** 2)


def main():
    grad_fn = jax.jit(jax.grad(functools.partial(loss, 1e-4)))
    params, x = jnp.ones(4), jnp.ones((8, 4))
    for _ in range(4):
        params = params - 0.1 * grad_fn(params, x)
    return params


if __name__ == "__main__":
    main()
