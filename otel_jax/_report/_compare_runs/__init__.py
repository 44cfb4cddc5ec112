"""``otel-jax diff BASE NEW``: two runs compared per function (not the cause diff of one
compile, which is ``otel_jax._explain._diff``'s).

One way through: :mod:`._read` reads each run (a log through the report's aggregate, or a
report's JSON checked row by row), :mod:`._compare` matches the two runs' functions and
says what changed and whether that passes the thresholds, :mod:`._render_text` and
:mod:`._render_html` render the comparison, and :mod:`._command` is the command
(:func:`main`).
"""

from ._command import main

__all__ = ["main"]
