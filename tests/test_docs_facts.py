"""Facts the docs state that the code decides: checked against the code, not re-typed."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from otel_jax._core._failopen import FailOpen
from otel_jax._pipeline._history import History
from otel_jax._pipeline._policy import Policy
from otel_jax._report._aggregate import summarize

ROOT = Path(__file__).resolve().parent.parent


def test_the_report_json_keys_are_listed_in_their_order():
    doc = (ROOT / "docs" / "testing-and-report.md").read_text()
    section = doc[doc.index("## Report JSON"):]
    listed = re.search(r"with the keys\s+`([^`]+)`", section)
    assert listed is not None
    keys = [k.strip() for k in listed.group(1).split(",")]
    line = json.dumps({"event": "jax.compile", "function": "f", "file": "f.py", "line": 1,
                       "count": 1, "is_recompile": False, "eager_op": False,
                       "cause_kind": "first_compile", "compile_s": 0.5})
    [row] = summarize(io.BytesIO(line.encode() + b"\n"))[0]
    assert keys == list(row)


def _policy(steps: int) -> Policy:
    policy = Policy(History(), FailOpen())
    policy.configure_warmup(steps)
    return policy


def test_the_warm_up_rule_is_stated_as_the_code_applies_it():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    assert "ends after this many" not in doc
    assert "between steps N and N+1" in doc and "compiles after the Nth call" in doc
    scoped = _policy(2)
    for _ in range(2):
        scoped.begin_step(counted=False)
    assert not scoped.warmup_done  # in step N, and after it until step N+1 begins
    scoped.begin_step(counted=False)
    assert scoped.warmup_done  # step N+1
    bare = _policy(2)
    bare.step()
    assert not bare.warmup_done
    bare.step()
    assert bare.warmup_done  # right after the Nth call
    assert _policy(0).warmup_done


# --- the front page and the first hour -----------------------------------------------------------

#: The front page's sections, in the order JAX-world READMEs keep (equinox, optax, flax).
FRONT_PAGE = ["Install", "Sixty seconds", "Why did it recompile?", "Why is it slow?",
              "In your code",
              "In your tests", "In CI", "In production", "Documentation", "Licence"]


def test_the_readme_is_a_short_front_page_in_the_usual_order():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert re.findall(r"^## (.+)$", readme, re.M) == FRONT_PAGE
    # it leads with the command that needs no change to the code
    assert readme.index("otel-jax run examples/train.py") < readme.index("## Why did it")
    # an index page shows the README without the repository: no image on it, and the
    # relative links are said to be the repository's
    assert "![" not in readme and "links are relative to the repository" in readme
    assert "[LICENSE](LICENSE)" in readme


def test_no_page_installs_otel_jax_from_an_index_it_is_not_on():
    # the pages, the deploy stack's and what otel_jax itself says (a warning, the report)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "deploy" / "README.md", *sorted((ROOT / "otel_jax").rglob("*.py")),
             *sorted((ROOT / "examples").rglob("*.py"))]
    claims = re.compile(r"pip install[^`\n]*\botel_jax\b(?!-)")
    for page in pages:
        for line in page.read_text().splitlines():
            if "Once it is published" in line:
                continue
            assert not claims.search(line), (str(page.relative_to(ROOT)), line)
    assert "not published on a package index yet" in (ROOT / "README.md").read_text()


def test_make_demo_installs_what_the_demo_needs_only():
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo: (\S+)\n\t(.+)$", makefile, re.M)
    assert demo is not None
    stamp, command = demo.groups()
    venv = stamp.split("/")[0]
    assert command.startswith(f"{venv}/bin/python examples/train.py")
    recipe = makefile[makefile.index(f"{stamp}: pyproject.toml"):]
    recipe = recipe[:recipe.index("\n\n")]
    assert "'.[report]'" in recipe and "[test]" not in recipe
    assert venv not in ("$(VENV)", ".venv")  # not the test suite's environment
