"""XLA's memory analysis of a compiled program, and a device's memory limit.

Its own module: both are read off JAX's objects. The program's memory is what
``jitted.lower(x).compile().memory_analysis()`` returns for the same call: that method calls
``get_compiled_memory_stats()`` on the executable JAX's backend-compile entry returned (the
one ``_compile_entry`` sees), so otel_jax calls it on that same executable, compiling
nothing again. It is not free (30-70 µs on a CPU program, JAX 0.12: it serialises the
buffer assignment), so it is read where the record is made, off the compiling thread by
default; the executable is held only until then. The device's limit is
``device.memory_stats()["bytes_limit"]`` (TPU and GPU; ``None`` on the CPU), read once per
device.

Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs): the
executable is a ``jaxlib._jax.LoadedExecutable`` (no weak reference to it can be made) and
its ``CompiledMemoryStats`` has ``argument_size_in_bytes``, ``output_size_in_bytes``,
``temp_size_in_bytes``, ``generated_code_size_in_bytes`` on all three.
Fallback, decided by what fails: an executable without the method, a backend that does not
implement it (JAX raises ``UNIMPLEMENTED``), a call that raises or returns ``None``: no
analysis; a field missing or not an int: that field is absent. Never a zero that was not
read: a size of 0 is XLA's (a program fused into no temporaries).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..._core._where import jax_call


@dataclass(frozen=True, slots=True)
class ProgramMemory:
    """The device memory one compiled program needs, in bytes, as XLA analysed it
    (``None``: that size is not given on this backend or version)."""

    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    generated_code_bytes: int | None = None

    @property
    def total_bytes(self) -> int:
        """The sizes given, added up (what ranks one program above another)."""
        return sum(v for v in (self.argument_bytes, self.output_bytes, self.temp_bytes,
                               self.generated_code_bytes) if v is not None)


#: ``ProgramMemory``'s fields, and the ``CompiledMemoryStats`` attribute each is read from.
STATS_FIELDS: tuple[tuple[str, str], ...] = (
    ("argument_bytes", "argument_size_in_bytes"),
    ("output_bytes", "output_size_in_bytes"),
    ("temp_bytes", "temp_size_in_bytes"),
    ("generated_code_bytes", "generated_code_size_in_bytes"),
)


def _size(stats: Any, name: str) -> int | None:
    value = getattr(stats, name, None)
    # bool is an int: a flag there would be no size
    if type(value) is not int or value < 0:
        return None
    return value


@jax_call
def program_memory(executable: Any) -> ProgramMemory | None:
    """XLA's memory analysis of ``executable`` (what JAX's backend-compile entry returned),
    or ``None`` where this backend or version gives none."""
    read = getattr(executable, "get_compiled_memory_stats", None)
    if not callable(read):
        return None
    try:
        stats = read()
    except Exception:  # UNIMPLEMENTED on this backend, or the call moved
        return None
    if stats is None:
        return None
    memory = ProgramMemory(**{field: _size(stats, name) for field, name in STATS_FIELDS})
    if all(getattr(memory, field) is None for field, _ in STATS_FIELDS):
        return None
    return memory


_limits: dict[tuple[str, int, int], int | None] = {}
_limits_lock = threading.Lock()
#: Devices whose limits are kept (one process sees a few thousand at most).
MAX_DEVICES = 4096


@jax_call
def memory_limit(device: Any) -> int | None:
    """The device's memory limit in bytes (``bytes_limit`` of its ``memory_stats()``), read
    once per device; ``None`` where it is not known (the CPU)."""
    try:
        key = (str(getattr(device, "platform", "")), int(getattr(device, "id", -1)),
               int(getattr(device, "process_index", 0)))
    except Exception:  # an id that is not a number: read each time
        return _read_limit(device)
    try:
        return _limits[key]
    except KeyError:
        pass
    limit = _read_limit(device)
    with _limits_lock:
        if len(_limits) < MAX_DEVICES:
            _limits[key] = limit
    return limit


def _read_limit(device: Any) -> int | None:
    read = getattr(device, "memory_stats", None)
    if not callable(read):
        return None
    try:
        stats = read()
    except Exception:  # a backend that keeps no allocator statistics
        return None
    if not isinstance(stats, dict):
        return None
    limit = stats.get("bytes_limit")
    return limit if type(limit) is int and limit > 0 else None
