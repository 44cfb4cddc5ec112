"""otel_jax's own threads leave the process's signals to the main thread.

Linux hands a signal sent to the process (Ctrl-C, ``kill``, a timer) to any thread that
does not block it, and prefers the main thread only while that one does not block it
itself (native code can block signals briefly on the main thread, to start threads of
its own that inherit the mask). A Python handler always runs on the main thread, but a
signal taken by another thread does not wake the main thread from a blocking call: a
program in ``time.sleep(600)`` would then ignore Ctrl-C for ten minutes. So each of our
threads blocks those signals first. Faults stay unblocked: they belong to the thread
that caused them.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

_FAULTS = {getattr(signal, name, None) for name in (
    "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP", "SIGSYS", "SIGKILL",
    "SIGSTOP")}


def _process_signals() -> set[signal.Signals]:
    try:
        return {s for s in signal.valid_signals() if s not in _FAULTS}
    except AttributeError:
        return set()


#: What each of otel_jax's threads blocks (empty where the platform has no signal masks).
PROCESS_SIGNALS = _process_signals() if hasattr(signal, "pthread_sigmask") else set()


def leave_signals_to_main() -> None:
    """Block the process's signals in the calling thread (one of ours); never raises."""
    if PROCESS_SIGNALS:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, PROCESS_SIGNALS)
        except (OSError, ValueError):
            pass


def own(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target`` as the body of one of otel_jax's threads."""
    def run(*args: Any) -> Any:
        leave_signals_to_main()
        return target(*args)
    return run
