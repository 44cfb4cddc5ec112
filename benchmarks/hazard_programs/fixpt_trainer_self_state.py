"""A Trainer whose ``fit`` loop carries its state on the object (``self.state =
self._step(self.state, batch)``), with the step jitted once in ``__init__``: the state
dict gains a running loss at the first step."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._train_step", "pytree_structure")]


class Trainer:
    def __init__(self, lr):
        self.lr = lr
        self.state = {"params": jnp.ones(4), "step": jnp.zeros((), jnp.int32)}
        self._step = jax.jit(self._train_step)

    def _train_step(self, state, x):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((x @ p) ** 2))(state["params"])
        avg = 0.9 * state["loss_avg"] + 0.1 * loss if "loss_avg" in state else loss
        return {"params": state["params"] - self.lr * grads, "step": state["step"] + 1,
                "loss_avg": avg}

    def fit(self, batches):
        for batch in batches:
            self.state = self._step(self.state, batch)
        return self.state


Trainer(1e-2).fit([jnp.ones((8, 4)) * i for i in range(4)])
