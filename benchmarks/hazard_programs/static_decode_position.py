"""Greedy decoding that passes the position static: each new position compiles again."""
import functools

import jax
import jax.numpy as jnp

EXPECT = [("decode_step", "static_argument", 6)]

VOCAB, WIDTH, LENGTH = 32, 16, 12


@functools.partial(jax.jit, static_argnames="pos")
def decode_step(params, tokens, pos):
    # the prefix up to ``pos`` is sliced with a Python int: a static position
    h = params["embed"][tokens[: pos + 1]].mean(axis=0)
    logits = h @ params["out"]
    return tokens.at[pos + 1].set(jnp.argmax(logits))


key = jax.random.PRNGKey(0)
params = {"embed": jax.random.normal(key, (VOCAB, WIDTH)),
          "out": jax.random.normal(key, (WIDTH, VOCAB))}
tokens = jnp.zeros(LENGTH + 1, jnp.int32)
for pos in range(LENGTH):
    tokens = decode_step(params, tokens, pos=pos)
