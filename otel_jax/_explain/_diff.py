"""Why a compile happened: a structured diff against the closest earlier signature.

The entry points the rest of the library uses. The diff names every difference
(path, kind, before, after); the cause kind is the most significant of them. By
concern:

- ``_model``: :class:`Change`, :class:`Diff`, :class:`Detail`;
- ``_closest``: the distance between two signatures and the closest earlier one;
- ``_compare``: the per-part diff (function, options, context, statics, leaves);
- ``_trees``, ``_aux``: the pytree walk and the static data of its nodes (dataclass
  pytrees, flax.nnx, equinox);
- ``_parts``: one difference of one part, worded; ``_same``: whether two parts are equal;
- ``_merge``: passes that fold related changes into one.
"""

from __future__ import annotations

from .._core._vocab import ABSENT
from ._closest import closest, distance
from ._compare import diff
from ._model import DIFF_JSON_LIMIT, MAX_CHANGES, Change, Detail, Diff

__all__ = ["ABSENT", "DIFF_JSON_LIMIT", "MAX_CHANGES", "Change", "Detail", "Diff", "closest",
           "diff", "distance"]
