"""equinox: a trainer per learning rate that filter_jits its own bound method in
__init__; each trainer's step is a new function, one program per trainer."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._step", "static_argument")]


class Trainer:
    def __init__(self, learning_rate):
        self.learning_rate = learning_rate
        self.step = eqx.filter_jit(self._step)

    def _step(self, model, x):
        grads = eqx.filter_grad(lambda m: jnp.mean(jax.vmap(m)(x) ** 2))(model)
        return jax.tree_util.tree_map(lambda p, g: p - self.learning_rate * g, model, grads)


x = jnp.ones((8, 4))
for learning_rate in (1e-3, 3e-3, 1e-2):
    trainer = Trainer(learning_rate)
    model = eqx.nn.Linear(4, 1, key=jax.random.PRNGKey(0))
    for _ in range(3):
        model = trainer.step(model, x)
