# Two commands do all set-up on a fresh machine:
#   make demo   - install into .venv and run the training demo (no collector needed)
#   make test   - install everything the tests need and run the whole suite,
#                 on the newest JAX the range in pyproject.toml admits and on the oldest
#                 (both always run; a summary line per suite ends the output)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OLDEST_VENV := .venv-oldest
# The lower bound of "jax>=..." in pyproject.toml, otel_jax._version.JAX_MINIMUM
# (tests/test_packaging.py checks they agree).
JAX_OLDEST := 0.8.0
# Every editable install makes setuptools print an informational "Editable installation."
# block; that one warning is silenced, any other still shows.
PIP_QUIET := PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}ignore:Editable installation"

.PHONY: demo test test-newest test-oldest lint tools browser bench corpus clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_QUIET) $(PY) -m pip install -q -e '.[test]'
	touch $@

$(OLDEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(PIP_QUIET) $(OLDEST_VENV)/bin/python -m pip install -q -e '.[test]' 'jax==$(JAX_OLDEST)' 'jaxlib==$(JAX_OLDEST)'
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

demo: $(VENV)/.installed
	$(PY) examples/train.py

# Jaeger v2, Prometheus 3 and promtool 3, built once per machine from their Go modules
# (scripts/tools.versions) into ~/.cache/otel_jax-tools; tests/conftest.py finds them there.
tools:
	@scripts/ensure-tools

# Headless Chromium for tests/test_report_html.py: Debian's package, installed where this
# runs as root with apt-get; elsewhere one line says so and that test is skipped.
browser:
	@scripts/ensure-chromium

# Both suites run even when the first fails; one line per suite says how each went, and
# the exit status is non-zero when either failed.
test: tools browser $(VENV)/.installed $(OLDEST_VENV)/.installed
	@lint=0; newest=0; oldest=0; \
	$(MAKE) --no-print-directory lint || lint=$$?; \
	$(MAKE) --no-print-directory test-newest || newest=$$?; \
	$(MAKE) --no-print-directory test-oldest || oldest=$$?; \
	echo; \
	if [ $$lint -eq 0 ]; then echo "make test: lint and type check passed"; \
	else echo "make test: lint or type check FAILED (exit $$lint)"; fi; \
	if [ $$newest -eq 0 ]; then echo "make test: newest JAX suite passed"; \
	else echo "make test: newest JAX suite FAILED (exit $$newest)"; fi; \
	if [ $$oldest -eq 0 ]; then echo "make test: oldest JAX suite (jax $(JAX_OLDEST)) passed"; \
	else echo "make test: oldest JAX suite (jax $(JAX_OLDEST)) FAILED (exit $$oldest)"; fi; \
	[ $$lint -eq 0 ] && [ $$newest -eq 0 ] && [ $$oldest -eq 0 ]

# ruff over the package, mypy over it (strict on the public API: pyproject.toml).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check otel_jax
	$(VENV)/bin/mypy

test-newest: $(VENV)/.installed
	$(PY) -m pytest -q

LIBRARY_TESTS := tests/test_causes.py tests/test_core.py tests/test_testing_kit.py \
	tests/test_transforms.py tests/test_wrappers.py tests/test_explanations.py \
	tests/test_flax.py tests/test_leaves.py tests/test_fingerprint.py tests/test_steps.py \
	tests/test_privacy.py tests/test_nonblocking.py tests/test_retention.py \
	tests/test_repr_cost.py tests/test_ranks.py tests/test_multiprocess.py \
	tests/test_persistent_cache.py tests/test_persistent_cache_restarts.py \
	tests/test_jax_versions.py \
	tests/test_structlog.py \
	tests/test_ledger_remote.py tests/test_background.py \
	tests/unit

# The library's own behaviour on the oldest supported JAX (the integration
# tests exercise exporters and servers, which do not depend on the JAX version).
test-oldest: $(OLDEST_VENV)/.installed
	$(OLDEST_VENV)/bin/python -m pytest -q $(LIBRARY_TESTS)

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
	rm -rf $(VENV) $(OLDEST_VENV) $(CORPUS_VENV) *.egg-info
