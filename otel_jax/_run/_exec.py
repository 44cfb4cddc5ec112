"""``os.exec*`` in a process of ``otel-jax run``: nothing made before it is lost.

An exec replaces the process without running its exit: no ``atexit`` handler, so neither
otel_jax's last writes nor the run's summary. Python raises the audit event ``os.exec``
just before (every ``os.exec*`` function goes through it, in the process that execs), and
the bootstrap watches it (:func:`watch`), in each process of the run:

* what otel_jax holds is written and exported first, boundedly, as at an exit;
* in the program's own process, the run goes on in the new image when that is a Python
  that gets the bootstrap again (a ``python`` executable, without ``-E``, ``-I`` or ``-S``,
  with the run's folder and the bootstrap still in its environment): the claim is given up
  (:func:`hand_over`), the new image claims it and says the summary of the whole run at
  its exit. Any other image (a shell, a binary, a Python told not to read the
  environment) never would: the summary is said now, and the run folder removed.

An exec that then fails (no such file) leaves the process running: whatever was said
stays said. Standard library only: loaded from its file by the bootstrap.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: ``python``, ``python3``, ``python3.12``: an image that runs the bootstrap (as
#: ``_launch._PYTHON`` tells a command line).
_PYTHON = re.compile(r"python(w)?(\d+(\.\d+)*)?(\.exe)?$")

#: What is called with the exec's ``(path, argv, env)`` (``env`` None: this process's).
BeforeExec = Callable[[str, Sequence[str], Mapping[str, str] | None], None]


def watch(before_exec: BeforeExec) -> None:
    """Call ``before_exec`` just before this process (or a child forked from it) execs.
    An audit hook cannot be removed; it costs one string comparison per audited event,
    and never raises (an exception in it would fail the exec)."""
    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "os.exec":
            return
        try:
            path, argv, env = args
            before_exec(os.fsdecode(path), [os.fsdecode(a) for a in argv], env)
        except BaseException:  # the exec goes on whatever happened here
            pass

    sys.addaudithook(hook)


def runs_bootstrap(path: str, argv: Sequence[str], env: Mapping[str, str] | None,
                   folder: str, boot_dir: str, dir_variable: str) -> bool:
    """Whether the image ``path`` execs into runs the bootstrap of this run again."""
    environ = os.environ if env is None else env
    if _get(environ, dir_variable) != folder:
        return False
    boot = os.path.normcase(os.path.abspath(boot_dir))
    entries = (_get(environ, "PYTHONPATH") or "").split(os.pathsep)
    if not any(e and os.path.normcase(os.path.abspath(e)) == boot for e in entries):
        return False
    if not (_PYTHON.match(os.path.basename(path))
            or os.path.realpath(path) == os.path.realpath(sys.executable)):
        return False
    for word in list(argv)[1:]:
        if word == "--" or not word.startswith("-") or word.startswith("--"):
            break
        if word.startswith(("-c", "-m", "-W", "-X")):
            break  # the program starts here, or an option with its value
        if any(letter in "EIS" for letter in word[1:]):
            return False  # no PYTHONPATH, or no site: no bootstrap
    return True


def _get(environ: Mapping[Any, Any], name: str) -> str | None:
    """``environ[name]``, where the exec was given bytes keys or values too."""
    value = environ.get(name)
    if value is None:
        value = environ.get(os.fsencode(name))
    return None if value is None else os.fsdecode(value)


def hand_over(folder: str, top_file: str) -> None:
    """Give up this process's claim to the run, for the image it execs into to claim."""
    try:
        os.unlink(os.path.join(folder, top_file))
    except OSError:
        pass
