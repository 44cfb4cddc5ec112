# Two commands do all set-up on a fresh machine:
#   make demo   - install what the demo needs into .venv-demo (otel_jax and its `report`
#                 extra, not the test tools) and run the training demo (no collector needed)
#   make test   - install everything the tests need and run the suites, side by side: the
#                 whole suite on the machine's default Python (the newest JAX pip gives it),
#                 the whole suite on the newest Python >= 3.12 here with the newest JAX
#                 (JAX 0.11 and later need 3.12), the library's tests on the oldest
#                 supported JAX, and the exit and emission tests on Python 3.12 (all always
#                 run; a summary line per suite, with its Python and JAX, ends the output)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OLDEST_VENV := .venv-oldest
LATEST_VENV := .venv-latest
# The oldest Python the newest JAX releases install on (their Requires-Python).
LATEST_PYTHON_MIN := 3.12
# The newest Python >= LATEST_PYTHON_MIN on this machine (PATH, then pyenv's versions), or
# empty; looked up only where used.
LATEST_PYTHON = $(shell scripts/find-python $(LATEST_PYTHON_MIN))
# The newest Python 3.12.x here, or empty: the exit and emission tests run on it too (3.12.0
# and 3.12.1 start no thread at interpreter shutdown, where 3.11 and 3.13 do).
PY312_VENV := .venv-py312
PY312_PYTHON = $(shell scripts/find-python 3.12 3.12)
# The lower bound of "jax>=..." in pyproject.toml, otel_jax._version.JAX_MINIMUM
# (tests/test_packaging.py checks they agree).
JAX_OLDEST := 0.8.0
# Every editable install makes setuptools print an informational "Editable installation."
# block; that one warning is silenced, any other still shows.
PIP_QUIET := PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}ignore:Editable installation"

.PHONY: demo test test-default test-latest test-oldest test-py312 lint tools browser bench corpus docs clean

# The demo's own environment: otel_jax and the report's extra only, so that a first
# `make demo` installs a few packages rather than every library the tests drive.
DEMO_VENV := .venv-demo

$(DEMO_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(DEMO_VENV)/bin/python -m pip install -q -e '.[report]'
	touch $@

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_QUIET) $(PY) -m pip install -q -e . --group test
	touch $@

$(OLDEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(OLDEST_VENV)/bin/python -m pip install -q -e . --group test 'jax==$(JAX_OLDEST)' 'jaxlib==$(JAX_OLDEST)'
	touch $@

# Built by `make test` only where scripts/find-python finds a Python >= LATEST_PYTHON_MIN.
$(LATEST_VENV)/.installed: pyproject.toml
	@py="$(LATEST_PYTHON)"; [ -n "$$py" ] || { \
		echo "no Python >= $(LATEST_PYTHON_MIN) on this machine (PATH, pyenv)"; exit 1; }; \
	echo "$$py -m venv $(LATEST_VENV)"; "$$py" -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(LATEST_VENV)/bin/python -m pip install -q --upgrade -e . --group test
	touch $@

# Built by `make test` only where scripts/find-python finds a Python 3.12.
$(PY312_VENV)/.installed: pyproject.toml
	@py="$(PY312_PYTHON)"; [ -n "$$py" ] || { echo "no Python 3.12 on this machine (PATH, pyenv)"; exit 1; }; \
	echo "$$py -m venv $(PY312_VENV)"; "$$py" -m venv $(PY312_VENV)
	$(PY312_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(PY312_VENV)/bin/python -m pip install -q -e . --group test
	touch $@

# The differential corpus check (benchmarks/corpus.py) runs peer libraries' own test suites,
# as their wheels ship them, plain and with otel_jax installed; pinned beside one JAX.
CORPUS_VENV := .venv-corpus
CORPUS_PINS := 'jax==0.10.2' 'jaxlib==0.10.2' 'optax==0.2.8' 'chex==0.1.92' 'flax==0.12.8' \
	'pytest>=8' 'scipy>=1.11' 'scikit-learn>=1.4'

$(CORPUS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(CORPUS_VENV)
	$(CORPUS_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(CORPUS_VENV)/bin/python -m pip install -q -e . $(CORPUS_PINS)
	touch $@

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/python examples/train.py

# The demo's output (a terminal's lines, its JSON lines, `otel-jax report`) in README.md and
# docs/tour.md, and the screenshots in
# docs/, made again from the current code (scripts/docs_examples.py; tests/test_docs.py
# checks those blocks against what the demo prints).
docs: browser $(VENV)/.installed
	$(PY) scripts/docs_examples.py

# Jaeger v2, Prometheus 3, promtool 3 and VictoriaLogs, built once per machine from their Go modules
# (scripts/tools.versions) into ~/.cache/otel_jax-tools; tests/conftest.py finds them there.
tools:
	@scripts/ensure-tools

# Headless Chromium for tests/test_report_html.py: Debian's package, installed where this
# runs as root with apt-get; elsewhere one line says so and that test is skipped.
browser:
	@scripts/ensure-chromium

# The suites run side by side (scripts/suites says why), each to its end even when another
# fails; one line per suite says how each went, on which Python and JAX, and the exit status
# is non-zero when any failed. Where no Python >= LATEST_PYTHON_MIN exists, the newest-JAX
# suite is skipped (one line says so), not failed.
test: tools browser $(VENV)/.installed $(OLDEST_VENV)/.installed
	@scripts/suites "$(LATEST_PYTHON)" $(LATEST_PYTHON_MIN) "$(PY312_PYTHON)"

# ruff over the package, mypy over it (strict on the public API: pyproject.toml).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check otel_jax
	$(VENV)/bin/mypy

# The whole suite on the machine's default Python.
test-default: $(VENV)/.installed
	$(PY) -m pytest -q -o cache_dir=.pytest_cache/default

LIBRARY_TESTS := tests/test_causes.py tests/test_core.py tests/test_testing_kit.py \
	tests/test_transforms.py tests/test_wrappers.py tests/test_explanations.py \
	tests/test_flax.py tests/test_leaves.py tests/test_fingerprint.py tests/test_steps.py \
	tests/test_privacy.py tests/test_nonblocking.py tests/test_retention.py \
	tests/test_repr_cost.py tests/test_ranks.py tests/test_multiprocess.py \
	tests/test_persistent_cache.py tests/test_persistent_cache_restarts.py \
	tests/test_jax_versions.py \
	tests/test_structlog.py tests/test_run.py \
	tests/test_ledger_remote.py tests/test_background.py tests/test_delivery.py \
	tests/test_compile_counts.py tests/test_hazards.py tests/test_hazard_fixpoint.py \
	tests/test_callsite.py \
	tests/test_exemplars.py tests/test_run_delivery.py tests/test_fail_open.py \
	tests/unit

# The library's own behaviour on the oldest supported JAX (the integration
# tests exercise exporters and servers, which do not depend on the JAX version).
test-oldest: $(OLDEST_VENV)/.installed
	$(OLDEST_VENV)/bin/python -m pytest -q -o cache_dir=.pytest_cache/oldest $(LIBRARY_TESTS)

# The whole suite on the newest Python and JAX but for these files, which run on the default
# Python only: they test the servers' build, the deploy stack (promtool and Prometheus on
# its rules), the export to real receivers, Jaeger and Prometheus (what reaches them is
# made by the library, whose own tests run on every JAX), the README's and docs' examples,
# the report's reading of log lines and the package's layout and benchmark
# scripts; none of which depends on the JAX version; and the tests marked `version_free`
# (hazard programs rerun with their telemetry made late: otel_jax's own timing, whose
# ordering across threads tests/test_hazard_order.py checks in every suite)
# (tests/test_report_html.py stays: it runs the demo and examples/multiprocess.py under
# JAX, and reads what they wrote). A second run of them would add minutes to a `make test`
# that must stay well within CI's limit with four suites on two cores.
VERSION_FREE_TESTS := tests/test_deploy.py tests/test_deploy_multiprocess.py \
	tests/test_ensure_tools.py tests/test_report.py tests/test_report_hostile.py \
	tests/test_diff.py tests/test_integration.py tests/test_pipeline.py \
	tests/test_exemplars_pipeline.py tests/test_docs.py tests/test_packaging.py
test-latest: $(LATEST_VENV)/.installed
	$(LATEST_VENV)/bin/python -m pytest -q -o cache_dir=.pytest_cache/newest \
		-m "not version_free" $(addprefix --ignore=,$(VERSION_FREE_TESTS))

# What a process's exit and otel_jax's own threads do, on Python 3.12: only these files,
# as the suite runs beside the others (the rest of the suite does not depend on 3.12).
EXIT_TESTS := tests/test_delivery.py tests/test_background.py tests/test_run_delivery.py
test-py312: $(PY312_VENV)/.installed
	$(PY312_VENV)/bin/python -m pytest -q -o cache_dir=.pytest_cache/py312 $(EXIT_TESTS)

bench: $(VENV)/.installed
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/compile_path.py --repeat 3

# Every test optax and chex ship, twice (hours on a busy 2-core machine); the result is
# printed and kept in test-output/corpus/corpus.txt (corpus.json: every item). A subset of
# it runs in `make test` (tests/test_corpus.py).
corpus: $(CORPUS_VENV)/.installed
	$(CORPUS_VENV)/bin/python benchmarks/corpus.py --all --python $(CORPUS_VENV)/bin/python \
		--out test-output/corpus

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(OLDEST_VENV) $(LATEST_VENV) $(PY312_VENV) $(CORPUS_VENV) \
		*.egg-info
