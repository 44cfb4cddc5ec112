"""What a traced jit call returns, abstractly: its outputs' abstract values and tree.

Read off the dispatch miss's traced parameters (``PjitParams``: ``params["jaxpr"]``'s
output variables and ``out_tree``), which the miss path has already computed: no trace, no
lowering is redone, and nothing is read on a cache hit. Kept as JAX's own immutable
abstract values and treedef (no array, no constant of the program): the hazard analysis
reads them after the call, off the compiling thread.

Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs:
``ClosedJaxpr.jaxpr.outvars`` in 0.10, the merged ``Jaxpr.outvars`` from 0.11). Fallback:
parameters that moved (a transformed call's, a JAX that renamed them) give ``None``, and
no hazard that needs the outputs is said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..._core._where import jax_call


class Outputs(NamedTuple):
    """The outputs of a jitted function: the program's output variables (each with its
    abstract value: ``shape``, ``dtype``, ``weak_type``) and their tree, in JAX's
    flattening order."""

    variables: Sequence[Any]
    tree: Any
    #: what the backend compile returned (JAX's cache holds it anyway): where it places
    #: each output, read only for a feedback edge's sharded input (``_out_shardings``)
    executable: Any = None
    #: whether they are what the user's function returns: JAX traced that function
    #: itself, not another library's callable around it (read in the call, while the
    #: function is alive: ``_source.returns_its_own``)
    own: bool = True

    @property
    def avals(self) -> list[Any]:
        """The outputs' abstract values (read after the call: a list made per output)."""
        return [getattr(v, "aval", None) for v in self.variables]


@jax_call
def outputs_of(params: Any, executable: Any = None) -> Outputs | None:
    """The outputs of the call ``params`` (the miss's ``PjitParams``) traced, or ``None``.

    Costs two attribute reads on the compiling thread: the output variables are the
    program's own list (``out_avals`` would build one per output); the variables hold
    their abstract values, never the program's constants."""
    try:
        closed = params.params["jaxpr"]
        variables = getattr(closed, "jaxpr", closed).outvars  # ClosedJaxpr, or 0.11's Jaxpr
        tree = params.out_tree
    except Exception:  # not a jit call's parameters, or moved
        return None
    if tree is None or variables is None:
        return None
    return Outputs(variables, tree, executable)


def aval_facts(aval: Any) -> tuple[tuple[int, ...], str, bool] | None:
    """``(shape, dtype name, weak_type)`` of an abstract value; ``None`` for one that is not
    an array's (a token, a reference, a dynamic shape)."""
    try:
        shape = tuple(int(d) for d in aval.shape)
        return shape, str(aval.dtype), bool(getattr(aval, "weak_type", False))
    except Exception:
        return None
