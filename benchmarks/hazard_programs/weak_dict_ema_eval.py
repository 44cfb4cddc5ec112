"""Evaluation keeping an exponential moving average of the loss inside the jitted step,
returned in a dict of metrics and read back the next line."""
import jax
import jax.numpy as jnp

EXPECT = [("eval_step", "weak_type")]

MOMENTUM = jnp.float32(0.9)


@jax.jit
def eval_step(params, x, y, ema):
    loss = jnp.mean((x @ params - y) ** 2)
    return {"loss": loss, "ema": MOMENTUM * ema + (1 - MOMENTUM) * loss}


params, x, y = jnp.ones(4), jnp.ones((16, 4)), jnp.zeros(16)
ema = 0.0
for batch in range(5):
    stats = eval_step(params, x * batch, y, ema)
    loss, ema = stats["loss"], stats["ema"]
