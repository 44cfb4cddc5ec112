"""``_capture._jax._transformed``: which transformations the running code is under, read
off JAX's own frames, and the miss of a computation evaluated under them."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from otel_jax._capture._jax import _transformed


def under(transform, *args):
    seen: list[str] = []

    def f(x):
        seen.append(_transformed.transformations_on_stack())
        return jnp.sum(x * 2.0)

    transform(f)(*args)
    return seen[0]


def test_the_transformations_as_the_user_applied_them():
    assert under(jax.grad, 1.0) == "grad(argnums=0)"
    assert under(jax.vmap, jnp.ones(2)) == "vmap(in_axes=0)"
    assert under(lambda f: jax.vmap(jax.grad(f)), jnp.ones(2)) == \
        "vmap(in_axes=0) of grad(argnums=0)"
    assert under(lambda f: f, 1.0) == ""


def test_parameters_are_shown_when_set_and_plain():
    assert under(lambda f: jax.grad(f, argnums=(0,)), 1.0) == "grad(argnums=(0,))"
    assert under(lambda f: jax.vmap(f, out_axes=0, axis_size=2), jnp.ones(2)) == \
        "vmap(in_axes=0, axis_size=2)"


def test_the_miss_of_a_computation_evaluated_under_a_transformation():
    def loss(w):
        return w * 3.0

    closed = jax.make_jaxpr(loss)(jnp.ones(2))
    miss = _transformed.transformed_miss(
        ("a",), {"jaxpr": closed, "name": "loss", "donated_invars": (True,)}, 1.5)
    assert miss.transformed and miss.started == 1.5 and miss.args == ("a",)
    assert isinstance(miss.fun, _transformed.TransformedFunction)
    assert miss.fun.__name__ == "loss" and repr(miss.fun) == "<transformed loss>"
    assert miss.jit_info.donate_argnums == (0,)
    assert len(miss.params.in_avals) == 1 and len(miss.params.arg_names) == 1
    assert miss.params.out_count == 1 and miss.params.op_count == 1


def test_no_pass_is_read_off_the_stack_where_jax_s_directory_is_unknown(monkeypatch):
    # JAX's transformation closures moved (the table reads as empty, its directory is not
    # known): a user's function named as one of JAX's rules is no rule of JAX's.
    def moved():
        raise AttributeError("moved")

    monkeypatch.setattr(_transformed, "_read_transformation_codes", moved)
    monkeypatch.setattr(_transformed, "_transformation_codes", None)
    monkeypatch.setattr(_transformed, "_jax_dir", "")

    def backward_pass():
        return _transformed.program_pass()

    assert backward_pass() == ""
