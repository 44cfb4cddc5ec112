"""pytest plugin: ``@pytest.mark.max_compiles(n)``, ``@pytest.mark.no_hazards``, the
``--otel-jax-no-hazards`` option (ini ``otel_jax_no_hazards``) and the ``jax_compiles``
fixture.

Registered through the ``pytest11`` entry point, so installing otel_jax is
enough to use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .testing import CompileRecorder, assert_max_compiles, assert_no_hazards

_OPTION = "--otel-jax-no-hazards"
_INI = "otel_jax_no_hazards"


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = ("fail every test in which a JAX compile shows a recompile is coming (a "
                 "hazard warning), as @pytest.mark.no_hazards does for one test")
    parser.addoption(_OPTION, action="store_true", default=False, help=help_text)
    parser.addini(_INI, help_text, type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "max_compiles(n, fn=None, include_eager=False): fail the test when more than n JAX "
        "backend compilations (of fn, when given) happen during it; the failure lists each "
        "compile's cause")
    config.addinivalue_line(
        "markers",
        "no_hazards(fn=None, notes=False): fail the test when a JAX compile during it (of "
        "fn, when given) shows a recompile is coming (a hazard warning; notes too with "
        "notes=True); the failure names each hazard, its line and its fix")


@pytest.fixture
def jax_compiles() -> Iterator[CompileRecorder]:
    """The JAX compiles recorded during the test (iterate for records, ``len()`` to count)."""
    with CompileRecorder() as recorder:
        yield recorder


def _gates(item: pytest.Item) -> list[CompileRecorder]:
    gates: list[CompileRecorder] = []
    marker = item.get_closest_marker("max_compiles")
    if marker is not None:
        gates.append(assert_max_compiles(*marker.args, **marker.kwargs))
    marker = item.get_closest_marker("no_hazards")
    if marker is not None:
        gates.append(assert_no_hazards(*marker.args, **marker.kwargs))
    elif item.config.getoption(_OPTION, False) or item.config.getini(_INI):
        gates.append(assert_no_hazards())
    return gates


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    gates = _gates(item)
    if not gates:
        yield
        return
    entered: list[CompileRecorder] = []
    for gate in gates:
        gate.__enter__()
        entered.append(gate)
    outcome: Any = yield
    failures = []
    for gate in reversed(entered):
        try:
            gate.__exit__(None, None, None)
        except AssertionError as exc:
            failures.append(str(exc))
    if failures and outcome.excinfo is None:
        # A plain failure message: the compiles, causes and hazards, not our frames.
        outcome.force_exception(pytest.fail.Exception("\n".join(failures), pytrace=False))
