"""``_core._threads``: otel_jax's threads, made in one place, leave the signals to main."""

from __future__ import annotations

import ast
import signal
from pathlib import Path

import pytest

from otel_jax._core import _threads

PACKAGE = Path(__file__).resolve().parents[3] / "otel_jax"


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks")
def test_a_thread_of_ours_blocks_the_process_signals_and_leaves_faults_and_its_maker():
    seen: dict[str, object] = {}

    def body(key: str) -> None:
        seen[key] = signal.pthread_sigmask(signal.SIG_BLOCK, [])

    thread = _threads.daemon(body, "otel_jax-test", ("mask",))
    assert thread.daemon and thread.name == "otel_jax-test"
    thread.start()
    thread.join(10)
    mask = seen["mask"]
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1} <= mask
    assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT} & mask
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the maker's


def test_no_other_module_makes_a_thread():
    # Every thread of otel_jax goes through _threads.daemon, so none takes a Ctrl-C.
    makers = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_threads.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in {"Thread", "start_new_thread", "_start_new_thread"}:
                    makers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not makers, makers
