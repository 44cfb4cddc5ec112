"""otel_jax's boundary with JAX internals: every use of ``jax._src`` and of the fields of
JAX's private objects lives behind this package, and nowhere else in otel_jax.

One module per concern, named after what it reads or patches (``_config``, ``_program``,
``_cache_key``, ``_miss_path``...). The rule each module keeps: every use of an internal
has a fallback, and the fallback is decided by what fails (an attribute that is missing,
a call that raises on a real input), never by a version number, so that a JAX upgrade
costs explanation quality, never a crash. What each fallback costs is a ``Capability``
(``_capabilities``), said once at install. Each module's docstring names the JAX versions
its readers were checked on and what its fallback is.
"""
