"""``otel-jax run``'s bootstrap: Python imports this before the program's first line.

Kept to the least that can fail, and light: ``otel_jax`` itself is imported only once the
process imports JAX (:mod:`otel_jax._run._bootstrap`, loaded here from its file so that the
package is not imported in a process that never uses JAX). Nothing here may stop the
program: a failure is said in one line at most.
"""


def _start() -> None:
    import importlib.util
    import os
    import sys

    try:
        boot = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(os.path.dirname(boot), "_bootstrap.py")
        spec = importlib.util.spec_from_file_location("_otel_jax_run_bootstrap", path)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.start(boot)
    except Exception as exc:  # never stop the program
        try:
            sys.stderr.write(f"otel-jax run: otel_jax not set up in this process "
                             f"({type(exc).__name__}: {exc})\n")
        except Exception:
            pass


_start()
