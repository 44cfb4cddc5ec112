"""A Trainer whose ``fit`` loop unpacks the step's tuple into attributes
(``self.params, self.opt_state = self._step(self.params, self.opt_state, x)``): the
bfloat16 parameters come back float32 from a float32 momentum."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._train_step", "dtype")]


class Trainer:
    def __init__(self):
        self.params = {"w": jnp.ones((4, 2), jnp.bfloat16)}
        self.opt_state = {"w": jnp.zeros((4, 2), jnp.float32)}
        self._step = jax.jit(self._train_step)

    def _train_step(self, params, opt_state, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p["w"]).astype(jnp.float32) ** 2))(params)
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, opt_state, grads)
        return jax.tree.map(lambda p, m: p - 0.01 * m, params, mom), mom

    def fit(self, batches):
        for x in batches:
            self.params, self.opt_state = self._step(self.params, self.opt_state, x)


Trainer().fit([jnp.ones((8, 4), jnp.bfloat16)] * 4)
