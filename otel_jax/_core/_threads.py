"""otel_jax's own threads, all made here: each leaves the process's signals to the main
thread.

Linux hands a signal sent to the process (Ctrl-C, ``kill``, a timer) to any thread that
does not block it, and prefers the main thread only while that one does not block it
itself (native code can block signals briefly on the main thread, to start threads of
its own that inherit the mask). A Python handler always runs on the main thread, but a
signal taken by another thread does not wake the main thread from a blocking call: a
program in ``time.sleep(600)`` would then ignore Ctrl-C for ten minutes. So each of our
threads blocks those signals first. Faults stay unblocked: they belong to the thread
that caused them. A process that user code started on one of these threads (an exporter
that runs a helper) inherits the mask, as every child inherits its maker's.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

_FAULTS = {getattr(signal, name, None) for name in (
    "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGTRAP", "SIGSYS", "SIGKILL",
    "SIGSTOP")}

#: What each of otel_jax's threads blocks (empty where the platform has no signal masks).
PROCESS_SIGNALS = ({s for s in signal.valid_signals() if s not in _FAULTS}
                   if hasattr(signal, "pthread_sigmask") else set())


def _leave_signals_to_main() -> None:
    if PROCESS_SIGNALS:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, PROCESS_SIGNALS)
        except (OSError, ValueError):
            pass


def daemon(target: Callable[..., Any], name: str, args: tuple[Any, ...] = ()
           ) -> threading.Thread:
    """One of otel_jax's threads, not started: a daemon that blocks the process's signals,
    then runs ``target(*args)``."""
    def run() -> None:
        _leave_signals_to_main()
        target(*args)
    return threading.Thread(target=run, name=name, daemon=True)
