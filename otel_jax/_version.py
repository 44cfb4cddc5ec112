__version__ = "0.1.0"

#: The oldest JAX (and jaxlib) otel_jax supports and is tested on; there is no upper
#: bound: on a newer JAX whose internals moved, the facts read off them fall back and
#: install() says which. pyproject.toml's requirements, the instrumentor's
#: ``instrumentation_dependencies()`` and the Makefile's oldest suite all state this
#: version (tests/test_packaging.py checks that they agree).
JAX_MINIMUM = "0.8.0"
