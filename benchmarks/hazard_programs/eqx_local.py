"""equinox: filter_jit of a function defined in main(), called many times."""
import equinox as eqx
import jax
import jax.numpy as jnp

EXPECT = []


def main():
    model = eqx.nn.MLP(4, 1, 8, 2, key=jax.random.PRNGKey(0))

    @eqx.filter_jit
    def loss(model, x, y):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    x, y = jnp.ones((16, 4)), jnp.zeros((16, 1))
    for _ in range(5):
        value = loss(model, x, y)
    return value


main()
