"""What one dispatch-cache miss saw (:class:`Miss`): the record the miss path leaves and
every reader of a miss reads.

Its own module: made by the miss-path wrappers (``_miss_path``) and by a transformed
call's (``_transformed``), read by the signature and naming code. Checked on JAX 0.8.0,
0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: its fields hold
JAX's objects by reference; readers of them degrade on their own.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Miss(NamedTuple):
    """What one dispatch-cache miss saw: enough to build a signature later.

    Built on every miss (including the nested ones made while tracing), so it
    only stores references; the signature is derived from it only when a
    backend compile really follows.
    """

    fun: Any  # the jitted function, or a TransformedFunction
    jit_info: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    params: Any  # PjitParams: in_avals, in_tree, arg_names, consts
    args_flat: Any  # consts + dynamic args, as JAX will pass them
    started: float  # wall clock (JAX's clock for phases) when the miss began
    transformed: bool = False  # a jitted computation evaluated under grad/vmap/jvp
    # transformed only: the transformations the computation runs under and their
    # parameters, outermost first (``grad(argnums=(0, 1))``); "" when not read
    transformation: str = ""
    # ``jax.clear_caches()`` calls seen before the miss (-1: not watched): read at the
    # miss, since a signature may be built from it later
    cache_clears: int = -1
