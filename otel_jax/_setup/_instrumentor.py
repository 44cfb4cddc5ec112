"""``JaxInstrumentor``: the zero-code path (``opentelemetry-instrument python train.py``)."""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,  # defined there; the module declares no __all__
)

from .._version import JAX_MINIMUM
from . import _install
from ._options import OPTION_NAMES

_AUTO_INSTRUMENTATION = "opentelemetry.instrumentation.auto_instrumentation"


def _called_by_auto_instrumentation() -> bool:
    """Whether ``opentelemetry-instrument`` (its sitecustomize) is loading instrumentors."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_AUTO_INSTRUMENTATION):
            return True
        frame = frame.f_back
    return False


class JaxInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """OpenTelemetry instrumentor for JAX compilations.

    Registered under the ``opentelemetry_instrumentor`` entry point as ``jax``,
    so ``opentelemetry-instrument`` picks it up with no code change and
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=jax`` turns it off.
    ``instrument(**kwargs)`` takes every one of ``otel_jax.install``'s options, checked as
    there (an unknown one is a ``TypeError``, a bad value a ``ValueError``), and reads the
    same ``OTEL_JAX_*`` variables: under ``opentelemetry-instrument``, which passes none,
    they are how it is configured.

    Under ``opentelemetry-instrument`` the exporters are the distro's, not
    otel_jax's: they cannot be wrapped, but their per-attempt retry and failure
    messages are replaced by one ``OtelJaxWarning`` quoting the first, as with
    ``install()``. Unlike ``install()``'s own exporters they keep the SDK's
    timing: no breaker, each batch is retried until the exporter's timeout, and
    exit may wait that long per signal.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        # A lower bound only, as pyproject.toml's: a newer JAX is instrumented, with
        # whatever its internals no longer give said once by install().
        return (f"jax >= {JAX_MINIMUM}",)

    def _instrument(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(OPTION_NAMES))
        if unknown:
            raise TypeError(f"JaxInstrumentor.instrument() got unknown option(s) "
                            f"{', '.join(unknown)}; install()'s options are: "
                            f"{', '.join(OPTION_NAMES)}")
        _install.install(**kwargs)
        if _called_by_auto_instrumentation():
            from .._emit._observe import quiet_exporter_logs

            quiet_exporter_logs()

    def _uninstrument(self, **kwargs: Any) -> None:
        _install.uninstall()
