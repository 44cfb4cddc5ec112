"""The patch on JAX's backend-compile entry (``jax._src.compiler.compile_or_get_cached``):
what each backend compile was asked to compile, kept on its thread for its event.

Its own module: a patch of its own, independent of the jit miss path. Checked on JAX
0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback:
arguments that moved leave no inputs (no fingerprint, no cache-key parts, no compiler
options; the executable it returns is still taken, for its memory analysis); compile
options whose fields moved read as none given; the compile itself always runs untouched.
Whether the entry can be wrapped at all is decided at install (``_hooks``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

# The inputs of the backend compile that last ran on each thread (``take_compile_inputs``).
_tls = threading.local()


class CompileInputs(NamedTuple):
    """What one backend compile was asked to compile (references, dropped after its event).

    Read by ``_program`` and ``_cache_key``: the lowered program (to fingerprint it, as JAX's
    persistent cache does), the devices, the compile options and the backend.
    """

    computation: Any  # the lowered MLIR module
    devices: Any  # numpy array of devices
    compile_options: Any
    backend: Any
    host_callbacks: int


# The entry JAX calls (inside its backend-compile event) to compile a lowered
# program or fetch it from the persistent cache, looked up by name at call time.
COMPILE_ENTRY = "compile_or_get_cached"


# Its leading parameters, as JAX 0.8 - 0.12 name them; read by name or position.
COMPILE_PARAMS = ("backend", "computation", "devices", "compile_options", "host_callbacks")


def wrap_compile_or_get_cached(original: Callable[..., Any]) -> Callable[..., Any]:
    # Any arguments pass through untouched, so a JAX that calls it another way
    # loses the program's facts, never the compile.
    def compile_or_get_cached(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            given = dict(zip(COMPILE_PARAMS, args))
            given.update((k, kwargs[k]) for k in COMPILE_PARAMS if k in kwargs)
            _tls.compile_inputs = CompileInputs(
                given["computation"], given["devices"], given["compile_options"],
                given["backend"], len(given["host_callbacks"]))
        except Exception:  # arguments moved
            _tls.compile_inputs = None
        _tls.executable = None
        executable = original(*args, **kwargs)
        # What it compiled (or loaded), for XLA's memory analysis (``_memory``): a
        # reference only, read where the record is made.
        _tls.executable = executable
        return executable

    return compile_or_get_cached


# Options JAX moves out of the overrides onto the build options (JAX 0.5+), at their defaults
# when unset.
_BUILD_OPTIONS = ("exec_time_optimization_effort", "memory_fitting_effort")


def compiler_options(inputs: CompileInputs) -> tuple[tuple[str, Any], ...]:
    """The XLA compiler options one backend compile was asked for, by name and sorted:
    a jit wrapper's ``compiler_options`` and those given to ``Lowered.compile`` alike, as
    JAX passed them on (its ``env_option_overrides``, and the build options it moves some
    to). Empty when none were given, or when JAX keeps them elsewhere."""
    options = inputs.compile_options
    found = dict(getattr(options, "env_option_overrides", None) or ())
    build = getattr(options, "executable_build_options", None)
    for name in _BUILD_OPTIONS:
        value = getattr(build, name, None)
        if value:  # set: the defaults are 0
            found[name] = value
    return tuple(sorted((str(k), v) for k, v in found.items()))


def take_compile_inputs() -> CompileInputs | None:
    """The inputs of the backend compile that just ended on this thread (then forgotten:
    the lowered program can be large)."""
    inputs = getattr(_tls, "compile_inputs", None)
    _tls.compile_inputs = None
    return inputs


def take_executable() -> Any:
    """The executable the backend compile that just ended on this thread returned, or
    ``None`` (then forgotten: it holds the program's code)."""
    executable = getattr(_tls, "executable", None)
    _tls.executable = None
    return executable
