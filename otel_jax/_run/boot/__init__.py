"""The folder ``otel-jax run`` puts first on ``PYTHONPATH``: its ``sitecustomize`` only."""
