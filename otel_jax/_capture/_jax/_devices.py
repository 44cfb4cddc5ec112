"""The devices a compile runs on: those of its arguments, the default device, this process's
index, each device's platform and kind.

Its own module: the device facts read off arrays' shardings and ``jax.devices()``. Checked
on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: a
value without a sharding adds no device; a device without ``platform`` or ``device_kind``
is ``unknown``.
"""

from __future__ import annotations

from typing import Any

from ..._core._where import jax_call


@jax_call
def argument_devices(values: Any, limit: int = 256) -> set[Any]:
    """The devices the first ``limit`` arguments live on (one mesh is enough to see)."""
    from itertools import islice

    devices: set[Any] = set()
    for value in islice(values, limit):
        sharding = getattr(value, "sharding", None)
        if sharding is not None:
            devices.update(sharding.device_set)
    return devices


@jax_call
def device_facts(device: Any) -> tuple[str, str]:
    """``(platform, device kind)`` of one device."""
    return (str(getattr(device, "platform", "unknown")),
            str(getattr(device, "device_kind", "unknown")))


@jax_call
def default_device() -> Any:
    import jax

    return jax.devices()[0]


@jax_call
def process_index() -> int:
    import jax

    return int(jax.process_index())
