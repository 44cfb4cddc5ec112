"""``otel-jax run``: run a Python program with otel_jax installed, with no change to its code.

:mod:`._launch` (the command) puts the folder :mod:`.boot` first on ``PYTHONPATH``, hands
``install()``'s options over as ``OTEL_JAX_*`` variables and replaces itself with the
program (``os.execv``), so the program keeps its process, its ``sys.argv``, its
``__main__``, its signals and its exit status. Python imports ``boot/sitecustomize.py``
before the program's first line, in the program's process and in every Python process it
starts with that environment: it calls :func:`._bootstrap.start`, which chains to the
``sitecustomize`` it shadows and installs otel_jax when the process imports JAX (a process
that never does stays as light as without otel_jax). Each process writes its JSON log
lines to a file of the run's folder, besides where ``log_output`` says; at exit the
program's own process prints the summary of them all (:mod:`._summary`).
"""

from ._launch import main

__all__ = ["main"]
