"""The checks above the pipeline, plugged into the engine when otel_jax is imported.

The pipeline calls them through its own interfaces (``_pipeline._plugins``) and imports
nothing of the fleet: the compile ledger and the cross-rank check are made here, once per
process, and handed to the engine before any compile can reach it (``otel_jax``'s import
runs this module), so the testing kit without install() sees them as install() does.
"""

from __future__ import annotations

from .._fleet._ledger import Ledger
from .._fleet._ranks import CrossRank
from .._pipeline._background import WORKER
from .._pipeline._engine import ENGINE

CROSS_RANK = CrossRank(ENGINE.failopen, WORKER.flush)
LEDGER = Ledger(ENGINE.failopen)
ENGINE.cross_rank = CROSS_RANK
ENGINE.ledger = LEDGER
