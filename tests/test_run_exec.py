"""``otel-jax run`` and a program that ``os.exec*``s: the lines made just before the exec
are written, the summary is said once (by the new image when it is a Python that runs the
bootstrap again, else before the exec) and the run folder does not stay behind."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from test_run import env, run, write

pytestmark = pytest.mark.slow

BEFORE = textwrap.dedent("""
    import os, sys
    import jax, jax.numpy as jnp

    @jax.jit
    def before(x):
        return x * 2

    for n in (2, 3, 4):  # the last lines made just before the exec
        before(jnp.ones(n))
    image, after = sys.argv[1:]
    if image == "python":
        os.execv(sys.executable, [sys.executable, after])
    if image == "console script":  # a script whose #! line names this Python
        os.execv(after, [after])
    if image == "shell running python":
        os.execv("/bin/sh", ["sh", "-c", f'exec "{sys.executable}" "{after}"'])
    os.execv("/bin/sh", ["sh", "-c", "exit 3"])
""")

AFTER = textwrap.dedent("""
    import jax, jax.numpy as jnp

    @jax.jit
    def after(x):
        return x + 1

    after(jnp.ones(2))
    after(jnp.ones(5))
""")


@pytest.mark.parametrize("image", ["python", "console script", "shell",
                                   "shell running python"])
def test_an_exec_loses_no_line_and_the_summary_is_said_once(tmp_path: Path, image: str) -> None:
    script = write(tmp_path / "launch.py", BEFORE)
    after = write(tmp_path / "after.py", f"#!{sys.executable}\n" + AFTER)
    after.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = run("--summary", "always", "--log-output", "none", str(script), image, str(after),
               cwd=tmp_path, environ=env(TMPDIR=str(temp)))
    err = proc.stderr
    assert proc.returncode == (3 if image == "shell" else 0), err
    before = r"3 compiles, 2 recompiles of the program's functions"
    if image in ("python", "console script"):  # the whole run, said by the new image
        assert err.count("otel-jax run: ") == 1, err
        assert re.search(r"5 compiles, 3 recompiles of the program's functions.* in 1 "
                         r"process\b", err), err
        assert "before" in err and "after" in err and "x: f32[2] -> f32[5]" in err
    elif image == "shell":  # said before the exec: nothing after it would
        assert err.count("otel-jax run: ") == 1, err
        assert re.search(before, err) and "x: f32[2] -> f32[3]" in err, err
    else:  # before the exec, what came before; the Python the shell ran, what came after
        assert err.count("otel-jax run: ") == 2, err
        said, later = err.split("otel-jax run: ")[1:]
        assert re.search(before, said) and "after" not in said, err
        assert re.search(r"2 compiles, 1 recompile of the program's functions", later), err
        assert "before" not in later, err
    # no run folder stays with anything in it (an emptied one, that a process the shell
    # might have started would have claimed, is removed by the next run)
    assert not [f for d in temp.glob("otel_jax-run-*") for f in d.iterdir()]
    if image != "shell":
        assert not list(temp.glob("otel_jax-run-*"))
