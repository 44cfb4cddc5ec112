"""equinox with optax: a filter_jit train step made by a factory, a fixed batch shape."""
import equinox as eqx
import jax
import jax.numpy as jnp
import optax

EXPECT = []


def make_step(optim):
    @eqx.filter_jit
    def step(model, opt_state, x, y):
        loss, grads = eqx.filter_value_and_grad(
            lambda m: jnp.mean((jax.vmap(m)(x) - y) ** 2))(model)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss
    return step


model = eqx.nn.MLP(4, 1, 8, 2, key=jax.random.PRNGKey(0))
optim = optax.adam(1e-3)
opt_state = optim.init(eqx.filter(model, eqx.is_array))
step = make_step(optim)
x, y = jnp.ones((16, 4)), jnp.zeros((16, 1))
for _ in range(5):
    model, opt_state, loss = step(model, opt_state, x, y)
