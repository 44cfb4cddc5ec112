"""A generated sequence grown by concatenation inside the jitted step and fed back: each
call sees one more token."""
import jax
import jax.numpy as jnp

EXPECT = [("decode_step", "shape")]


@jax.jit
def decode_step(tokens, emb):
    logits = emb[tokens[-1]] @ emb.T
    nxt = jnp.argmax(logits)[None]
    return jnp.concatenate([tokens, nxt])


emb = jnp.eye(16)
tokens = jnp.zeros(1, jnp.int32)
for _ in range(7):
    tokens = decode_step(tokens, emb)
