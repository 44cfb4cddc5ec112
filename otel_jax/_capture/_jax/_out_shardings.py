"""Where a compiled program places its outputs, as JAX will place the arrays it returns,
compared with where an input was placed: the fixed-point rule's sharding facts.

An output's sharding is decided by the compile (``out_shardings``, a
``with_sharding_constraint``, or XLA's sharding propagation), so it is read off the
executable the backend compile returned (``get_output_shardings()``: one HLO sharding per
output), only when a feedback edge needs it, when the record is made: nothing on the
compiling thread, nothing on a cache hit. JAX turns such an HLO sharding into the
returned array's sharding over the mesh of the input's ``NamedSharding``
(``pxla._gspmd_to_named_sharding``: ``parse_flatten_op_sharding``); the same is done here,
and the two are compared with JAX's own ``Sharding.is_equivalent_to``, the equality its
compile cache keys use (a ``P('data')`` input given back as ``P('data', None)`` compiles
nothing again; ``P()`` for ``P('data')`` does).

Checked on JAX 0.10.2 and 0.12.1 (``jaxlib``'s ``LoadedExecutable.get_output_shardings``
and ``jax._src.sharding_impls.parse_flatten_op_sharding``). Fallback, decided by what
fails: an executable without the method, outputs counted otherwise than the program's
(an effect's token), an input that is not a ``NamedSharding``, or a device assignment
that differs from the input mesh's give ``None``: the sharding is unknown and nothing is
said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._core._where import jax_call


@jax_call
def output_shardings(executable: Any, count: int) -> Sequence[Any] | None:
    """The executable's output HLO shardings, one per output, or ``None`` where they are
    not ``count`` (not the program's outputs one for one) or cannot be read."""
    read = getattr(executable, "get_output_shardings", None)
    if read is None:
        return None
    try:
        shardings = list(read())
    except Exception:  # a backend that does not tell
        return None
    return shardings if len(shardings) == count else None


#: A comparison's answer by what decides it (the input's sharding, the rank, the output's
#: HLO sharding): a model's leaves share a few placements, each compared once per analysis.
Memo = dict[tuple[Any, int, Any], "tuple[bool, str] | None"]


@jax_call
def compare(in_sharding: Any, out_hlo: Any, ndim: int,
            devices: Sequence[tuple[int, int]] | None,
            memo: Memo | None = None) -> tuple[bool, str] | None:
    """Whether an output placed by ``out_hlo`` (an HLO sharding the executable reports)
    comes back placed as the input's ``in_sharding`` (a ``NamedSharding``), by JAX's
    equivalence for arrays of ``ndim`` dimensions, and the output's spec as text
    (``P()``). ``devices``: the executable's devices (process, id) in its order (the HLO
    sharding indexes them), which must be the input mesh's. ``None``: unknown."""
    from jax.sharding import NamedSharding

    if not isinstance(in_sharding, NamedSharding) or out_hlo is None:
        return None
    try:
        from jax._src import sharding_impls
        from jax._src.lib import xla_client  # type: ignore[attr-defined]  # not re-exported

        hlo = (xla_client.HloSharding.from_proto(out_hlo)
               if isinstance(out_hlo, xla_client.OpSharding) else out_hlo)
        key = (in_sharding, ndim, hlo)
        if memo is not None and key in memo:
            return memo[key]
        mesh = in_sharding.mesh
        processes = {p for p, _ in devices or ()}
        answer: tuple[bool, str] | None = None
        # the HLO sharding indexes the executable's devices: they must be the input mesh's
        if devices and list(devices) == [(d.process_index, d.id) for d in mesh.devices.flat
                                         if d.process_index in processes]:
            specs = sharding_impls.parse_flatten_op_sharding(hlo, mesh)
            if len(specs) == 1:
                # HLO does not say which memory an output lives in: the input's is taken,
                # so that only the placement over devices is compared
                out = NamedSharding(mesh, specs[0], memory_kind=in_sharding.memory_kind)
                answer = bool(in_sharding.is_equivalent_to(out, ndim)), str(specs[0])
        if memo is not None:
            memo[key] = answer
        return answer
    except Exception:  # moved internals, a sharding the mesh cannot express
        return None


@jax_call
def device_ids(executable: Any) -> list[tuple[int, int]] | None:
    """The devices the executable runs on (process, id), in its assignment's order (one
    process's view: a multi-process executable lists its own devices only)."""
    try:
        return [(d.process_index, d.id) for d in executable.local_devices()]
    except Exception:
        return None
