"""``os.exec*`` in a process of ``otel-jax run``: nothing made before it is lost.

An exec replaces the process without running its exit: no ``atexit`` handler, so neither
otel_jax's last writes nor the run's summary. Python raises the audit event ``os.exec``
just before (every ``os.exec*`` function goes through it, in the process that execs), and
the bootstrap watches it (:func:`watch`), in each process of the run:

* what otel_jax holds is written and exported first, boundedly, as at an exit;
* in the program's own process, the run goes on in the new image when that is a Python
  that gets the bootstrap again (a ``python`` executable without ``-E``, ``-I`` or ``-S``,
  or a script whose ``#!`` line names Python, such as a console script, with the run's
  folder and the bootstrap still in its environment): the claim is given up
  (:func:`hand_over`), and the new image claims it and says the summary of the whole run
  at its exit. Any other image (a shell, a binary) would not: the summary of what was
  made so far is said now. Where the environment still carries the run, the folder stays,
  emptied and unclaimed (:func:`clear_said`), for a Python process the image starts (a
  shell's ``python train.py``) to claim, and that process says the summary of what came
  after; otherwise the folder is removed. A folder nothing claimed again is removed by the
  next ``otel-jax run``, as one a killed program left.

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
    if not keeps_run(env, folder, dir_variable):
        return False
    boot = os.path.normcase(os.path.abspath(boot_dir))
    entries = (_get(environ, "PYTHONPATH") or "").split(os.pathsep)
    if not any(e and os.path.normcase(os.path.abspath(e)) == boot for e in entries):
        return False
    if not (_PYTHON.match(os.path.basename(path))
            or os.path.realpath(path) == os.path.realpath(sys.executable)):
        return _python_script(path)  # its arguments are the script's, not Python's
    for word in list(argv)[1:]:
        if word == "--" or not word.startswith("-") or word.startswith("--"):
            break
        if word.startswith(("-c", "-m", "-W", "-X")):
            break  # the program starts here, or an option with its value
        if any(letter in "EIS" for letter in word[1:]):
            return False  # no PYTHONPATH, or no site: no bootstrap
    return True


def keeps_run(env: Mapping[str, str] | None, folder: str, dir_variable: str) -> bool:
    """Whether the environment the exec passes on still carries the run's folder."""
    return _get(os.environ if env is None else env, dir_variable) == folder


def _python_script(path: str) -> bool:
    """Whether ``path`` is a script whose ``#!`` line runs Python (a console script)."""
    try:
        with open(path, "rb") as script:
            first = script.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


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


def clear_said(folder: str) -> None:
    """Empty the run folder once its lines were summarised, leaving it unclaimed: what a
    process of the run writes next is summarised by the process that claims it next."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass
