"""``otel-jax run`` and a program that ``os.exec*``s: the lines made just before the exec
are written, the summary is said once (by the new image when it is a Python that runs the
bootstrap again, else before the exec) and the run folder does not stay behind."""

from __future__ import annotations

import re
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
    if sys.argv[1] == "python":
        os.execv(sys.executable, [sys.executable, sys.argv[2]])
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


@pytest.mark.parametrize("image", ["python", "shell"])
def test_an_exec_loses_no_line_and_the_summary_is_said_once(tmp_path: Path, image: str) -> None:
    script = write(tmp_path / "launch.py", BEFORE)
    after = write(tmp_path / "after.py", AFTER)
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = run("--summary", "always", "--log-output", "none", str(script), image, str(after),
               cwd=tmp_path, environ=env(TMPDIR=str(temp)))
    err = proc.stderr
    assert proc.returncode == (0 if image == "python" else 3), err
    assert err.count("otel-jax run: ") == 1, err
    if image == "python":  # the whole run, said by the new image at its exit
        assert re.search(r"5 compiles, 3 recompiles of the program's functions.* in 1 "
                         r"process\b", err), err
        assert "before" in err and "after" in err and "x: f32[2] -> f32[5]" in err
    else:  # said before the exec: nothing after it would
        assert re.search(r"3 compiles, 2 recompiles of the program's functions", err), err
        assert "before" in err and "x: f32[2] -> f32[3]" in err, err
    assert not [p.name for p in temp.iterdir() if p.name.startswith("otel_jax-run-")]
