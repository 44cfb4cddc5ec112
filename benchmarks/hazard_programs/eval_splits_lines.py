"""Evaluation of the train, validation and test sets, each on its own line, per epoch."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def accuracy(params, x, y):
    return jnp.mean((x @ params > 0) == y)


params = jnp.ones(4)
train = (jnp.ones((100, 4)), jnp.ones(100, bool))
val = (jnp.ones((20, 4)), jnp.ones(20, bool))
test = (jnp.ones((33, 4)), jnp.ones(33, bool))
for epoch in range(3):
    train_acc = accuracy(params, *train)
    val_acc = accuracy(params, *val)
    test_acc = accuracy(params, *test)
