"""An exponential moving average of bfloat16 weights kept by a trainer object, its decay a
float32 array: the average comes back float32 and is stored back on the object."""
import jax
import jax.numpy as jnp

EXPECT = [("ema_update", "dtype")]


@jax.jit
def ema_update(ema, params, decay):
    return jax.tree.map(lambda e, p: decay * e + (1.0 - decay) * p, ema, params)


class Trainer:
    def __init__(self):
        self.params = {"kernel": jnp.ones((8, 8), jnp.bfloat16),
                       "bias": jnp.zeros(8, jnp.bfloat16)}
        self.ema = jax.tree.map(jnp.copy, self.params)
        self.decay = jnp.asarray(0.999, jnp.float32)

    def fit(self, steps):
        for _ in range(steps):
            self.params = jax.tree.map(lambda p: p * 0.5, self.params)
            self.ema = ema_update(self.ema, self.params, self.decay)


Trainer().fit(4)
