"""Look-alike of the Trainer carrying its parameters on the object: the update is cast
back to the parameters' dtype, so each step is given what the last one was."""
import jax
import jax.numpy as jnp

EXPECT = []


class Trainer:
    def __init__(self):
        self.params = {"w": jnp.ones((4, 2), jnp.bfloat16)}
        self.opt_state = {"w": jnp.zeros((4, 2), jnp.float32)}
        self._step = jax.jit(self._train_step)

    def _train_step(self, params, opt_state, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p["w"]).astype(jnp.float32) ** 2))(params)
        mom = jax.tree.map(lambda m, g: 0.9 * m + g, opt_state, grads)
        new = jax.tree.map(lambda p, m: (p - 0.01 * m).astype(p.dtype), params, mom)
        return new, mom

    def fit(self, batches):
        for x in batches:
            self.params, self.opt_state = self._step(self.params, self.opt_state, x)


Trainer().fit([jnp.ones((8, 4), jnp.bfloat16)] * 4)
