"""``python -m otel_jax``: the ``otel-jax`` command without its console script."""

import sys

from ._cli import main

sys.exit(main())
