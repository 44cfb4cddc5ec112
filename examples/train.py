"""Train a small MLP in pure JAX with otel_jax installed, and see why each recompile happened.

The loop runs into three recompiles that real training code hits every day:

* the learning rate starts as a Python float and is then fed back as the f32
  the step returned (a weakly typed scalar becomes a strongly typed one);
* the last batch of each epoch is smaller than the others (a new shape);
* from epoch 2 the config dict gains a key (a new pytree structure).

It also re-creates a ``jax.jit(lambda ...)`` for evaluation every epoch (a new
function object each time). Each compile logs its cause on stderr: a short line on a
terminal, a JSON line in a pipe or file (a hazard: a warning too). With
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, the collector gets spans, metrics and logs.

    python examples/train.py                  # log lines on stderr, summary on stdout
    python examples/train.py --epochs 5 --linger 30   # keep the metrics endpoint up
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
from opentelemetry import trace

import otel_jax


def init_params(key: jax.Array, sizes: list[int]) -> dict[str, dict[str, jax.Array]]:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        params[f"layer_{i}"] = {
            "w": jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in),
            "b": jnp.zeros((n_out,)),
        }
    return params


def forward(params: dict, x: jax.Array) -> jax.Array:
    *hidden, last = params.values()
    for layer in hidden:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ last["w"] + last["b"]


def loss_fn(params: dict, batch: dict[str, jax.Array], config: dict[str, float]) -> jax.Array:
    logits = forward(params, batch["x"])
    labels = jax.nn.one_hot(batch["y"], logits.shape[-1])
    if "label_smoothing" in config:
        eps = config["label_smoothing"]
        labels = labels * (1 - eps) + eps / logits.shape[-1]
    nll = -(labels * jax.nn.log_softmax(logits)).sum(-1).mean()
    l2 = sum(jnp.sum(layer["w"] ** 2) for layer in params.values())
    return nll + config["weight_decay"] * l2


@jax.jit
def train_step(params: dict, batch: dict, lr: jax.Array | float, config: dict):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, config)
    params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, loss, lr * jnp.float32(0.999)  # a decayed, strongly typed f32


def make_data(key: jax.Array, n: int, dim: int, classes: int) -> dict[str, jax.Array]:
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (n, dim))
    y = jnp.argmax(x @ jax.random.normal(kw, (dim, classes)), axis=-1)
    return {"x": x, "y": y}


def batches(data: dict[str, jax.Array], batch_size: int):
    n = data["x"].shape[0]
    for start in range(0, n, batch_size):  # the last batch is partial
        yield {k: v[start:start + batch_size] for k, v in data.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--linger", type=float, default=0.0,
                        help="seconds to stay alive after training (for a metrics scrape)")
    args = parser.parse_args()

    steps_per_epoch = -(-args.samples // args.batch_size)
    # Warm-up is the first epoch: later compiles are marked after_warmup.
    otel_jax.install(warmup_steps=steps_per_epoch)
    tracer = trace.get_tracer("examples.train")

    key = jax.random.PRNGKey(0)
    params = init_params(key, [32, 64, 64, 10])
    data = make_data(jax.random.PRNGKey(1), args.samples, 32, 10)
    lr: jax.Array | float = 0.1  # a Python float: weakly typed
    config = {"weight_decay": 1e-4}

    for epoch in range(1, args.epochs + 1):
        if epoch == 2:
            config = {**config, "label_smoothing": 0.1}  # the config gains a key
        with tracer.start_as_current_span("epoch", attributes={"epoch": epoch}):
            losses = []
            for batch in batches(data, args.batch_size):
                # One step: a span the compile spans nest under, a step-time
                # histogram that says whether the step compiled, and a count
                # toward warm-up.
                with otel_jax.step("train_step"):
                    params, loss, lr = train_step(params, batch, lr, config)
                losses.append(loss)
            # A jit re-created every epoch: a new function object each time.
            accuracy = jax.jit(lambda p, x, y: (forward(p, x).argmax(-1) == y).mean())
            acc = float(accuracy(params, data["x"], data["y"]))
        print(f"epoch {epoch}: loss {float(jnp.mean(jnp.stack(losses))):.4f}  "
              f"accuracy {acc:.3f}  lr {float(lr):.4f}", flush=True)

    print("\ncompiles of train_step, and why:")
    for entry in otel_jax.compile_history(train_step):
        print(f"  #{entry.count} {entry.cause_kind:<18} {entry.cause}")
    if args.linger > 0:
        time.sleep(args.linger)


if __name__ == "__main__":
    main()
