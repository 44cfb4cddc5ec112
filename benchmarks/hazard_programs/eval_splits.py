"""Full-batch evaluation on three fixed splits of different lengths, every epoch."""
import jax
import jax.numpy as jnp

EXPECT = []


@jax.jit
def evaluate(params, x, y):
    return jnp.mean((x @ params - y) ** 2)


params = jnp.ones(4)
splits = {name: (jnp.ones((n, 4)), jnp.zeros(n)) for name, n in
          (("train", 118), ("val", 30), ("test", 45))}
for epoch in range(4):
    params = params * 0.99
    for name, (x, y) in splits.items():
        loss = evaluate(params, x, y)
