"""``otel-jax run``: real programs run through the command, in subprocesses (every wait
bounded): exit status, argv and ``__main__`` kept, Ctrl-C, a forking program, ``-m``,
Python subprocesses, a program that calls ``install()`` itself, OpenTelemetry's own
configuration, flags, the summary and the HTML page at exit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import CHILD_PLATFORM, pythonpath

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300

pytestmark = pytest.mark.slow

#: A program that recompiles once (a new shape) in steps; exits with argv[1] when given.
RECOMPILES = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp
    import otel_jax

    print("argv", sys.argv[1:], "main", __name__, "installed",
          otel_jax.installation() is not None, flush=True)

    @jax.jit
    def update(x):
        return x * 2

    for n in (3, 3, 4, 4):
        with otel_jax.step("train_step"):
            update(jnp.ones(n))
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if (not k.startswith(("OTEL_", "JAX_")) or k == "OTEL_JAX_HAZARDS") and k != "XLA_FLAGS"}
    out.update(PYTHONPATH=pythonpath(ROOT), OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none", **CHILD_PLATFORM)
    out.update(extra)
    return out


def run(*args: str, cwd: Path, environ: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "otel_jax", "run", *args],
                          capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
                          env=environ or env())


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_script_keeps_its_argv_main_and_exit_status_and_the_summary_says_why(
        tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", RECOMPILES)
    proc = run(str(script), "7", "--flag", cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr
    assert "argv ['7', '--flag'] main __main__ installed True" in proc.stdout
    err = proc.stderr
    assert err.count("otel-jax run: ") == 1
    # jnp.ones compiles JAX's eager ops too: counted apart
    assert re.search(r"2 compiles, 1 recompile of the program's functions"
                     r"( and \d+ compiles? of JAX's eager ops)? in 1 process", err), err
    assert "update" in err and "shape x1" in err and "x: f32[3] -> f32[4]" in err
    # the steps: 4, 2 of them compiled, and compile seconds over step seconds
    assert "train_step" in err and "of step time" in err
    assert "steps that compiled" in err
    # the JSON lines still go where install() puts them by default (stderr)
    assert '"event": "jax.compile"' in err and '"event": "jax.step"' in err


def test_python_form_no_recompile_no_summary_and_flags(tmp_path: Path) -> None:
    script = write(tmp_path / "once.py", """
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + 1)(jnp.ones(3))
    """)
    proc = run("--log-output", "none", "--", sys.executable, str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "otel-jax run" not in proc.stderr and "jax.compile" not in proc.stderr
    proc = run("--summary", "always", "--log-output=none", sys.executable, str(script),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 compile, 0 recompiles" in proc.stderr and "<lambda>" in proc.stderr
    assert "jax.compile" not in proc.stderr  # --log-output none: the summary only
    bad = run("--storm-threshold", "0", str(script), cwd=tmp_path)
    assert bad.returncode == 2 and "--storm-threshold '0'" in bad.stderr
    missing = run("--summary", "always", cwd=tmp_path)
    assert missing.returncode == 2 and "the program to run is missing" in missing.stderr


def test_a_module_run_with_dash_m_and_the_html_page(tmp_path: Path) -> None:
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "__main__.py", RECOMPILES)
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    proc = run("--html", str(page.relative_to(tmp_path)), "-m", "pkg", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "argv ['0'] main __main__ installed True" in proc.stdout
    assert f"wrote the report to {page}" in proc.stderr
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and 'id="steps"' in html
    assert "update" in html


def test_ctrl_c_ends_the_program_as_plain_python_does(tmp_path: Path) -> None:
    script = write(tmp_path / "forever.py", """
        import time
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x * 3)
        f(jnp.ones(2)); f(jnp.ones(3))
        print("ready", flush=True)
        time.sleep(600)
    """)

    def interrupted(argv: list[str]) -> tuple[int, str]:
        # SIGINT back to its default first: a test run in the background inherits it ignored
        argv = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, "
                "signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])", *argv]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path, env=env(PYTHONFAULTHANDLER="1"))
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # bounded: the program prints it or exits
            assert line == "ready\n", proc.communicate(timeout=TIMEOUT_S)
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                # Still running: every thread's stack (faulthandler, on SIGABRT) says where.
                proc.send_signal(signal.SIGABRT)
                _, err = proc.communicate(timeout=60)
                raise AssertionError(f"{argv[3:]} still ran {TIMEOUT_S} s after SIGINT:\n"
                                     f"{err[-8000:]}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
        return proc.returncode, err

    # as the program run by plain Python ends, and as it ends with install() in its code:
    # killed by the SIGINT, after the traceback
    installs = write(tmp_path / "installs.py", "import otel_jax; otel_jax.install()\n"
                     + script.read_text())
    plain_rc, plain_err = interrupted([sys.executable, str(script)])
    installs_rc, installs_err = interrupted([sys.executable, str(installs)])
    rc, err = interrupted([sys.executable, "-m", "otel_jax", "run", str(script)])
    assert rc == installs_rc == plain_rc == -signal.SIGINT, (rc, installs_rc, plain_rc, installs_err[-3000:])
    assert "KeyboardInterrupt" in err and "KeyboardInterrupt" in installs_err
    # it recompiled before Ctrl-C: the summary is still printed, after the traceback
    assert err.index("KeyboardInterrupt") < err.index("otel-jax run: 2 compiles")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux's /proc")
def test_otel_jax_threads_leave_the_process_signals_to_the_main_thread(tmp_path: Path,
                                                                       ) -> None:
    """Linux gives a process's SIGINT to any thread that does not block it, and a signal
    one of our threads took would not wake the main thread from ``time.sleep``: Ctrl-C
    would wait for the sleep to end. Every thread of ours blocks it."""
    script = write(tmp_path / "threads.py", """
        import signal, threading
        import otel_jax
        otel_jax.install()
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x * 3)
        f(jnp.ones(2)); f(jnp.ones(3))
        otel_jax.flush()
        ours = [t for t in threading.enumerate() if t.name.startswith("otel_jax")]
        for t in ours:
            status = open(f"/proc/self/task/{t.native_id}/status").read()
            blocked = int(status.split("SigBlk:")[1].split()[0], 16)
            print(t.name, bool(blocked >> (signal.SIGINT - 1) & 1),
                  bool(blocked >> (signal.SIGTERM - 1) & 1))
        main = open(f"/proc/self/task/{threading.main_thread().native_id}/status").read()
        print("main", int(main.split("SigBlk:")[1].split()[0], 16))
    """)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=tmp_path, env=env())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    threads = [line.split() for line in lines if line.startswith("otel_jax")]
    assert len(threads) >= 2, proc.stdout  # the pipeline's worker and the log's writer
    assert all(t[1:] == ["True", "True"] for t in threads), proc.stdout
    assert "main 0" in lines  # the main thread keeps them


def test_a_forked_child_and_python_subprocesses(tmp_path: Path) -> None:
    script = write(tmp_path / "forks.py", """
        import os, subprocess, sys

        # forked before JAX is imported (JAX is not fork-safe once running): the child
        # inherits the bootstrap, compiles, and exits as a program does (its exit
        # handlers run) without a summary of its own
        pid = os.fork()
        if pid == 0:
            import jax, jax.numpy as jnp, otel_jax
            f = jax.jit(lambda x: x - 1)
            with otel_jax.step("child_step"):
                f(jnp.ones(2))
                f(jnp.ones(5))
            otel_jax.flush()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        import jax, jax.numpy as jnp
        jax.jit(lambda x: x + 10)(jnp.ones(2))
        plain = subprocess.run([sys.executable, "-c",
                                "import sys; print('otel_jax' in sys.modules)"],
                               capture_output=True, text=True, timeout=120)
        with_jax = subprocess.run([sys.executable, "-c", (
            "import jax, jax.numpy as jnp, otel_jax; jax.jit(lambda x: x)(jnp.ones(1));"
            "jax.jit(lambda x: x)(jnp.ones(2)); print(otel_jax.installation() is not None)")],
            capture_output=True, text=True, timeout=240)
        print("child", plain.stdout.strip(), with_jax.stdout.strip(),
              with_jax.stderr.count("otel-jax run:"), flush=True)
    """)
    proc = run("--log-output", "none", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # a Python process that never imports JAX does not import otel_jax; one that does has it
    # installed, and prints no summary of its own
    assert "child False True 0" in proc.stdout
    assert proc.stderr.count("otel-jax run: ") == 1, proc.stderr
    # the forked child's compiles and step, and the subprocess's, are in the summary
    assert "in 3 processes" in proc.stderr and "child_step" in proc.stderr
    assert "x: f32[2] -> f32[5]" in proc.stderr


@pytest.mark.parametrize("imports_jax", ["first", "after_install"])
def test_a_program_that_installs_otel_jax_itself(tmp_path: Path, imports_jax: str) -> None:
    """Its own providers and options apply (the command's installation gives way), with no
    warning; the command's flags still fill in what it leaves at the default. Also where
    the program calls install() before it imports JAX (install() imports JAX, on which the
    command installs otel_jax)."""
    source = """
        import warnings
        warnings.simplefilter("error")  # any OtelJaxWarning fails the program
        import jax, jax.numpy as jnp
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        import otel_jax

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        handle = otel_jax.install(tracer_provider=provider)
        assert otel_jax.install() is handle  # idempotent as ever
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x + 2)
        f(jnp.ones(2)); f(jnp.ones(3))
        otel_jax.flush()
        names = [s.name for s in exporter.get_finished_spans()]
        print("spans", sum(n.startswith("jax.compile") for n in names),
              "storm", otel_jax.installation()._options.storm_threshold, flush=True)
    """
    if imports_jax == "after_install":
        source = source.replace("        import jax, jax.numpy as jnp\n", "", 1)
        assert "import jax" not in source.split("otel_jax.install")[0]
    script = write(tmp_path / "own.py", source)
    proc = run("--storm-threshold", "3", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "spans 2 storm 3" in proc.stdout
    assert "Warning" not in proc.stderr and "ignored" not in proc.stderr
    assert "otel-jax run: 2 compiles, 1 recompile" in proc.stderr


def test_the_summary_counts_jax_eager_op_compiles(tmp_path: Path) -> None:
    """A program whose only compiles are JAX's eager ops: the summary counts them all (JAX's
    own count of backend compiles), apart from the program's functions."""
    script = write(tmp_path / "eager.py", """
        import jax, jax.numpy as jnp
        compiles = []
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, duration, **kw: compiles.append(event)
            if event == "/jax/core/compile/backend_compile_duration" else None)
        x = jnp.arange(6.0).reshape(2, 3)
        print(float((jnp.sin(x) * 2 + 1).sum()), flush=True)
        print("compiles", len(compiles), flush=True)
    """)
    proc = run("--summary", "always", "--log-output", "none", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [jax_count] = [int(line.split()[1]) for line in proc.stdout.splitlines()
                   if line.startswith("compiles ")]
    assert jax_count > 0
    assert "no JAX compiles" not in proc.stderr
    assert (f"otel-jax run: 0 compiles, 0 recompiles of the program's functions and "
            f"{jax_count} compile{'' if jax_count == 1 else 's'} of JAX's eager ops "
            "in 1 process") in proc.stderr


def eager_summary(text: str) -> list[str]:
    """The eager ops' summary in a text: its first line and the indented lines under it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("JAX's eager ops"))
    out = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def test_the_exit_summary_and_the_report_give_one_summary_of_eager_ops(tmp_path: Path) -> None:
    """JAX's eager ops are no row of the per-function table at exit (their compiles are
    no recompiles of anything): one summary, by op, at the program's lines relative to its
    folder, the same as ``otel-jax report`` gives on the run's log."""
    script = write(tmp_path / "job" / "eager.py", """
        import jax, jax.numpy as jnp

        @jax.jit
        def update(x):
            return x * 2

        update(jnp.ones(3))
        update(jnp.ones(4))
        x = jnp.arange(6.0).reshape(2, 3)
        print(float((jnp.sin(x) * 2 + 1).sum()), flush=True)
    """)
    proc = run("--summary", "always", "--log-level", "debug", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    at_exit = eager_summary(proc.stderr)
    assert at_exit[0].startswith("JAX's eager ops (one primitive at a time, outside jit): ")
    assert at_exit[1].startswith("  by op: ") and " x" in at_exit[1]
    sites = [line for line in at_exit if line.startswith("  - at ")]
    assert sites and all(line.startswith(f"  - at {os.path.join('job', 'eager.py')}:")
                         for line in sites), at_exit
    table = proc.stderr.split("Per function, and why:", 1)[1].split("JAX's eager ops")[0]
    assert "(eager ops)" not in table and "update" in table

    log = tmp_path / "run.jsonl"  # the run's own JSON lines, DEBUG ones too
    log.write_text("".join(line + "\n" for line in proc.stderr.splitlines()
                           if line.startswith('{"')))
    report = subprocess.run([sys.executable, "-m", "otel_jax", "report", str(log)],
                            capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
                            env=env())
    assert report.returncode == 0, report.stderr
    assert eager_summary(report.stdout) == at_exit


def test_opentelemetry_configuration_still_applies(tmp_path: Path) -> None:
    """A program that sets up its own provider after importing JAX gets the compile spans
    in it; OTEL_TRACES_EXPORTER=console still prints them; a sitecustomize of the
    environment's still runs."""
    script = write(tmp_path / "configures.py", """
        import jax, jax.numpy as jnp
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        import otel_jax, sitecustomize

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        jax.jit(lambda x: x * 5)(jnp.ones(2))
        otel_jax.flush()
        print("spans", len(exporter.get_finished_spans()),
              "chained", getattr(sitecustomize, "CHAINED", False), flush=True)
    """)
    write(tmp_path / "site" / "sitecustomize.py", "CHAINED = True\n")
    environ = env(PYTHONPATH=pythonpath(ROOT, tmp_path / "site"))
    proc = run("--log-output", "none", str(script), cwd=tmp_path, environ=environ)
    assert proc.returncode == 0, proc.stderr
    assert "spans 4 chained True" in proc.stdout, proc.stderr  # the compile, its 3 phases
    assert "Overriding" not in proc.stderr  # the program's own set-up was not refused

    once = write(tmp_path / "once.py", "import jax, jax.numpy as jnp\n"
                                       "jax.jit(lambda x: x + 1)(jnp.ones(3))\n")
    proc = run("--log-output", "none", str(once), cwd=tmp_path,
               environ=env(OTEL_TRACES_EXPORTER="console"))
    assert proc.returncode == 0, proc.stderr
    assert '"name": "jax.compile ' in proc.stdout


def test_the_bootstrap_imports_nothing_heavy(tmp_path: Path) -> None:
    """A Python process of the run that never imports JAX pays for neither JAX nor otel_jax."""
    code = ("import sys; print(sorted(m for m in ('jax', 'otel_jax', 'opentelemetry', "
            "'structlog', 'numpy') if m in sys.modules))")
    start = time.monotonic()
    proc = run(sys.executable, "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert time.monotonic() - start < TIMEOUT_S


NAMED = """
    import multiprocessing as mp, sys
    import jax, otel_jax

    def service(_=None):
        handle = otel_jax.installation()
        return handle.tracer_provider.resource.attributes["service.name"]

    if __name__ == "__main__":
        worker = "-"
        if sys.argv[1:] == ["spawn"]:  # (spawn cannot start a directory's __main__ again)
            with mp.get_context("spawn").Pool(1) as pool:  # its own __main__ is `-c`
                worker = pool.apply(service)
        print("SERVICE", service(), worker, flush=True)
"""


@pytest.mark.parametrize("form", ["script", "python-directory", "directory", "zip"])
def test_every_process_of_the_run_is_named_after_the_program(tmp_path: Path, form: str) -> None:
    """One service per program: its spawned workers carry its name, and a directory or a
    zip app (its ``__main__.py``) is named after the directory or the zip, as ``python
    pkgdir`` users would expect."""
    import zipfile

    if form == "script":
        args = [str(write(tmp_path / "trainer.py", NAMED)), "spawn"]
    elif form == "zip":
        with zipfile.ZipFile(tmp_path / "trainer.pyz", "w") as archive:
            archive.writestr("__main__.py", textwrap.dedent(NAMED))
        args = [sys.executable, str(tmp_path / "trainer.pyz")]
    else:
        write(tmp_path / "trainer" / "__main__.py", NAMED)
        args = ([sys.executable, "trainer"] if form == "python-directory" else ["trainer"])
    proc = run("--log-output", "none", "--summary", "never", *args, cwd=tmp_path,
               environ=env(OTEL_TRACES_EXPORTER="console", JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    worker = "trainer" if form == "script" else "-"
    assert f"SERVICE trainer {worker}" in proc.stdout, proc.stderr[-3000:]


def test_a_python_that_cannot_import_otel_jax_is_said_in_one_line(tmp_path: Path) -> None:
    # A bare virtual environment: its python has neither otel_jax nor JAX.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=TIMEOUT_S)
    bare = str(tmp_path / "bare" / "bin" / "python")
    script = write(tmp_path / "plain.py", "print('ran')\n")
    # The command itself imports otel_jax from the checkout; the program's python does not
    # get it on PYTHONPATH.
    launcher = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from otel_jax._cli import main; sys.exit(main())")
    environ = env()
    environ.pop("PYTHONPATH")
    proc = subprocess.run([sys.executable, "-c", launcher, str(ROOT), "run", bare,
                           str(script), "--x"], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=tmp_path, env=environ)
    assert proc.returncode == 0 and proc.stdout == "ran\n", proc.stderr
    [line] = proc.stderr.splitlines()
    assert line == (f"otel-jax run: {bare} cannot import otel_jax, so nothing is recorded; "
                    f"run `otel-jax run {script} --x` (this Python, {sys.executable}), or "
                    f"install otel_jax for {bare}")


def test_a_python_without_otel_jax_is_said_wherever_the_command_is_started(
        tmp_path: Path) -> None:
    # Started inside a checkout, whose otel_jax folder `python -c` would find (the current
    # folder goes first there) but the program does not: the program's own sys.path decides.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=TIMEOUT_S)
    bare = str(tmp_path / "bare" / "bin" / "python")
    elsewhere = write(tmp_path / "elsewhere" / "plain.py", "print('ran')\n")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "otel_jax").symlink_to(ROOT / "otel_jax")
    inside = write(clone / "prog.py", "print('ran')\n")
    launcher = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from otel_jax._cli import main; sys.exit(main())")
    environ = env()
    environ.pop("PYTHONPATH")
    said = []
    for script in (elsewhere, inside):
        proc = subprocess.run([sys.executable, "-c", launcher, str(ROOT), "run", bare,
                               str(script)], capture_output=True, text=True,
                              timeout=TIMEOUT_S, cwd=clone, env=environ)
        assert proc.returncode == 0 and proc.stdout == "ran\n", proc.stderr
        said.append(proc.stderr)
    # the script elsewhere: no otel_jax where it looks, though the current folder has one
    assert said[0].startswith(f"otel-jax run: {bare} cannot import otel_jax, so nothing"), said
    # the script beside the checkout's otel_jax finds it, but not what it imports
    assert said[1].startswith(f"otel-jax run: {bare} cannot import otel_jax (it has no jax, "
                              "jaxlib, numpy, opentelemetry.sdk, structlog), so nothing is "
                              "recorded;"), said


def test_help_says_what_each_option_accepts_and_ends_with_what_applies_besides() -> None:
    import dataclasses

    from otel_jax._run import _launch
    from otel_jax._setup._options import InstallOptions

    with_variable = {f.name for f in dataclasses.fields(InstallOptions) if f.metadata["env"]}
    assert set(_launch._accepts()) == with_variable  # a new option gets its line
    proc = subprocess.run([sys.executable, "-m", "otel_jax", "run", "--help"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env=env())
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps the lines to the terminal
    for flag, variable, *_ in _launch._option_flags():
        entry = text[text.index(f" {flag} "):]
        entry = entry[:entry.index(f"[{variable}]")]
        assert len(entry.split()) > 4, entry  # more than the flag and its metavar
    assert "auto|json|console" in text and "stderr|structlog|none" in text
    assert text.index("--hazards") < text.index("above sets the variable")
    assert "below" not in text and "docs/telemetry.md" not in text


def test_the_version() -> None:
    from otel_jax import __version__

    proc = subprocess.run([sys.executable, "-m", "otel_jax", "--version"], capture_output=True,
                          text=True, timeout=TIMEOUT_S, env=env())
    assert proc.returncode == 0 and proc.stdout == f"otel-jax {__version__}\n", proc.stderr
