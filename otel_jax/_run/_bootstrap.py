"""What ``otel-jax run``'s ``sitecustomize`` does in each Python process of the run.

Loaded from its file, not imported as ``otel_jax._run._bootstrap``: importing the otel_jax
package costs a second or more, and most Python processes a program starts (a shell-out to
``python -c``, a tool) never use JAX. Standard library only at module level; otel_jax is
imported when the process imports JAX (:class:`_AfterJax`), then installed, with:

* the providers: the application's own when it set them up by then; else, for a signal
  whose export the ``OTEL_*`` variables ask for (an OTLP endpoint, ``console``, a
  Prometheus port), otel_jax's default, as ``install()`` makes it; else the OpenTelemetry
  API's global proxy, which forwards to whatever provider the program sets up later (so a
  program that configures OpenTelemetry in code after importing JAX still gets the
  compile spans in its own providers, and its own set-up is not refused);
* every JSON log line also appended to ``<run folder>/<pid>.jsonl`` (:class:`RunLog`);
* the installation marked to give way: a program that calls ``install()`` itself with
  other arguments gets an installation made with them (the ``OTEL_JAX_*`` variables the
  command's flags set still fill in what it leaves at the default).

The program's own process (the first of the run to claim it) prints the summary at exit
(:mod:`otel_jax._run._summary`) and removes the run folder; a forked child does not. No
signal handler is set: SIGTERM and SIGINT do what the program has them do. A program
killed by a signal leaves its folder behind, which the next ``otel-jax run`` removes
(``_launch.remove_stale_runs``).
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import shutil
import sys
from types import ModuleType
from typing import Any

#: Bytes one process writes to its file in the run folder, at most (the rest is dropped:
#: the summary covers what was written, and says it was cut).
MAX_RUN_LOG_BYTES = 64 << 20
#: The file the first process of the run creates to say it is the program's own.
TOP_FILE = "top"
#: The marker a process leaves when its file was cut at MAX_RUN_LOG_BYTES.
CUT_SUFFIX = ".cut"
#: How long the summary waits, at most, for what otel_jax still has to write.
EXIT_FLUSH_S = 2.0

_here = os.path.dirname(os.path.abspath(__file__))


def _sibling(name: str, *path: str) -> ModuleType:
    """A standard-library-only module of otel_jax, loaded from its file (see above)."""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, os.path.join(_here, *path))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _run_env() -> Any:
    return _sibling("_otel_jax_run_vocab", os.pardir, "_core", "_vocab.py").RunEnv


class RunLog:
    """A text stream that appends to this process's file of the run folder.

    One ``os.write`` per batch of lines on a descriptor opened with ``O_APPEND``: a forked
    child opens its own file at its first write. Never raises (the folder may be gone
    once the program's process has exited): what cannot be written is dropped.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._pid: int | None = None
        self._written = 0

    def write(self, text: str) -> int:
        try:
            pid = os.getpid()
            if self._pid != pid:
                self._pid, self._written = pid, 0
                self._fd = os.open(os.path.join(self.folder, f"{pid}.jsonl"),
                                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            data = text.encode("utf-8", "backslashreplace")
            if self._fd is None or self._written + len(data) > MAX_RUN_LOG_BYTES:
                if self._fd is not None:
                    os.close(os.open(os.path.join(self.folder, f"{pid}{CUT_SUFFIX}"),
                                     os.O_WRONLY | os.O_CREAT, 0o600))
                    os.close(self._fd)
                    self._fd = None
                return len(text)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            self._written += len(data)
        except OSError:
            self._fd = None
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered."""


_run_log: RunLog | None = None
#: Whether this process prints the run's summary at its exit (it claimed the folder).
_summarizes = False
#: The process that claimed the folder (a forked child inherits ``_summarizes``).
_top_pid: int | None = None


def start(boot_dir: str) -> None:
    """The bootstrap of one process: chain to the shadowed ``sitecustomize``, then set up."""
    _chain(boot_dir)
    env = _run_env()
    folder = os.environ.get(env.DIR)
    if not folder or not os.path.isdir(folder):
        return
    global _run_log
    _run_log = RunLog(folder)
    if _claim(folder):
        global _summarizes, _top_pid
        _summarizes, _top_pid = True, os.getpid()
        # registered first, so run last: after the program's own exit handlers and
        # otel_jax's, whose lines it summarises
        atexit.register(_at_exit, os.getpid(), folder)
        _exit_writes()  # loaded now: nothing is imported at exit
    # A Pool's worker flushes after each task, before its result goes (the parent may
    # terminate it then), even where JAX is first imported in a task (``_setup._exit``).
    if _spawned_by_multiprocessing():
        _exit_hooks().watch_spawned()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_watch_forked)
    _exec_hooks().watch(
        lambda path, argv, env: _before_exec(boot_dir, folder, path, argv, env))
    if "jax" in sys.modules:
        install()
    else:
        sys.meta_path.insert(0, _AfterJax())


def _exit_hooks() -> ModuleType:
    """otel_jax's ``_setup._exit``, standard library only at module level: loaded from its
    file under its own name, the module ``install()`` then uses."""
    return _sibling("otel_jax._setup._exit", os.pardir, "_setup", "_exit.py")


def _exit_writes() -> ModuleType:
    """otel_jax's ``_core._exitwrite`` (writes bounded in time), standard library only:
    loaded from its file under its own name."""
    return _sibling("otel_jax._core._exitwrite", os.pardir, "_core", "_exitwrite.py")


def _exec_hooks() -> ModuleType:
    """``_run._exec`` (what is done before an ``os.exec*``), standard library only."""
    return _sibling("otel_jax._run._exec", "_exec.py")


def _before_exec(boot_dir: str, folder: str, path: str, argv: Any, env: Any) -> None:
    """Just before this process execs (see ``_run._exec``): otel_jax's lines written and
    its telemetry exported; in the program's own process, the run handed over to the new
    image, or its summary said now."""
    install = sys.modules.get("otel_jax._setup._install")
    if install is not None and install.installation() is not None:
        install.flush_before_exec()
    if not _summarizes or os.getpid() != _top_pid:
        return
    hooks = _exec_hooks()
    if hooks.runs_bootstrap(path, argv, env, folder, boot_dir, _run_env().DIR):
        hooks.hand_over(folder, TOP_FILE)
    else:
        _at_exit(os.getpid(), folder, keep=hooks.keeps_run(env, folder, _run_env().DIR))


def _say(text: str) -> None:
    """One line of the command's on stderr, written within a bound (nobody may read it at
    exit; with stderr closed, nothing is said). Never raises."""
    try:
        _exit_writes().write_within(sys.stderr, text)
    except BaseException:
        pass


def _watch_forked() -> None:
    """In a child just forked: where ``multiprocessing`` forked it, its after-fork callbacks
    run next, ``_setup._exit``'s among them."""
    if "multiprocessing" in sys.modules:
        try:
            _exit_hooks().watch_forked()
        except Exception:  # never stop the program
            pass


def _spawned_by_multiprocessing() -> bool:
    """Whether this process is a child ``multiprocessing`` spawned, or its forkserver
    (whose forked children run Pool workers): ``python -c "from multiprocessing..."``."""
    argv: list[str] = getattr(sys, "orig_argv", [])
    try:
        code = argv[argv.index("-c") + 1]
    except (ValueError, IndexError):
        return False
    return code.startswith(("from multiprocessing.spawn import",
                            "from multiprocessing.forkserver import"))


def _chain(boot_dir: str) -> None:
    """Run the ``sitecustomize`` this one shadows (the environment's or the user's), as
    Python would have: its set-up (OpenTelemetry's included) applies as without us."""
    boot = os.path.normcase(os.path.abspath(boot_dir))
    path = [p for p in sys.path if os.path.normcase(os.path.abspath(p or os.curdir)) != boot]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    ours = sys.modules.get("sitecustomize")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # as site.py does for a failing sitecustomize
        _say(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
             f"{type(exc).__name__}: {exc}\n")
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def _claim(folder: str) -> bool:
    """Whether this process is the program's own: the first of the run to start."""
    try:
        os.close(os.open(os.path.join(folder, TOP_FILE),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        return False
    return True


class _AfterJax(importlib.abc.MetaPathFinder):
    """Installs otel_jax right after ``import jax`` finished, once."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "jax":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _InstallAfter(spec.loader)
        return spec


class _InstallAfter(importlib.abc.Loader):
    """JAX's own loader, then :func:`install`; the module keeps JAX's loader."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._inner.exec_module(module)
        finally:
            module.__loader__ = self._inner
            if module.__spec__ is not None:
                module.__spec__.loader = self._inner
        install()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    """Install otel_jax in this process (see the module's text); fails open."""
    try:
        from otel_jax._setup import _install

        stream: Any = _run_log  # a text stream as far as the log emitter is concerned
        if stream is not None and stream not in _install.EXTRA_JSON_STREAMS:
            _install.EXTRA_JSON_STREAMS.append(stream)
        before = _install.installation()
        handle = _install.install(**_providers())
        if before is None:
            handle._yields = True
    except Exception as exc:
        _say(f"otel-jax run: otel_jax could not be installed ({type(exc).__name__}: "
             f"{exc}); the program runs without it\n")
    if _summarizes:
        _import_summary()


def _import_summary() -> None:
    """The summary's modules, imported now rather than at exit: an import made after the
    program ended on an unhandled KeyboardInterrupt takes away its exit through SIGINT
    (status 1, not -2), as it does to any Python program. Where they cannot be imported,
    the exit says so as before (``_at_exit``)."""
    try:
        from otel_jax._run import _summary  # noqa: F401

        if os.environ.get(_run_env().HTML):  # the page's modules too
            from otel_jax._report import _html, _page_data  # noqa: F401
    except Exception:
        pass


def _providers() -> dict[str, Any]:
    """The providers to pass to ``install()`` (see the module's text): a signal's global
    proxy where neither the program nor the ``OTEL_*`` variables set one up."""
    from opentelemetry import _logs, metrics, trace

    from otel_jax._emit import _providers as p
    from otel_jax._setup._options import PROMETHEUS_PORT_ENV

    if p.sdk_disabled():
        return {}

    def exported(signal: str) -> bool:
        return p.otlp_endpoint(signal) is not None or p._wants_console(signal)

    out: dict[str, Any] = {}
    if not p.tracer_provider_configured() and not exported("traces"):
        out["tracer_provider"] = trace.get_tracer_provider()
    if (not p.meter_provider_configured() and not exported("metrics")
            and not os.environ.get(PROMETHEUS_PORT_ENV, "").strip()):
        out["meter_provider"] = metrics.get_meter_provider()
    if not p.logger_provider_configured() and not exported("logs"):
        out["logger_provider"] = _logs.get_logger_provider()
    return out


def _at_exit(pid: int, folder: str, keep: bool = False) -> None:
    """The program's own process: the summary of the run, then the folder is removed
    (``keep``: emptied and unclaimed instead, before an exec, see ``_run._exec``)."""
    if os.getpid() != pid or not os.path.isdir(folder):
        return  # a forked child (the summary is its parent's), or said before an exec
    try:
        otel_jax = sys.modules.get("otel_jax")
        if otel_jax is not None:
            otel_jax.flush(EXIT_FLUSH_S)
        env = _run_env()
        summary, html = os.environ.get(env.SUMMARY, "auto"), os.environ.get(env.HTML) or None
        if not html and not any(name.endswith(".jsonl") and os.path.getsize(
                os.path.join(folder, name)) for name in os.listdir(folder)):
            # nothing compiled in any process: no need to import otel_jax to say so
            if summary == "always":
                _say("otel-jax run: no JAX compiles in this run\n")
            return
        from otel_jax._run import _summary

        _summary.at_exit(folder, summary, html)
    except BaseException as exc:  # exit must never fail because of otel_jax
        _say(f"otel-jax run: no summary ({type(exc).__name__}: {exc})\n")
    finally:
        if keep:
            _exec_hooks().clear_said(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
