"""What one log line costs otel_jax's writer thread, and what the compiling thread pays for it.

Measured on the fields of a real ``jax.compile`` line (a recompile of a jitted function,
captured from otel_jax itself):

(a) rendering one default JSON line: a hand-written ``json.dumps`` of the envelope and
    the fields (the renderer before the structlog chain, kept here as the baseline) vs
    ``_logs.render``, the private structlog chain (``add_log_level``, the event's time,
    ``JSONRenderer``); both must give the same bytes;
(b) writing a batch of 64 default lines to a stream (``JsonLogEmitter._write``: render,
    join, write), per line;
(c) ``log_output="structlog"``: one line through an application's structlog configuration
    (``merge_contextvars``, ``add_log_level``, ``TimeStamper``, ``JSONRenderer``, a
    ``PrintLogger`` on a stream) inside the compile's context (``StructlogEmitter._write``),
    per line, against (b);
(d) the compiling thread's share with ``log_output="structlog"``: capturing the context
    (``contextvars.copy_context()`` with 4 structlog context variables bound).

    python benchmarks/log_lines.py           # 15 rounds of 2,000 lines per side
    python benchmarks/log_lines.py --quick   # a smoke run

Rounds alternate which side goes first so that drift on a shared machine hits both
alike; each side reports its median per line over the rounds with the spread (min-max),
and the paired ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import contextvars
import io
import json
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import jax
import jax.numpy as jnp
import structlog

import otel_jax
from otel_jax._core._vocab import LOGGER_NAME, Field
from otel_jax._emit import _app_structlog, _logs

_LEVEL_NAMES = {10: "debug", 20: "info", 30: "warning", 40: "error"}


def hand_render(stamp: float, level: int, event: str, fields: dict[str, Any]) -> str:
    """The renderer the JSON lines had before the structlog chain (the baseline)."""
    timestamp = datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    line = {Field.TIMESTAMP: timestamp, Field.LEVEL: _LEVEL_NAMES.get(level, "info"),
            Field.EVENT: event, Field.LOGGER: LOGGER_NAME, **fields}
    return json.dumps(line, default=str, ensure_ascii=False) + "\n"


def real_fields() -> dict[str, Any]:
    """The fields of a real recompile line, as otel_jax wrote it."""
    out = io.StringIO()
    otel_jax.uninstall()
    otel_jax.install(log_output=out)
    try:
        @jax.jit
        def train_step(batch: dict[str, Any], lr: Any) -> Any:
            return (batch["x"] * lr).sum() + batch["y"].sum()

        train_step({"x": jnp.ones((128, 32)), "y": jnp.ones(128, jnp.int32)}, 0.1)
        train_step({"x": jnp.ones((104, 32)), "y": jnp.ones(104, jnp.int32)}, 0.1)
        _logs.flush_all()
    finally:
        otel_jax.uninstall()
    lines = [json.loads(ln) for ln in out.getvalue().splitlines()]
    [line] = [ln for ln in lines if ln["function"].endswith("train_step") and ln["count"] == 2]
    for key in (Field.TIMESTAMP, Field.LEVEL, Field.EVENT, Field.LOGGER):
        del line[key]
    return line


class _Null(io.TextIOBase):
    """A stream that keeps nothing (no file system in the measurement)."""

    def write(self, text: str) -> int:
        return len(text)


def per_line(fn: Callable[[], None], lines: int) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) / lines


def paired(name_a: str, a: Callable[[], None], name_b: str, b: Callable[[], None],
           lines: int, rounds: int) -> None:
    a(), b()  # warm
    times_a: list[float] = []
    times_b: list[float] = []
    for i in range(rounds):
        if i % 2:
            times_b.append(per_line(b, lines))
            times_a.append(per_line(a, lines))
        else:
            times_a.append(per_line(a, lines))
            times_b.append(per_line(b, lines))
    ratios = [tb / ta for ta, tb in zip(times_a, times_b)]
    for name, times in ((name_a, times_a), (name_b, times_b)):
        print(f"  {name:<44} {statistics.median(times) * 1e6:7.2f} us/line "
              f"(min {min(times) * 1e6:.2f}, max {max(times) * 1e6:.2f})")
    print(f"  ratio {name_b} / {name_a}: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    lines, rounds = (200, 4) if args.quick else (2000, 15)
    fields = real_fields()
    stamp = time.time()
    assert hand_render(stamp, 20, "jax.compile", fields) == _logs.render(
        stamp, 20, "jax.compile", fields), "the structlog chain changed the bytes"
    print(f"one real jax.compile line: {len(_logs.render(stamp, 20, 'jax.compile', fields))} "
          f"bytes, {len(fields)} fields; {rounds} rounds of {lines} lines per side")

    print("(a) rendering one default JSON line")
    paired("hand-written json.dumps (before)",
           lambda: [hand_render(stamp, 20, "jax.compile", fields) for _ in range(lines)],
           "structlog chain (_logs.render)",
           lambda: [_logs.render(stamp, 20, "jax.compile", fields) for _ in range(lines)],
           lines, rounds)

    batch = [(stamp, 20, "jax.compile", fields, None)] * 64
    json_emitter = _logs.JsonLogEmitter(_Null())

    def write_default() -> None:
        for _ in range(lines // 64):
            json_emitter._write(batch)

    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars,
                    structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(_Null()),
        cache_logger_on_first_use=True)
    try:
        with structlog.contextvars.bound_contextvars(run_id="run-42", host="worker-3",
                                                     job="pretrain", attempt=1):
            context = contextvars.copy_context()
        app_emitter = _app_structlog.StructlogEmitter()
        app_batch = [(stamp, 20, "jax.compile", fields, context)] * 64

        def write_app() -> None:
            for _ in range(lines // 64):
                app_emitter._write(app_batch)

        per_batch = lines // 64 * 64
        print("(b, c) the writer thread, per line of a 64-line batch")
        paired("default JSON line to a stream (b)",
               lambda: write_default(), "the app's structlog chain, in context (c)",
               lambda: write_app(), per_batch, rounds)
        assert app_emitter.dropped == 0 and json_emitter.dropped == 0
    finally:
        structlog.reset_defaults()

    print("(d) the compiling thread: capturing the context for log_output='structlog'")
    with structlog.contextvars.bound_contextvars(run_id="run-42", host="worker-3",
                                                 job="pretrain", attempt=1):
        calls = lines * 50

        def capture(fn: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                for _ in range(calls):  # nothing kept: no allocation build-up, no GC passes
                    fn()
            return run

        best = min(per_line(capture(contextvars.copy_context), calls) for _ in range(rounds))
        gets = min(per_line(capture(structlog.contextvars.get_contextvars), calls)
                   for _ in range(rounds))
    print(f"  contextvars.copy_context()                   {best * 1e9:7.0f} ns/compile (best)")
    print(f"  (structlog.contextvars.get_contextvars(), for comparison: {gets * 1e9:.0f} ns)")


if __name__ == "__main__":
    main()
