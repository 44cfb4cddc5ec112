"""``_capture._jax._devices``: the devices a compile's arguments live on."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from otel_jax._capture._jax import _devices


def test_the_devices_of_the_arguments_and_their_facts():
    device = jax.devices()[0]
    assert _devices.argument_devices([jnp.ones(2), 1.0, None]) == {device}
    assert _devices.argument_devices([jnp.ones(2)], limit=0) == set()
    assert _devices.default_device() == device
    assert _devices.process_index() == 0
    assert _devices.device_facts(device)[0] == device.platform
    assert _devices.device_facts(object()) == ("unknown", "unknown")
