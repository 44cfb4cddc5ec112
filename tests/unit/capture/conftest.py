"""Fixtures shared by the capture modules' unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from otel_jax._capture import _build
from otel_jax._capture._signature import Signature


@pytest.fixture
def misses(telemetry, monkeypatch) -> list[Any]:
    """The misses signatures are built from, in compile order (kept alive by the test)."""
    seen: list[Any] = []
    real = _build.from_miss

    def recording(miss: Any, *args: Any, **kwargs: Any) -> Signature:
        seen.append(miss)
        return real(miss, *args, **kwargs)

    monkeypatch.setattr(_build, "from_miss", recording)
    return seen
