"""Look-alike of the TrainState renewed with ``state.replace(params=...)``: the update is
cast back to each parameter's dtype, so the next call is given what it was."""
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.training import train_state

EXPECT = []


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, param_dtype=jnp.bfloat16, dtype=jnp.bfloat16)(x)


@jax.jit
def grads_of(params, x):
    return jax.grad(lambda p: jnp.mean(model.apply(p, x).astype(jnp.float32) ** 2))(params)


@jax.jit
def apply_update(params, grads, scale):
    return jax.tree.map(lambda p, g: (p - scale * g).astype(p.dtype), params, grads)


model = Model()
x = jnp.ones((8, 4), jnp.bfloat16)
state = train_state.TrainState.create(apply_fn=model.apply,
                                      params=model.init(jax.random.key(0), x),
                                      tx=optax.sgd(0.1))
scale = jnp.float32(0.01)
for step in range(4):
    grads = grads_of(state.params, x)
    new_params = apply_update(state.params, grads, scale)
    state = state.replace(params=new_params, step=state.step + 1)
