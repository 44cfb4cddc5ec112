"""Writes bounded in time: what otel_jax says while the process exits.

At exit nobody may be reading the other end of stderr (a parent that reads a child's
output only once the child ended, a pipe into a process that stopped): a blocking write
there holds the exit for good. ``select()`` is no bound: some kernels (gVisor) report a
full pipe writable, and the write that follows blocks. So every write made at exit goes
through :func:`write_within`, which never blocks past its deadline: the descriptor is
written without blocking, retried until the deadline, and what is left then is dropped.

The application's descriptor is left as it was: its blocking mode is a flag of the open
file, shared with every process that inherited it (the parent's shell, siblings), so a
pipe or a terminal is reopened (``/proc/self/fd/N``: a description of our own) and
written there without blocking. Only where that cannot be done is the descriptor's own
flag set for the write and put back at once. A regular file never waits for a reader.

Standard library only: ``otel-jax run``'s bootstrap loads it from its file.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
import threading
import time
import warnings
from typing import Any

try:  # Unix: a pipe's room is read here (imported now, not at exit)
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]

#: How long one write at exit waits for its reader, at most.
EXIT_WRITE_S = 1.0
#: How long a write that found the reader's side full waits before it tries again (never
#: ``select()``: see the module's text).
_RETRY_S = 0.005
#: The longest pause between two tries (a reader that keeps its side full for long).
_RETRY_MAX_S = 0.05


def exiting() -> bool:
    """Whether the process is exiting: the main thread ended (``threading`` marks it so
    before the ``atexit`` handlers run, on every Python supported) and no thread of the
    program's own still runs, so a write now may be the last thing between the process
    and its end. While Python joins the program's threads (its main thread returned
    first) the program goes on as before: warnings are still shown its way."""
    try:
        main = threading.main_thread()
        if main.is_alive():
            return False
        return not any(not thread.daemon and thread is not main and thread.is_alive()
                       for thread in threading.enumerate())
    except Exception:
        return True


def write_within(stream: Any, text: str, seconds: float = EXIT_WRITE_S) -> bool:
    """Write ``text`` to ``stream`` (``None``: nothing, as with a closed stderr) within
    ``seconds``; whether all of it was written. Never raises, never waits longer."""
    if stream is None or not text:
        return stream is not None
    deadline = time.monotonic() + max(0.0, seconds)
    try:
        fd = stream.fileno()
    except Exception:  # in memory (StringIO, a test runner's capture): never blocks
        fd = None
    if fd is None or fd < 0:
        try:
            stream.write(text)
            flush = getattr(stream, "flush", None)
            if flush is not None:
                flush()
            return True
        except Exception:
            return False
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        data = text.encode(encoding, "backslashreplace")
    except Exception:
        data = text.encode("utf-8", "backslashreplace")
    return bool(write_fd_within(fd, data, deadline))


def write_fd_within(fd: int, data: bytes, deadline: float, *, exit_only: bool = False,
                    ) -> bool | None:
    """Write ``data`` to descriptor ``fd`` until ``deadline`` (``time.monotonic()``) at
    most; whether all of it was written. Never raises. With ``exit_only`` (a write made
    before the exit too, ``deadline`` infinite): bounded only once the process exits
    (the exit's shared deadline), and ``None`` without writing anything where that
    needs the descriptor's own blocking flag changed (a socket, no ``/proc``): the
    caller writes it its own way."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
        return _write_all(fd, data)  # a file never waits for a reader
    own = _reopen(fd) if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) else None
    if own is not None:
        try:
            return _write_until(own, data, deadline)
        finally:
            os.close(own)
    if exit_only and not exiting():
        return None
    return _write_nonblocking(fd, data, deadline)


def _reopen(fd: int) -> int | None:
    """A non-blocking descriptor of our own on what ``fd`` writes to, or ``None``."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY
                       | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def _write_nonblocking(fd: int, data: bytes, deadline: float) -> bool:
    """The descriptor's own flag set for this write, and put back as it was."""
    try:
        blocking = os.get_blocking(fd)
    except OSError:
        return False
    try:
        if blocking:
            os.set_blocking(fd, False)
        return _write_until(fd, data, deadline)
    except OSError:
        return False
    finally:
        if blocking:
            try:
                os.set_blocking(fd, True)
            except OSError:
                pass


#: The one deadline every write at exit shares once one found its reader's side full
#: (``time.monotonic()``): a pipe nobody reads costs the exit one wait, not one per write
#: (the log lines, the words on what was dropped, a warning, a summary...).
_exit_deadline: float | None = None


def shared_deadline(deadline: float) -> float:
    """``deadline``, or the exit's one shared deadline where that comes first: set, while
    the process exits, by the first write that found its reader's side full, to
    ``EXIT_WRITE_S`` from then."""
    global _exit_deadline
    if _exit_deadline is None:
        if not exiting():
            return deadline
        _exit_deadline = time.monotonic() + EXIT_WRITE_S
    return min(deadline, _exit_deadline)


def _write_until(fd: int, data: bytes, deadline: float) -> bool:
    view = memoryview(data)
    pause = _RETRY_S
    while view:
        try:
            view = view[os.write(fd, view):]
            pause = _RETRY_S
        except BlockingIOError:
            # looked at again at every retry: a write begun before the exit (the log
            # writer's, with no deadline of its own) ends with the exit's
            deadline = shared_deadline(deadline)
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, _RETRY_MAX_S)
        except InterruptedError:
            continue
        except OSError:  # the reader is gone: nothing more can be written
            return False
    return True


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        return False
    return True


def room(fd: int) -> int:
    """How many bytes a pipe behind ``fd`` takes now without blocking (its size less what
    it holds); a large number for anything else, or where the kernel does not say."""
    unknown = 1 << 30
    if fcntl is None or termios is None:
        return unknown
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return unknown
        size = int(fcntl.fcntl(fd, 1032))  # F_GETPIPE_SZ (Linux)
        held: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return max(0, size - held)
    except Exception:
        return unknown


# --- a warning at exit -------------------------------------------------------------------

def warning_action(category: type[Warning], message: str) -> str:
    """What the ``warnings`` filters do with ``message`` of ``category`` said at no line
    (``ignore``, ``error``, ``default``…): the filters stay the application's."""
    try:
        for action, text, kind, module, lineno in warnings.filters:
            if ((text is None or text.match(message)) and issubclass(category, kind)
                    and (module is None or module.match("sys")) and lineno in (0, 1)):
                return str(action)
        return str(getattr(warnings, "defaultaction", "default"))
    except Exception:
        return "default"


def warn_within(category: type[Warning], message: str, seconds: float = EXIT_WRITE_S,
                at: tuple[str, int] | None = None) -> bool:
    """At exit: ``message`` as Python shows a warning of ``category`` located at ``at``
    (``file, line``; by default at no line), written to stderr within ``seconds``, unless
    the filters ignore it; whether it was said. Warnings that the filters make errors
    cannot be raised anywhere at exit: they are said the same way."""
    if warning_action(category, message) == "ignore":
        return False
    if at is None:
        at = ("<sys>", 0) if sys.version_info >= (3, 13) else ("sys", 1)
    try:
        text = warnings.formatwarning(message, category, at[0], at[1], line="")
    except Exception:
        text = f"{at[0]}:{at[1]}: {category.__name__}: {message}\n"
    return write_within(sys.stderr, text, seconds)
