"""optax with a cosine schedule: the step count lives in the optimizer state."""
import jax
import jax.numpy as jnp
import optax

EXPECT = []

schedule = optax.cosine_decay_schedule(0.1, 100)
optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(schedule))


@jax.jit
def train_step(params, opt_state, x):
    grads = jax.grad(lambda p: jnp.sum((x @ p) ** 2))(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


params = jnp.ones(4)
opt_state = optimizer.init(params)
for _ in range(5):
    params, opt_state = train_step(params, opt_state, jnp.ones((8, 4)))
