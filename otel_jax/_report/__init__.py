"""``otel-jax report``: summarise otel_jax's JSON compile logs per function.

otel_jax writes one structlog JSON object per line; every JAX compilation is a
line whose ``"event"`` is ``"jax.compile"``.  This package reads such a log (a
file, a ``.gz`` file, or stdin) and prints, per jitted function, how many
compiles and recompiles happened, how many seconds they cost, and *why* the
recompiles happened (cause kind, the most frequent argument diff, the hint).
Rows are sorted by compile time lost, so the function worth fixing first is at
the top.

Usage::

    otel-jax report app.log                 # readable table
    otel-jax report --format json app.log   # list of per-function objects
    otel-jax report --format markdown -     # GitHub table, log on stdin
    otel-jax report --format html -o report.html rank*.log   # one page
    python -m otel_jax report app.log.gz --top 5 --function train_step

Data flows one way, one concern to a module: :mod:`._read` reads the lines,
:mod:`._aggregate` (with the estimators of :mod:`._bounded` and the steps of :mod:`._steps`)
sums them up per function,
:mod:`._text` renders the table, Markdown and JSON, :mod:`._page_data` and :mod:`._html` the
HTML page (its look in :mod:`._html_style`, its matplotlib charts in :mod:`._html_charts`),
and :mod:`._command` (the ``otel-jax report`` command, :func:`main`, which the
``otel-jax`` command line :mod:`otel_jax._cli` calls) sits on top.

``otel-jax diff BASE NEW`` (:func:`diff_main`) compares two runs with the same parts, in
its own subpackage (:mod:`._compare_runs`: read, compare, render, the command).
``otel-jax program-diff A B`` (:func:`program_diff_main`, :mod:`._program_diff`) compares two
programs kept by ``install(programs=DIR)``; :mod:`._programs` sums up each function's
programs for the report.

Design constraints, and how they are met:

* **Streaming, bounded memory.**  Logs of long training runs reach gigabytes,
  so nothing here grows with the number of lines.  Lines are read one at a
  time (each capped at :data:`._read.MAX_LINE_BYTES`).  Per function we keep plain
  counters, a bounded p95 estimator (:class:`._bounded._Quantiles`) and, per recompile
  cause, a bounded "most frequent diff" counter (:class:`._bounded._TopK`, the
  space-saving algorithm).  The number of rows is capped too: functions beyond
  ``--max-functions`` (default 10,000) are merged into one ``(other)`` row, and
  causes beyond :data:`._aggregate.MAX_CAUSES_PER_FUNCTION` into an ``(other)`` cause.
  Memory therefore depends on the number of distinct functions, never on the
  length of the log.
* **Tolerant input.**  Lines that are not JSON, not objects, or not
  ``jax.compile`` events are skipped and counted (the count goes to stderr);
  missing or mistyped fields fall back to sensible defaults.  A line longer than
  :data:`._read.MAX_LINE_BYTES` is read on in chunks with each JSON string cut to
  :data:`._read.MAX_FIELD_BYTES` (:func:`._read._condense`), so one huge field does
  not cost the event.
* **Fast import.**  Standard library and the vocabulary (:mod:`otel_jax._core._vocab`)
  only; the text report must not pull in jax, opentelemetry or the rest of otel_jax,
  because the command runs on machines (CI, laptops) where only the log is available.

Log fields read from each ``jax.compile`` line (all optional except
``event``): ``function``, ``file``, ``line``, ``is_recompile``, ``count``,
``eager_op``, ``persistent_cache_hit``, ``after_warmup``, ``cause_kind``,
``cause``, ``diff`` (list of ``{path, kind, before, after}``),
``diff_total``, ``hint``, ``compile_s``, ``trace_s``, ``lower_s``,
``backend_compile_s``; and of each ``jax.compile.hazard`` line ``function``, ``file``,
``line``, ``hazard_kind``, ``path``, ``level``, ``hazard``, ``hint``.
"""

from ._command import main
from ._compare_runs import main as diff_main
from ._program_diff import main as program_diff_main

__all__ = ["diff_main", "main", "program_diff_main"]
