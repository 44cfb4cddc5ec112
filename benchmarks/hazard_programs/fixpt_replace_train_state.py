"""A flax TrainState whose parameters are updated by a jitted function of their own and
put back with ``state = state.replace(params=new_params)``: the bfloat16 parameters come
back float32 (a float32 step size, not cast back)."""
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.training import train_state

EXPECT = [("apply_update", "dtype")]


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, param_dtype=jnp.bfloat16, dtype=jnp.bfloat16)(x)


@jax.jit
def grads_of(params, x):
    return jax.grad(lambda p: jnp.mean(model.apply(p, x).astype(jnp.float32) ** 2))(params)


@jax.jit
def apply_update(params, grads, scale):
    return jax.tree.map(lambda p, g: p - scale * g, params, grads)


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
