"""A fix hint per cause kind: what to change in the user's code so the compile stops."""

from __future__ import annotations

from .._core._vocab import CauseKind
from ._model import Detail

HINTS: dict[str, str] = {
    CauseKind.FIRST_COMPILE: "expected once per function and signature; warm up before timing",
    CauseKind.SHAPE: (
        "pad or bucket inputs to a few fixed shapes (e.g. drop or pad the last partial batch); "
        "every new shape compiles again"),
    CauseKind.DTYPE: (
        "cast inputs to one dtype before the call (e.g. jnp.asarray(x, jnp.float32)); every new"
        " dtype compiles again"),
    CauseKind.WEAK_TYPE: (
        "a Python scalar is weakly typed: build it with an explicit dtype (jnp.float32(lr)) or "
        "always pass the same kind of value"),
    CauseKind.PYTREE_STRUCTURE: (
        "keep the argument tree fixed: same dict keys, no None-vs-array switches, the same "
        "positional/keyword calling convention"),
    CauseKind.STATIC_ARGUMENT: (
        "every new static value compiles again: make it a traced argument, or give its type "
        "value-based __eq__/__hash__ (or pass a tuple) instead of a fresh object compared by "
        "identity"),
    CauseKind.TRANSFORM_PARAMS: (
        "a transformation with other parameters (vmap's in_axes/out_axes, grad's argnums) is "
        "another program of this function, compiled once per set of parameters: keep them "
        "fixed, and build each jitted variant (jax.jit(jax.vmap(f, in_axes=1))) once, "
        "outside the loop"),
    CauseKind.FUNCTION_IDENTITY: (
        "create the jitted function once, where that code runs once (at module level, in "
        "__init__), and call that same object: jax.jit(lambda ...), "
        "jax.jit(functools.partial(...)) or jax.jit(obj.method) made again on each call "
        "is a new function, which compiles again"),
    CauseKind.TRACING_CONTEXT: (
        "a config value or context manager in the cache key changed (enable_x64, "
        "default_matmul_precision, a mesh): enter it once around the whole loop"),
    CauseKind.SHARDING: (
        "keep each argument's sharding fixed across calls (device_put with the same "
        "NamedSharding, or set in_shardings on jax.jit)"),
    CauseKind.DEVICE_PLACEMENT: (
        "an argument was committed to another device or its committed-ness changed: device_put "
        "inputs to the same device every call"),
    CauseKind.JIT_OPTIONS: (
        "another jax.jit wrapper of this function with different options (donate_argnums, "
        "shardings, compiler options): create one wrapper and reuse it"),
    CauseKind.UNKNOWN: (
        "no difference found in what otel_jax captures: a cache eviction (jax.clear_caches(), "
        "jitted.clear_cache()) or a cache key otel_jax does not see"),
}


# Finer hints for one kind, by what sort of difference the top change is (the
# value of ``_diff.Detail``): a hint must match what really happened, e.g. never
# speak of identity hashing for a type that hashes by value.
DETAIL_HINTS: dict[tuple[str, str], str] = {
    (CauseKind.STATIC_ARGUMENT, Detail.VALUE.value): (
        "every distinct value of a static argument compiles once (later calls with the same "
        "type and an equal value hit the cache): keep it to a few values, or pass it as a "
        "traced argument (an array) if it changes every step"),
    (CauseKind.STATIC_ARGUMENT, Detail.IDENTITY_HASHED.value): HINTS[CauseKind.STATIC_ARGUMENT],
    (CauseKind.STATIC_ARGUMENT, Detail.BOUND_METHOD.value): (
        "a bound method is a new function for each object (eqx.filter_jit(self.method) in "
        "__init__ of an object made per item): make the object once, or jit one "
        "module-level function once and pass what differs between the objects as "
        "arguments"),
    (CauseKind.STATIC_ARGUMENT, Detail.INTERNED.value): (
        "JAX keeps one object per distinct value of this type (a Mesh built again with the "
        "same devices and axes is the same object, and hits the cache), so this is another "
        "value: each distinct one compiles once; build each once and keep to a few, or pass "
        "the sharding through the arguments (NamedSharding) instead of a static argument"),
    (CauseKind.STATIC_ARGUMENT, Detail.STATIC_FUNCTION.value): (
        "a function passed as a static argument compares by identity: a lambda, closure or "
        "functools.partial made in the loop is a new one every call; define it once outside "
        "the loop and pass that same function"),
    (CauseKind.STATIC_ARGUMENT, Detail.FUNCTION_FIELD.value): (
        "a field of this static value holds a function, which compares by identity: "
        "building the value again (an optax optimizer made again by optax.chain(...) or "
        "optax.adam(...), a closure made in the loop) makes new functions, so it never "
        "equals the earlier one; build it once outside the loop and pass that same object"),
    (CauseKind.STATIC_ARGUMENT, Detail.OTHER_EXPORT.value): (
        "another jax.export program of this function (exported again, e.g. for a new input "
        "shape): each one compiles when first called; export once with symbolic dimensions "
        "(jax.export.symbolic_shape('b')) so one program serves every batch size"),
    (CauseKind.STATIC_ARGUMENT, Detail.LOOKS_EQUAL.value): (
        "this static value is not == to an equal-looking earlier one: it is not == to itself "
        "(a NaN) or its type compares by identity, so a new one never hits the cache: pass a "
        "value that equals itself (give its type value-based __eq__/__hash__), or make it a "
        "traced argument"),
    (CauseKind.STATIC_ARGUMENT, Detail.UNSHOWN_VALUE.value): (
        "another value of a type that compares by value, though it prints the same: every "
        "distinct value of a static argument compiles once (later calls with the same type "
        "and an equal value hit the cache); keep it to a few values, or pass what changes as "
        "a traced argument"),
    (CauseKind.STATIC_ARGUMENT, Detail.PRINTS_SAME.value): (
        "this static value prints as an earlier one did, but JAX's cache told them apart: "
        "if its type compares by value it is another value (each compiles once); if it is "
        "not == to itself (a NaN) or compares by identity, a new one never hits the cache; "
        "give it a repr that shows what differs, or make it a traced argument"),
    (CauseKind.STATIC_ARGUMENT, Detail.MUTATED.value): (
        "this static value was changed in place after an earlier call: JAX keyed that call "
        "by its hash and value then, so it is another key now (and a JAX that finds the "
        "object by identity may even run the stale program); treat static values as "
        "immutable (a frozen dataclass) and pass a new one instead of mutating it"),
    (CauseKind.STATIC_ARGUMENT, Detail.EQUAL_HASHED_APART.value): (
        "this static value is == to one compiled before but of another type or hash, which "
        "JAX's cache keys apart, so each spelling compiles once (2 and 2.0; a dtype passed "
        "as jnp.bfloat16, x.dtype or 'bfloat16'): pass one canonical form every call "
        "(jnp.dtype(d) for a dtype)"),
    (CauseKind.STATIC_ARGUMENT, Detail.MOVED.value): (
        "JAX keys a static argument by how it is passed as well as by its value: pass it the "
        "same way every call (always by keyword or always positionally)"),
    (CauseKind.STATIC_ARGUMENT, Detail.TRACED_STATIC.value): (
        "the same argument was a traced array in one call and a plain Python value (static) "
        "in the other: pass the same kind of value every call"),
    (CauseKind.PYTREE_STRUCTURE, Detail.STATIC_FIELD.value): (
        "a static (non-array) field of a module or dataclass pytree is part of the compiled "
        "program: each new value compiles once (switching model.train()/eval() compiles once "
        "per mode, then both are cached); if it changes every step, store it as an array "
        "(nnx.data / a Variable, a pytree field) instead"),
    (CauseKind.PYTREE_STRUCTURE, Detail.STATIC_FUNCTION.value): (
        "a static field holds a function or bound method, which compares by identity: a new "
        "one (an optax optimizer such as optax.adam(...) or a model's .apply re-created, a "
        "lambda) compiles again; create it once outside the loop and reuse it"),
    (CauseKind.DTYPE, Detail.KEY_STYLE.value): (
        "a typed PRNG key (jax.random.key, key<impl>[]) and a legacy uint32 one "
        "(jax.random.PRNGKey, u32[2]) are different types: use one key style everywhere "
        "(convert with jax.random.key_data / jax.random.wrap_key_data)"),
    (CauseKind.DTYPE, Detail.KEY_IMPL.value): (
        "PRNG keys of two implementations (jax_default_prng_impl, or impl= of "
        "jax.random.key) are different types: make every key with the same implementation"),
    (CauseKind.PYTREE_STRUCTURE, Detail.IDENTITY_HASHED.value): (
        "a static (non-array) part of this pytree node hashes by identity (no "
        "__eq__/__hash__), so every new instance compiles again: reuse one instance, or "
        "give its type value-based __eq__/__hash__"),
    (CauseKind.PYTREE_STRUCTURE, Detail.LOOKS_EQUAL.value): (
        "a static (non-array) part of this pytree node prints the same as before but is not "
        "== to it (a NaN, or an __eq__ that is not value-based): JAX compares it with ==, so "
        "it never hits the cache; make it equal itself, or store it as an array"),
    (CauseKind.UNKNOWN, Detail.CACHE_CLEARED.value): (
        "jax.clear_caches() drops every compiled program, so each function compiles again "
        "on its next call: clear caches only where the memory matters more than the "
        "compile time, not inside the loop"),
    (CauseKind.UNKNOWN, Detail.NOT_FOUND.value): (
        "otel_jax found no difference between this compile and the earlier one, and saw no "
        "jax.clear_caches() call: the cause is outside what it captures (a "
        "jitted.clear_cache() call, a JAX cache at its size limit, a transformation it "
        "does not name); jax_explain_cache_misses may tell more"),
    (CauseKind.JIT_OPTIONS, Detail.COMPILE_OPTIONS.value): (
        "compiler options given at compile time (jitted.lower(...).compile(compiler_options="
        "...)) make another executable: each distinct set compiles once, and a plain call of "
        "the jitted function never uses it; pass the same options every time, or set them "
        "once on the wrapper (jax.jit(f, compiler_options=...))"),
    (CauseKind.PYTREE_STRUCTURE, Detail.MOVED.value): (
        "an argument passed positionally in one call and by keyword in another changes the "
        "argument tree: pass it the same way every call"),
}


TRANSFORMED_HINT = (
    "a transformation of a jitted function (grad, vmap, checkify), called outside jit, "
    "compiles each program it derives apart from the plain call: jit the transformed "
    "function instead (jax.jit(jax.grad(loss))), once, outside the loop")

# How a user applies a transformation a compile was read under, for the fix.
_APPLIED = {"checkify": "checkify.checkify"}


def transformed_hint(transformation: str) -> str:
    """The hint for a jitted function's programs under the transformations read
    (``grad(argnums=0)``, ``checkify()``): the transformation named as it was applied."""
    outer = transformation.partition("(")[0]
    if not outer.isidentifier():
        return TRANSFORMED_HINT
    applied = _APPLIED.get(outer, f"jax.{outer}")
    return (f"{applied} of a jitted function, called outside jit, compiles each program it "
            "derives apart from the plain call: jit the transformed function instead "
            f"(jax.jit({applied}(f))), once, outside the loop")


def hint_for(kind: str, transformed: bool = False, detail: str | None = None,
             transformation: str = "") -> str:
    """The fix hint for a cause kind (the ``unknown`` hint for an unrecognised one).

    ``transformed``: the compile was of a jitted function's computation under a
    transformation outside jit, where a function-identity cause means the
    transformation itself (unless the function object is new). ``detail``: what sort of
    difference the top change is (``_diff.Detail`` values), for a hint that fits it.
    ``transformation``: the transformations read (``checkify()``), named in the hint.
    """
    if transformed and kind == CauseKind.FUNCTION_IDENTITY \
            and detail != Detail.NEW_FUNCTION.value:
        return transformed_hint(transformation)
    if detail is not None:
        fine = DETAIL_HINTS.get((str(kind), detail))
        if fine is not None:
            return fine
    return HINTS.get(kind, HINTS[CauseKind.UNKNOWN])
