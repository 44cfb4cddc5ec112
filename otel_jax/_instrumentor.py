"""``JaxInstrumentor``: the zero-code path (``opentelemetry-instrument python train.py``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from . import _install

_INSTALL_OPTIONS = (
    "tracer_provider", "meter_provider", "logger_provider", "log_output", "log_level",
    "prometheus_port", "storm_threshold", "warmup_steps", "on_recompile",
)


class JaxInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """OpenTelemetry instrumentor for JAX compilations.

    Registered under the ``opentelemetry_instrumentor`` entry point as ``jax``,
    so ``opentelemetry-instrument`` picks it up with no code change and
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=jax`` turns it off.
    ``instrument(**kwargs)`` accepts ``otel_jax.install``'s options.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("jax >= 0.8.0",)

    def _instrument(self, **kwargs: Any) -> None:
        _install.install(**{k: v for k, v in kwargs.items() if k in _INSTALL_OPTIONS})

    def _uninstrument(self, **kwargs: Any) -> None:
        _install.uninstall()
