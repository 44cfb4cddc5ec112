"""The default providers' resource: the service named after the program unless the
environment names it."""

from __future__ import annotations

import importlib.machinery
import types

import pytest

from otel_jax._emit import _resource


def main_module(file: str | None = None, spec_name: str | None = None) -> types.ModuleType:
    """A ``__main__`` module as Python makes it for ``python FILE`` or ``python -m NAME``."""
    main = types.ModuleType("__main__")
    if file is not None:
        main.__file__ = file
    main.__spec__ = (None if spec_name is None
                     else importlib.machinery.ModuleSpec(spec_name, None))
    return main


@pytest.mark.parametrize(("main", "name"), [
    (main_module("/home/me/project/train.py"), "train"),  # python train.py
    (main_module("/home/me/bin/pytest"), "pytest"),  # a console script
    (main_module("/src/pkg/trainer.py", "pkg.trainer"), "pkg.trainer"),  # python -m pkg.trainer
    (main_module("/src/pkg/__main__.py", "pkg.__main__"), "pkg"),  # python -m pkg
    (main_module("/src/trainer/__main__.py"), "trainer"),  # python trainer (a directory)
    (main_module("/src/trainer.pyz/__main__.py"), "trainer"),  # python trainer.pyz
    (main_module(), None),  # python -c, an interactive session, a notebook
    (main_module(""), None),
])
def test_the_program_name(main, name):
    assert _resource.program_name(main) == name


@pytest.fixture()
def unnamed(monkeypatch):
    for var in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
                "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_a_service_nobody_named_is_named_after_the_program(unnamed):
    from opentelemetry.sdk.resources import Resource

    # the SDK alone names it after the interpreter
    assert Resource.create().attributes["service.name"].startswith("unknown_service")
    made = _resource.resource(main_module("/home/me/train.py"))
    assert made.attributes["service.name"] == "train"
    # the rest of the SDK's resource is kept
    assert made.attributes["telemetry.sdk.language"] == "python"


def test_a_program_with_no_name_keeps_the_sdks_default(unnamed):
    from opentelemetry.sdk.resources import Resource

    made = _resource.resource(main_module())
    assert made.attributes["service.name"] == Resource.create().attributes["service.name"]


@pytest.mark.parametrize(("var", "value"), [
    ("OTEL_SERVICE_NAME", "trainer"),
    ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,service.name=trainer"),
])
def test_the_environment_names_the_service(unnamed, var, value):
    unnamed.setenv(var, value)
    made = _resource.resource(main_module("/home/me/train.py"))
    assert made.attributes["service.name"] == "trainer"


def test_the_sdks_default_name_given_on_purpose_is_kept(unnamed):
    unnamed.setenv("OTEL_SERVICE_NAME", _resource._sdk_default_name())
    made = _resource.resource(main_module("/home/me/train.py"))
    assert made.attributes["service.name"] == _resource._sdk_default_name()


def test_otel_jax_run_names_every_process_after_its_program(unnamed):
    """A worker whose own ``__main__`` has no name (spawn's ``-c``) or another's."""
    unnamed.setenv("OTEL_JAX_RUN_PROGRAM", "trainer")
    assert _resource.resource(main_module()).attributes["service.name"] == "trainer"
    unnamed.setenv("OTEL_SERVICE_NAME", "named")  # the environment still wins
    assert _resource.resource(main_module()).attributes["service.name"] == "named"
