"""The resource of the providers otel_jax creates: the SDK's, named after the program.

OpenTelemetry's SDK names a service that nobody named ``unknown_service:<executable>``
(``unknown_service:python``): every program of a machine would land under that one name
in Jaeger and Prometheus. Where neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES``
(nor a resource detector) names the service, the default is the program's name instead:
the script's stem (``train`` for ``python train.py``), the directory's or the zip's name for
``python pkgdir`` or ``python app.pyz`` (their ``__main__.py``), or the module's name for
``python -m pkg.train`` (``pkg`` for a package's ``__main__``). Under ``otel-jax run`` every
process of the run is named after the program the command started (``RunEnv.PROGRAM``):
its ``multiprocessing`` workers too, whose ``__main__`` is ``-c`` (spawn) or the parent's.
A program with no name (``python -c``, an interactive session, a notebook) keeps the SDK's
default.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

from .._core._vocab import RunEnv

#: The resource attribute that names the service.
SERVICE_NAME = "service.name"
_MAIN_SUFFIX = ".__main__"


def program_name(main: ModuleType | None = None) -> str | None:
    """The program's name, read from its ``__main__`` module (``main``, by default
    ``sys.modules["__main__"]``): the module's name when it was run with ``-m``, else its
    file's stem; ``None`` where it has neither."""
    if main is None:
        main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name and name != "__main__":
        return name.removesuffix(_MAIN_SUFFIX) or None
    path = getattr(main, "__file__", None)
    if isinstance(path, str) and path:
        return path_name(path)
    return None


def path_name(path: str) -> str | None:
    """The name of the program ``python path`` runs: the file's stem, or for the
    ``__main__.py`` of a directory or a zip app, the directory's name or the zip's stem."""
    path = path.rstrip("/" + os.sep)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "__main__":
        parent = os.path.dirname(path)
        name = os.path.basename(parent)
        stem = name if os.path.isdir(parent) else os.path.splitext(name)[0]
    elif os.path.isdir(path):
        stem = os.path.basename(path)
    return stem or None


def _sdk_default_name() -> str:
    """The name the SDK gives a service nobody named (``Resource.create``)."""
    executable = os.path.basename(sys.executable) if sys.executable else ""
    return "unknown_service" + (f":{executable}" if executable else "")


def resource(main: ModuleType | None = None) -> Any:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, the
    configured detectors), its service named after the program where nothing named it."""
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    created = Resource.create()
    if created.attributes.get(SERVICE_NAME) != _sdk_default_name():
        return created  # named by the environment or a detector
    if OTELResourceDetector().detect().attributes.get(SERVICE_NAME):
        return created  # named so on purpose, the same as the SDK's default
    name = os.environ.get(RunEnv.PROGRAM) or program_name(main)
    if name is None:
        return created
    return created.merge(Resource({SERVICE_NAME: name}))
