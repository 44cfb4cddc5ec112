"""A sweep over configs whose trainer is built by a classmethod (``Trainer.from_config(
cfg)``), the config made from the swept learning rate; the trainer jits its bound method
in ``__init__``: one program per configuration."""
import jax
import jax.numpy as jnp

EXPECT = [("Trainer._step", "function_identity")]


class Trainer:
    def __init__(self, lr, wd):
        self.lr, self.wd = lr, wd
        self.step = jax.jit(self._step)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg["lr"], cfg.get("wd", 0.0))

    def _step(self, params, x):
        grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2) + self.wd * jnp.sum(p ** 2))(params)
        return params - self.lr * grads


x = jnp.ones((8, 4))
for lr in (1e-3, 1e-2, 1e-1):
    cfg = {"lr": lr, "wd": 1e-4}
    trainer = Trainer.from_config(cfg)
    params = jnp.ones(4)
    for _ in range(3):
        params = trainer.step(params, x)
