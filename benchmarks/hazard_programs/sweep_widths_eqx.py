"""equinox: one model per width, each trained with its own filter_jit step: one program
per width is what the sweep means (the shapes differ), no hazard to warn of."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = []


def make_step(width):
    @eqx.filter_jit
    def step(model, x):
        grads = eqx.filter_grad(lambda m: jnp.mean(jax.vmap(m)(x) ** 2))(model)
        return eqx.apply_updates(model, jax.tree_util.tree_map(lambda g: -0.1 * g, grads))
    return step


x = jnp.ones((8, 4))
for width in (8, 16, 32):
    model = eqx.nn.MLP(4, 1, width, 1, key=jax.random.PRNGKey(width))
    step = make_step(width)
    for _ in range(2):
        model = step(model, x)
