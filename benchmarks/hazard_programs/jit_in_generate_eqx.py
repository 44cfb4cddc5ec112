"""equinox generation: generate() jits its decode step each time it is called, once per
prompt."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = [("generate.<locals>.decode", "function_identity")]


def generate(model, h, steps):
    @eqx.filter_jit
    def decode(m, state):
        return jnp.tanh(m(state))

    for _ in range(steps):
        h = decode(model, h)
    return h


model = eqx.nn.Linear(4, 4, key=jax.random.PRNGKey(0))
prompts = [jnp.ones(4) * i for i in range(3)]
outputs = [generate(model, p, 3) for p in prompts]
