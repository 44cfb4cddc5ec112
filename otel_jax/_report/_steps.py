"""What the ``jax.step`` lines of a log add up to: a row per step name, the longest steps
that compiled, and the share of step time spent compiling (:meth:`Steps.summary`).

Bounded like the rest of the report: at most :data:`MAX_STEP_NAMES` step names have rows of
their own, and :data:`MAX_COMPILED_STEPS_LISTED` steps that compiled are listed.
"""

from __future__ import annotations

import heapq
from typing import Any

from .._core._vocab import EVENT_STEP, Field, ReportName
from ._bounded import _Quantiles, _round
from ._read import _MAX_NAME, _seconds, _text, event_marker

_STEP_MARKER = event_marker(EVENT_STEP)
#: Step names given rows of their own; the others share one ``(other)`` row.
MAX_STEP_NAMES = 64
#: The steps that compiled listed in the text report (the longest).
MAX_COMPILED_STEPS_LISTED = 10


class _StepRow:
    """What the ``jax.step`` lines of one step name add up to.

    Every step that compiled is a line; of the others a sample is (about one a second),
    each line counting the steps since the previous one (``steps``, ``steps_s``): so the
    counts and seconds are exact, and the p50/p95 of steps without a compile come from the
    sample.
    """

    __slots__ = ("name", "lines", "steps", "steps_s", "compiled", "compiled_s", "compile_s",
                 "nested", "times")

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines = 0
        self.steps = 0
        self.steps_s = 0.0
        self.compiled = 0  # steps that compiled
        self.compiled_s = 0.0  # their wall time
        self.compile_s = 0.0  # the compile seconds inside them
        self.nested = False  # a part of another step (its seconds are that step's too)
        self.times = _Quantiles()  # the sampled steps that did not compile

    def to_dict(self) -> dict[str, Any]:
        p50 = self.times.quantile(0.5)
        extra = (max(0.0, self.compiled_s - self.compiled * p50) if p50 is not None
                 else None)
        return {"step": self.name, "steps": self.steps, "steps_s": _round(self.steps_s),
                "compiled_steps": self.compiled, "compiled_steps_s": _round(self.compiled_s),
                "compile_s": _round(self.compile_s), "extra_s": _round(extra),
                "p50_s": _round(p50), "p95_s": _round(self.times.quantile(0.95)),
                "nested": self.nested}


class Steps:
    """The ``jax.step`` lines of a log: a row per step name (:class:`_StepRow`) and the
    longest steps that compiled, bounded whatever the length of the log."""

    def __init__(self) -> None:
        self.events = 0
        self.rows: dict[str, _StepRow] = {}
        #: the longest steps that compiled: (seconds, seq, name, number, compile_s, timestamp)
        self.longest: list[tuple[float, int, str, int | None, float, str | None]] = []

    def add(self, ev: dict[str, Any]) -> dict[str, Any] | None:
        """One parsed line; what was read of it (``None``: not a usable step line)."""
        name = _text(ev.get(Field.STEP_NAME), _MAX_NAME)
        seconds = _seconds(ev.get(Field.DURATION_S))
        if name is None or seconds is None:
            return None
        self.events += 1
        row = self.rows.get(name)
        if row is None:
            if len(self.rows) >= MAX_STEP_NAMES:
                name = ReportName.OTHER
                row = self.rows.get(name)
            if row is None:
                row = self.rows[name] = _StepRow(name)
        steps = ev.get(Field.STEPS)
        steps = steps if type(steps) is int and 0 < steps < (1 << 40) else 1
        steps_s = _seconds(ev.get(Field.STEPS_S))
        compiled = ev.get(Field.COMPILED) is True
        compile_s = (_seconds(ev.get(Field.COMPILE_S)) or 0.0) if compiled else 0.0
        nested = ev.get(Field.NESTED) is True
        number = ev.get(Field.STEP_NUMBER)
        number = number if type(number) is int else None
        row.lines += 1
        row.steps += steps
        row.steps_s += steps_s if steps_s is not None and steps_s >= seconds else seconds
        row.nested = row.nested or nested
        if compiled:
            row.compiled += 1
            row.compiled_s += seconds
            row.compile_s += compile_s
            stamp = _text(ev.get(Field.TIMESTAMP), 40)
            item = (seconds, -self.events, row.name, number, compile_s, stamp)
            if len(self.longest) < MAX_COMPILED_STEPS_LISTED:
                heapq.heappush(self.longest, item)
            elif seconds > self.longest[0][0]:
                heapq.heapreplace(self.longest, item)
        else:
            row.times.add(seconds)
        return {"name": row.name, "seconds": seconds, "compiled": compiled,
                "compile_s": compile_s, "nested": nested, "number": number}

    def summary(self) -> dict[str, Any] | None:
        """``steps`` (a row per step name, the most step seconds first), ``compiled``
        (the longest steps that compiled, longest first, each with its extra time over its
        name's p50), and ``share``: compile seconds over step seconds, of the steps that
        are not a part of another (``None`` without step seconds). ``None``: no step line."""
        if not self.events:
            return None
        rows = sorted(self.rows.values(), key=lambda r: (r.nested, -r.steps_s, r.name))
        dicts = [r.to_dict() for r in rows]
        p50 = {d["step"]: d["p50_s"] for d in dicts}
        compiled = [{"step": name, "number": number, "seconds": _round(secs),
                     "compile_s": _round(compile_s), "timestamp": stamp,
                     "extra_s": (_round(max(0.0, secs - p50[name]))
                                 if p50.get(name) is not None else None)}
                    for secs, _, name, number, compile_s, stamp
                    in sorted(self.longest, reverse=True)]
        top = [r for r in rows if not r.nested]
        seconds = sum(r.steps_s for r in top)
        return {"steps": dicts, "compiled": compiled,
                "share": (min(1.0, sum(r.compile_s for r in top) / seconds)
                          if seconds > 0 else None),
                "compile_s": _round(sum(r.compile_s for r in top)),
                "steps_s": _round(seconds)}
