# Two commands do all set-up on a fresh machine:
#   make demo   - install into .venv and run the training demo (no collector needed)
#   make test   - install everything the tests need and run the whole suite,
#                 on the newest JAX the range in pyproject.toml admits and on the oldest
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OLDEST_VENV := .venv-oldest
# The lower bound of "jax>=..." in pyproject.toml (tests/test_packaging.py checks they agree).
JAX_OLDEST := 0.8.0

.PHONY: demo test test-newest test-oldest tools bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(OLDEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install -q -e '.[test]' 'jax==$(JAX_OLDEST)' 'jaxlib==$(JAX_OLDEST)'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/train.py

tools:
	@scripts/ensure-tools

test: tools test-newest test-oldest

test-newest: $(VENV)/.installed
	$(PY) -m pytest -q

# The library's own behaviour on the oldest supported JAX (the integration
# tests exercise exporters and servers, which do not depend on the JAX version).
test-oldest: $(OLDEST_VENV)/.installed
	$(OLDEST_VENV)/bin/python -m pytest -q tests/test_causes.py tests/test_core.py tests/test_testing_kit.py tests/test_transforms.py tests/test_wrappers.py

bench: $(VENV)/.installed
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) *.egg-info
