"""The one fail-open primitive: otel_jax's own failures never reach the user's program.

What otel_jax does around a compile runs inside JAX's monitoring listeners, on
the compiling thread, where an exception would surface in the user's jit call,
or after the call on otel_jax's background thread, whose failure would lose
every later compile's telemetry. Each step runs under :meth:`FailOpen.guard`; a failure
degrades the telemetry (an ``unknown`` cause, a missing attribute) and costs
one warning per kind of problem, never an exception.

Every warning otel_jax gives goes one way: :func:`once` (one process-wide
registry, keyed by :class:`WarnKey`) decides whether it is the first of its
kind, :func:`emit` gives it, pointing at the user's own frame found by
:func:`user_frame` (the one walk out of otel_jax, JAX, wrapper libraries and
the standard library), and logs it instead when warnings are errors.
:func:`reset_warnings` forgets what was said (tests).

What Python writes of a warning is otel_jax's to keep clean: the message is :func:`shown`,
and so is the file in Python's ``FILE:LINE: OtelJaxWarning:`` prefix (a script's path is
the user's, and may hold control characters). A warning that one of otel_jax's own lines
on stderr says as well (a hazard, ``told``) is still given through ``warnings``, so that
the filters, ``-W error`` and a test runner's capture see it as ever; only where Python
would write it to that same stderr itself is its text left to the line (said once, in
one form, and JSON lines only where stderr is a file): see :func:`_left_to_the_line`.
"""

from __future__ import annotations

import enum
import logging
import os
import select
import sys
import sysconfig
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from . import _exitwrite
from ._terminal import printable
from ._text import clean_text, safe_repr
from ._warnings_seen import filter_action, module_of, python_writes_warnings

T = TypeVar("T")

_logger = logging.getLogger("otel_jax")


class OtelJaxWarning(RuntimeWarning):
    """otel_jax could not do part of its work; the user's program is unaffected."""


# --- the user's frame -------------------------------------------------------------------------

#: Packages whose frames are never the user's own code: JAX, otel_jax, the libraries
#: that wrap jit or call the user's code (test runners, OpenTelemetry).
NOT_USER_PACKAGES = (
    "jax", "jaxlib", "otel_jax", "flax", "equinox", "optax", "haiku", "chex",
    "orbax", "penzai", "pytest", "_pytest", "pluggy", "opentelemetry",
)

_package_dirs: dict[str, tuple[str, ...]] = {}
_package_dirs_seen: tuple[int, tuple[str, ...]] = (-1, ())
_frame_verdict: dict[str, bool] = {}
_stdlib: tuple[str, ...] | None = None


def _stdlib_dirs() -> tuple[str, ...]:
    global _stdlib
    if _stdlib is None:
        dirs = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
        _stdlib = tuple(os.path.normcase(os.path.realpath(d)) + os.sep for d in dirs if d)
    return _stdlib


def package_dirs() -> dict[str, tuple[str, ...]]:
    """The directories of each of :data:`NOT_USER_PACKAGES` imported so far, by name
    (one, or a namespace package's several)."""
    # Only packages already imported can appear on the stack, so resolving their
    # directories lazily keeps this free of imports; they are looked for again
    # only when the set of imported modules grew.
    global _package_dirs_seen
    modules = len(sys.modules)
    if _package_dirs_seen[0] != modules:
        for name in NOT_USER_PACKAGES:
            if name not in _package_dirs and name in sys.modules:
                module = sys.modules[name]
                path = getattr(module, "__file__", None)
                # A namespace package (opentelemetry) has no file, only its portions.
                found = ([os.path.dirname(path)] if path
                         else list(getattr(module, "__path__", None) or ()))
                if found:
                    _package_dirs[name] = tuple(
                        os.path.normcase(os.path.realpath(d)) + os.sep for d in found)
        _package_dirs_seen = (modules, tuple(
            d for dirs in _package_dirs.values() for d in dirs))
    return _package_dirs


def is_library_file(filename: str) -> bool:
    """Whether ``filename`` belongs to one of :data:`NOT_USER_PACKAGES` or to the
    standard library (code installed in site-packages may be the user's)."""
    package_dirs()
    verdict = _frame_verdict.get(filename)
    if verdict is None:
        if filename.startswith("<frozen"):
            verdict = True
        else:
            real = os.path.normcase(os.path.realpath(filename))
            in_stdlib = real.startswith(_stdlib_dirs()) and not any(
                part in real for part in ("site-packages", "dist-packages"))
            verdict = in_stdlib or real.startswith(_package_dirs_seen[1])
        if len(_frame_verdict) > 4096:  # bounded: code generated at run time has many names
            _frame_verdict.clear()
        _frame_verdict[filename] = verdict
    return verdict


#: Test runners whose frames are never the user's line, wherever they are installed
#: (``unittest`` is in the standard library, absl's in site-packages).
TEST_RUNNER_PACKAGES = ("absl", "unittest", "pytest", "_pytest", "pluggy")
_INSTALLED_MARKS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_installed_verdict: dict[str, bool] = {}


def is_installed_file(filename: str) -> bool:
    """Whether ``filename`` is code the user installed rather than wrote: an installed
    library's (site-packages, dist-packages), the standard library's, a test runner's, or
    one of :data:`NOT_USER_PACKAGES`. A user's own line is outside all of these."""
    verdict = _installed_verdict.get(filename)
    if verdict is None:
        real = os.path.normcase(os.path.realpath(filename))
        verdict = (is_library_file(filename) or any(m in real for m in _INSTALLED_MARKS)
                   or real.startswith(_stdlib_dirs()) or _is_test_runner(real))
        if len(_installed_verdict) > 4096:
            _installed_verdict.clear()
        _installed_verdict[filename] = verdict
    return verdict


def _is_test_runner(real: str) -> bool:
    for name in TEST_RUNNER_PACKAGES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None) if module is not None else None
        if path and real.startswith(os.path.normcase(os.path.realpath(
                os.path.dirname(path))) + os.sep):
            return True
    return False


def user_frame(skip: int = 0, limit: int = 200,
               is_library: Callable[[str], bool] | None = None) -> tuple[FrameType, int] | None:
    """The innermost frame of the user's own code on this thread's stack, and its
    ``stacklevel`` for a ``warnings.warn`` made by the caller (1: the caller itself).

    The walk starts ``skip`` frames out from the caller and looks at most ``limit``
    frames; ``None`` when every frame is a library's (a background thread, exit).
    ``is_library`` replaces :func:`is_library_file` as the judge of a frame's file.
    """
    judge = is_library if is_library is not None else is_library_file
    try:
        frame: FrameType | None = sys._getframe(skip + 1)
    except ValueError:
        return None
    level = skip + 1
    while frame is not None and level <= limit + skip:
        if not judge(frame.f_code.co_filename):
            return frame, level
        frame = frame.f_back
        level += 1
    return None


def user_stacklevel(default: int = 2) -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by this function's caller that
    points at the user's own code (:func:`user_frame`); ``default`` when none is found."""
    found = user_frame(skip=1)
    return default if found is None else found[1] - 1


# --- one warning per kind of problem ----------------------------------------------------------

class Topic(enum.Enum):
    """What a once-only warning is about; with :class:`WarnKey`'s ``detail``, its kind."""

    INTERNAL = "internal"                       # detail: step and exception type
    JAX_UNAVAILABLE = "jax-unavailable"
    NOT_RECORDING = "compile-history-not-recording"
    SETUP = "setup"                             # OpenTelemetry providers not set up
    INSTALL_IGNORED = "install-ignored"         # detail: the options ignored
    EXPORT_TIMEOUT = "export-timeout"           # detail: the variable
    PROMETHEUS_PORT = "prometheus-port"
    PROMETHEUS_IGNORED = "prometheus-ignored"
    GRPC_MISSING = "grpc-missing"
    FOREIGN_EXPORTER = "foreign-exporter"       # another exporter's failure messages
    BAD_RECORDS = "bad-records"
    UNSENT_BATCH = "unsent-batch"
    ANSWER_BODY = "answer-body"                 # detail: the endpoint
    LOG_DROPPED = "log-dropped"
    LOG_CLOSED = "log-closed"                   # a line after uninstall() closed the output
    EMIT_DROPPED = "emit-dropped"               # compiles the emitting thread could not take
    LOG_WRITE = "log-write"                     # detail: exception type
    STRUCTLOG_LINE = "structlog-line"           # detail: exception type
    RANKS_OFF = "ranks-off"
    RANKS_METHODS = "ranks-methods"
    LEDGER = "ledger"                           # detail: the ledger's path or URL
    LEDGER_SKIPPED = "ledger-skipped"           # detail: the ledger's path
    ENVIRONMENT = "environment"                 # detail: the OTEL_JAX_* variable
    USER_CODE = "user-code"                     # detail: which code and exception type
    PROGRAM = "program"                         # detail: the function and the pattern
    PROGRAMS = "programs"                       # detail: the programs' folder
    HAZARD = "hazard"                           # detail: the function and the hazard's kind


@dataclass(frozen=True, slots=True)
class WarnKey:
    """One kind of problem: the topic and, where it has several, which one."""

    topic: Topic
    detail: str = ""


class _Once:
    """The process's set of kinds of problem already warned about."""

    def __init__(self) -> None:
        self._seen: set[WarnKey] = set()
        self._lock = threading.RLock()

    def claim(self, key: WarnKey) -> bool:
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
            return True

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


_ONCE = _Once()


def once(key: Topic | WarnKey) -> bool:
    """True the first time ``key`` is asked about in this process, False after."""
    return _ONCE.claim(key if isinstance(key, WarnKey) else WarnKey(key))


def reset_warnings() -> None:
    """Forget every warning given, so that each may be given again (for tests)."""
    _ONCE.clear()


def _installed(filename: str) -> bool:
    return any(part in filename for part in ("site-packages", "dist-packages"))


#: Where the user's code that led to the work of this thread is, when no frame on its stack
#: is the user's: otel_jax's background thread sets the call site of the compile whose
#: record it is making or emitting (:func:`at_site`).
_site = threading.local()


@contextmanager
def at_site(callsite: str | None) -> Iterator[None]:
    """Warnings given in this block, on this thread, with no user frame on the stack point at
    ``callsite`` (``file:line``, the jit call that compiled), or at no line at all."""
    before = getattr(_site, "where", False)
    _site.where = callsite
    try:
        yield
    finally:
        _site.where = before


def _site_location(callsite: str) -> tuple[str, int] | None:
    filename, _, line = callsite.rpartition(":")
    return (filename, int(line)) if filename and line.isdigit() else None


#: A ``stacklevel`` past any stack: Python then gives the warning with no frame, the way it
#: gives one no code caused (``sys:1:`` up to Python 3.12, ``<sys>:0:`` from 3.13).
_NO_FRAME = sys.maxsize


def writable_now(stream: Any) -> bool:
    """Whether a short text (under a pipe's atomic size) can be written to ``stream``
    without blocking: what cannot be said now is not said. ``select()`` alone is not
    enough (some kernels say a full pipe is writable): a pipe also has to have the room.
    At exit, writes are bounded instead (:mod:`._exitwrite`)."""
    try:
        fd = stream.fileno()
    except Exception:
        return True  # in memory (StringIO, pytest's capture): never blocks
    try:
        return bool(select.select([], [fd], [], 0)[1]) and _exitwrite.room(fd) >= _SHORT_TEXT
    except Exception:
        return False


#: The most a short text otel_jax says (a warning) takes on a stream.
_SHORT_TEXT = 2048


def _at_nothing(message: str, told: bool = False) -> None:
    """``message`` as an ``OtelJaxWarning`` located at no line: Python's own form for a
    warning that has no frame (as ``warnings.warn`` past the stack, or a
    ``ResourceWarning`` at shutdown), with no source line under it."""
    if told and _left_to_the_line(message, "sys", 1):
        return
    warnings.warn(message, OtelJaxWarning, stacklevel=_NO_FRAME)


def _module_named(filename: str) -> tuple[str | None, dict[Any, Any] | None]:
    """The name and globals of the loaded module whose file is ``filename`` (``__main__``
    for the script run), for a warning located there to meet the filters and the
    once-per-line registry ``warnings.warn`` would give it; ``(None, None)`` if none."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name, getattr(module, "__dict__", None)
    return None, None


def _warn_explicit(message: str, filename: str, lineno: int, module: str | None = None,
                   registry: dict[Any, Any] | None = None, told: bool = False) -> None:
    """``warnings.warn_explicit`` of an ``OtelJaxWarning``, never with ``module=None``:
    CPython drops such a warning without a word (its mark of a module torn down at
    shutdown), and a line whose module is gone (a script ``runpy`` ran and that returned
    before its compile's record was made) or whose globals have no ``__name__`` still
    gets it; left out, Python names the module from the file, as it does itself.

    Python is given the file's name :func:`shown`: it writes it raw in the warning's
    ``FILE:LINE:`` prefix, where a path with control characters would drive the terminal
    or forge lines (a JSON line of its own among otel_jax's). A name that had to change
    finds no source line in ``linecache``, so none is shown under it. ``told``: one of
    otel_jax's lines on stderr says the same (:func:`_left_to_the_line`)."""
    filename = shown(filename)
    if told and _left_to_the_line(message, module_of(filename) if module is None
                                  else module, lineno):
        return
    if module is None:
        warnings.warn_explicit(message, OtelJaxWarning, filename, lineno, registry=registry)
    else:
        warnings.warn_explicit(message, OtelJaxWarning, filename, lineno, module=module,
                               registry=registry)


def _left_to_the_line(message: str, module: str, lineno: int) -> bool:
    """Whether a warning that one of otel_jax's lines on ``sys.stderr`` says too (a
    hazard's console or JSON line) is left to that line, not given here.

    Issued through ``warnings``, it would be said twice where Python writes it to that
    same stderr: a two-line ``FILE:LINE: OtelJaxWarning: ...`` above the line, or plain
    text among JSON lines in a file. So there, and only there, the line is the one form:
    the filters are still asked first, and a warning they make an error is given (and
    raises, as ever); one they ignore is not said by Python either way. Wherever
    warnings go elsewhere (the application's ``showwarning``, ``logging.captureWarnings``,
    ``catch_warnings(record=True)``, pytest's capture and ``pytest.warns``) it is given,
    unchanged. Neither ``warnings.showwarning`` nor the filters are touched: they stay the
    application's, and no other thread's warning is affected."""
    return python_writes_warnings() and filter_action(
        OtelJaxWarning, message, module, lineno) != "error"


def shown(message: str) -> str:
    """A warning's text as it reaches a terminal: one line (control characters escaped: a
    function ``__name__`` or a dict key from user code can neither drive the terminal nor
    forge lines) and no secret-shaped text."""
    return printable(clean_text(message))


def emit_at(message: str, callsite: str | None, told: bool = False) -> None:
    """An ``OtelJaxWarning`` located at ``callsite`` (``file:line``, the user's jit call
    recorded at the compile), whichever thread says it and whatever is on its stack then
    (a later ``flush()`` or ``uninstall()``, the next compile); :func:`emit` where the
    call site is not known. Never raises. ``told``: one of otel_jax's lines on stderr says
    the same (:func:`_left_to_the_line`)."""
    message = shown(message)
    location = _site_location(callsite) if callsite else None
    if location is None:
        emit(message, told=told)
        return
    try:
        module, where = _module_named(location[0])
        if _exitwrite.exiting():
            if not (told and _left_to_the_line(message, module or module_of(
                    location[0]), location[1])):
                _exitwrite.warn_within(OtelJaxWarning, message,
                                       at=(shown(location[0]), location[1]))
            return
        registry = where.setdefault("__warningregistry__", {}) if where is not None else None
        _warn_explicit(message, location[0], location[1], module, registry, told)
    except Exception:  # warnings turned into errors must not reach JAX or the user
        if not told:  # else otel_jax's own line says it
            _logger.warning(message)


def emit(message: str, at: str | None = None, told: bool = False) -> None:
    """An ``OtelJaxWarning`` located at the user's code that caused it, or at nothing.

    The rule: a warning is said at the user's own line that led to it (install(), a jit
    call: the innermost frame of theirs on this thread's stack); on otel_jax's background
    thread, at the jit call whose compile it was reporting, or, where none is known, at no
    line (said on the ``otel_jax`` logger). ``at``: the user's ``file:line`` that caused it
    (their code that raised, :func:`their_frame`), where it is said when neither a frame of
    theirs nor a jit call is known here (on otel_jax's log-writer thread, say). Where no
    line of the user's caused it (exit, an exporter's thread, another library's installed
    code calling back), it is located at nothing, in Python's own form for a warning with
    no frame (``sys:1:`` to 3.12, ``<sys>:0:`` from 3.13), never at a made-up place of
    otel_jax's: still an ``OtelJaxWarning``, filtered by its category like the others.
    Never raises: warnings turned into errors are logged on the ``otel_jax`` logger
    instead. The text is :func:`shown` first. At exit, where stderr may have no reader any
    more, the warning is written in Python's form within a bound
    (:func:`_exitwrite.warn_within`), never with a write that can block. ``told``: one of
    otel_jax's lines on stderr says the same (:func:`_left_to_the_line`)."""
    message = shown(message)
    if _exitwrite.exiting():
        # at exit no frame of the user's is on any stack: a warning whose line is known
        # (the line that set the export up) is still located there, as before the exit
        located = _site_location(at) if at else None
        if not (told and _left_to_the_line(message, "sys", 1)):
            _exitwrite.warn_within(OtelJaxWarning, message, at=None if located is None
                                   else (shown(located[0]), located[1]))
        return
    try:
        found = user_frame()
        site: str | None | bool = getattr(_site, "where", False)
        theirs = _site_location(at) if at else None
        if theirs is not None and not isinstance(site, str) and (
                found is None or _installed(found[0].f_code.co_filename)):
            _warn_explicit(message, theirs[0], theirs[1], "__main__", told=told)
            return
        if found is None and site is not False:
            location = _site_location(site) if isinstance(site, str) else None
            if location is None:
                if not told:
                    _logger.warning(message)  # no line of the user's is known: none is given
            else:
                _warn_explicit(message, location[0], location[1], "__main__", told=told)
            return
        if found is None or _installed(found[0].f_code.co_filename):
            # Installed code past ours is another library's thread or callback (the
            # OpenTelemetry SDK's export thread, an event loop), or nothing is past ours
            # (exit): no line of the user's caused it.
            _at_nothing(message, told)
        else:
            # Said at the frame found, as ``warnings.warn`` would with its stacklevel, but
            # with no second count of the frames between.
            frame = found[0]
            where = frame.f_globals
            _warn_explicit(message, frame.f_code.co_filename, frame.f_lineno,
                           where.get("__name__"), where.setdefault("__warningregistry__", {}),
                           told)
    except Exception:  # warnings turned into errors must not reach JAX or the user
        if not told:  # else otel_jax's own line says it
            _logger.warning(message)


def warn_here(message: str) -> None:
    """An ``OtelJaxWarning`` at the user's innermost frame on this thread (at no line where
    none is), as ``warnings.warn`` with :func:`user_stacklevel` would give it, but with the
    message and the file's name :func:`shown`. Raises what the filters make of it: the
    caller's warning is the user's to turn into an error (``on_recompile="warn"`` under
    ``-W error`` raises from the jit call)."""
    message = shown(message)
    found = user_frame(skip=1)
    if found is None:
        _at_nothing(message)
        return
    frame = found[0]
    where = frame.f_globals
    _warn_explicit(message, frame.f_code.co_filename, frame.f_lineno, where.get("__name__"),
                   where.setdefault("__warningregistry__", {}))


def warn_once(key: Topic | WarnKey, message: str,
              warn: Callable[[str], None] = emit) -> bool:
    """One warning per ``key`` (through ``warn``); returns whether this call warned."""
    if not once(key):
        return False
    warn(message)
    return True


def their_frame(exc: BaseException) -> str | None:
    """``file:line`` where ``exc`` was raised when that is the user's own code (the
    innermost frame of its traceback is no library's), else ``None``."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return None
    filename = last.tb_frame.f_code.co_filename
    if is_library_file(filename):
        return None
    return f"{filename}:{last.tb_lineno}"


class FailOpen:
    """Counts internal errors; each kind of problem costs one warning (:func:`warn_once`).

    ``warn`` is a test seam: by default :func:`emit`.
    """

    def __init__(self, warn: Callable[[str], None] = emit) -> None:
        self.internal_errors = 0
        self._lock = threading.RLock()
        self._warn = warn

    def warn_once(self, key: Topic | WarnKey, message: str, at: str | None = None,
                  site: str | None = None, told: bool = False) -> bool:
        """One clear warning per ``key``; returns whether this call warned. ``at``: the
        user's ``file:line`` that caused it (see :func:`emit`); ``site``: the line it is
        located at whatever the stack (:func:`emit_at`); ``told``: one of otel_jax's lines
        on stderr says the same (:func:`_left_to_the_line`)."""
        warn = self._warn
        if warn is not emit:
            return warn_once(key, message, warn)
        if site is not None:
            return warn_once(key, message, lambda text: emit_at(text, site, told))
        return warn_once(key, message, lambda text: emit(text, at, told))

    def failed(self, where: str, exc: BaseException, reaches: str | None = None) -> None:
        """Record an internal error in step ``where``: counted, logged at DEBUG, warned once.

        ``reaches``: the kind of the user's code that step calls (``"logging handler"``).
        An exception raised in the user's own code there is theirs, named as such (once
        per kind of code and exception), and not counted as otel_jax's."""
        if reaches is not None:
            theirs = their_frame(exc)
            if theirs is not None:
                self.warn_once(
                    WarnKey(Topic.USER_CODE, f"{reaches}:{type(exc).__name__}"),
                    f"otel_jax: your {reaches} raised {type(exc).__name__}: "
                    f"{safe_repr(str(exc), 200)} ({theirs}); what otel_jax gave it there is "
                    "lost, the rest of otel_jax's telemetry goes on, and the jit call is "
                    "unaffected.", at=theirs)
                return
        with self._lock:
            self.internal_errors += 1
        _logger.debug("otel_jax internal error in %s", where, exc_info=exc)
        self.warn_once(
            WarnKey(Topic.INTERNAL, f"{where}:{type(exc).__name__}"),
            f"otel_jax: internal error in {where} ({type(exc).__name__}: "
            f"{safe_repr(str(exc), 200)}); the jit call is unaffected and the compile is "
            "reported with the best explanation available.")

    @contextmanager
    def guard(self, where: str, reaches: str | None = None) -> Iterator[None]:
        """Run a block whose failure must not propagate; the block's effects stop there.
        ``reaches``: the kind of the user's code the block calls (see :meth:`failed`)."""
        try:
            yield
        except Exception as exc:
            self.failed(where, exc, reaches)

    def call(self, where: str, fn: Callable[[], T], default: T) -> T:
        """``fn()``, or ``default`` when it raises (counted and warned once)."""
        try:
            return fn()
        except Exception as exc:
            self.failed(where, exc)
            return default
