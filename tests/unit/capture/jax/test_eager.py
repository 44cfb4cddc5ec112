"""``_capture._jax._eager``: JAX's own ops compiled eagerly, and exported programs."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp

from otel_jax._capture._jax import _eager


def predict(x, params):
    return x + params["w"]


def test_jax_s_own_jitted_functions_are_eager_ops_a_user_s_are_not():
    assert _eager.is_eager_op(jnp.sin.__wrapped__)
    assert not _eager.is_eager_op(predict)
    assert _eager.primitive_params(predict) is None
    assert _eager.exported_program(predict) is None


def test_an_exported_function_s_name_and_argument_paths():
    from jax import export

    exported = export.export(jax.jit(predict))(jnp.ones(2), {"w": jnp.ones(2)})
    assert _eager.exported_name(exported) == "predict"
    assert _eager.exported_leaf_paths(exported, 2) == ("args[0]", "args[1]['w']")
    assert _eager.exported_leaf_paths(exported, 3) is None  # not its argument count
    assert _eager.exported_name(SimpleNamespace(fun_name="")) == "<exported function>"
