"""An equinox filter_jit step given a Python float running statistic, assigned back."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = [("step", "static_argument")]


@eqx.filter_jit
def step(model, x, ema):
    loss = jnp.mean(model(x) ** 2)
    return loss, 0.9 * ema + 0.1 * loss


model = eqx.nn.Linear(4, 2, key=jax.random.PRNGKey(0))
x = jnp.ones(4)
ema = 0.0
for _ in range(4):
    loss, ema = step(model, x, ema)
