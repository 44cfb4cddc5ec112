"""A fix hint per cause kind: what to change in the user's code so the compile stops."""

from __future__ import annotations

HINTS: dict[str, str] = {
    "first_compile": "expected once per function and signature; warm up before timing",
    "shape": ("pad or bucket inputs to a few fixed shapes (e.g. drop or pad the last partial "
              "batch); every new shape compiles again"),
    "dtype": ("cast inputs to one dtype before the call (e.g. jnp.asarray(x, jnp.float32)); "
              "every new dtype compiles again"),
    "weak_type": ("a Python scalar is weakly typed: build it with an explicit dtype "
                  "(jnp.float32(lr)) or always pass the same kind of value"),
    "pytree_structure": ("keep the argument tree fixed: same dict keys, no None-vs-array "
                         "switches, the same positional/keyword calling convention"),
    "static_argument": ("every new static value compiles again: make it a traced argument, or "
                        "give its type value-based __eq__/__hash__ (or pass a tuple) instead of "
                        "a fresh object compared by identity"),
    "function_identity": ("hoist jax.jit out of the loop: jit a named function once and reuse "
                          "it instead of re-creating jax.jit(lambda ...), "
                          "jax.jit(functools.partial(...)) or jax.jit(obj.method) each call"),
    "tracing_context": ("a config value or context manager in the cache key changed "
                        "(enable_x64, default_matmul_precision, a mesh): enter it once around "
                        "the whole loop"),
    "sharding": ("keep each argument's sharding fixed across calls (device_put with the same "
                 "NamedSharding, or set in_shardings on jax.jit)"),
    "device_placement": ("an argument was committed to another device or its committed-ness "
                         "changed: device_put inputs to the same device every call"),
    "jit_options": ("another jax.jit wrapper of this function with different options "
                    "(donate_argnums, shardings, compiler options): create one wrapper and "
                    "reuse it"),
    "unknown": ("no difference found in what otel_jax captures: a cache eviction "
                "(jax.clear_caches(), jitted.clear_cache()) or a cache key otel_jax does not see"),
}


TRANSFORMED_HINT = (
    "jax.grad/vmap/jvp of a jitted function, called outside jit, compiles each transformed "
    "program separately: jit the transformed function instead (jax.jit(jax.grad(loss))), "
    "once, outside the loop")


def hint_for(kind: str, transformed: bool = False) -> str:
    """The fix hint for a cause kind (the ``unknown`` hint for an unrecognised one).

    ``transformed``: the compile was of a jitted function's computation under a
    transformation outside jit, where a function-identity cause means the
    transformation itself.
    """
    if transformed and kind == "function_identity":
        return TRANSFORMED_HINT
    return HINTS.get(kind, HINTS["unknown"])
