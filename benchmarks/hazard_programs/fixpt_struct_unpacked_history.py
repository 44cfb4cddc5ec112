"""A step returning a dict of results, unpacked on the next lines; its optimizer state
gains a momentum entry on the first call."""
import jax
import jax.numpy as jnp

EXPECT = [("train_step", "pytree_structure")]


@jax.jit
def train_step(params, opt, x):
    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)
    mom = 0.9 * opt["mom"] + grads if "mom" in opt else grads
    return {"params": params - 0.01 * mom, "opt": {"mom": mom}, "loss": jnp.mean(x)}


params, x = jnp.ones(4), jnp.ones((8, 4))
opt = {}
for step in range(4):
    out = train_step(params, opt, x)
    params = out["params"]
    opt = out["opt"]
