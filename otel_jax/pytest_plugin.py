"""pytest plugin: ``@pytest.mark.max_compiles(n)`` and the ``jax_compiles`` fixture.

Registered through the ``pytest11`` entry point, so installing otel_jax is
enough to use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .testing import CompileRecorder, assert_max_compiles


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "max_compiles(n, fn=None, include_eager=False): fail the test when more than n JAX "
        "backend compilations (of fn, when given) happen during it; the failure lists each "
        "compile's cause")


@pytest.fixture
def jax_compiles() -> Iterator[CompileRecorder]:
    """The JAX compiles recorded during the test (iterate for records, ``len()`` to count)."""
    with CompileRecorder() as recorder:
        yield recorder


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    marker = item.get_closest_marker("max_compiles")
    if marker is None:
        yield
        return
    budget = assert_max_compiles(*marker.args, **marker.kwargs)
    budget.__enter__()
    outcome: Any = yield
    try:
        budget.__exit__(None, None, None)
    except AssertionError as exc:
        if outcome.excinfo is None:
            # A plain failure message: the compiles and their causes, not our frames.
            outcome.force_exception(pytest.fail.Exception(str(exc), pytrace=False))
