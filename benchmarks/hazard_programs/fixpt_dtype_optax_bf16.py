"""Look-alike: bfloat16 parameters trained with optax, updated through
``optax.apply_updates`` (which casts each update back to its parameter's dtype)."""
import jax
import jax.numpy as jnp
import optax

EXPECT = []


def loss_fn(params, x, y):
    return jnp.mean(((x @ params["w"]).astype(jnp.float32) - y) ** 2)


optimizer = optax.adamw(1e-3)


@jax.jit
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


params = {"w": jnp.zeros((4, 2), jnp.bfloat16)}
opt_state = optimizer.init(params)
x, y = jnp.ones((16, 4), jnp.bfloat16), jnp.ones((16, 2))
for step in range(5):
    params, opt_state, loss = train_step(params, opt_state, x, y)
