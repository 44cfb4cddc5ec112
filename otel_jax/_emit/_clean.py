"""Bad-text cleaning of batches: a record whose text cannot be encoded is dropped, not sent.

A lone surrogate in a span, log record or metric point would make the OTLP exporter fail
the whole batch; such records are taken out (one warning for the process) and the rest
is exported, with the breaker left closed. Its own module: pure walks over the SDK's
records, with no state beyond the warning said once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .._core._failopen import Topic, emit, once
from ._health import _UNITS

# --- bad records ------------------------------------------------------------------------------

_RECORD_FIELDS = ("name", "attributes", "events", "links", "status", "description", "body",
                  "event_name", "severity_text", "log_record", "resource",
                  "instrumentation_scope", "version", "schema_url")


def _bad_text(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _has_bad_text(value: Any, depth: int = 0, seen: dict[int, bool] | None = None) -> bool:
    """Whether ``value`` (a record, mapping, sequence or string) holds text no exporter
    can encode. Resources and scopes shared by a batch are checked once (``seen``)."""
    if isinstance(value, str):
        return _bad_text(value)
    if value is None or isinstance(value, (bool, int, float, bytes)) or depth > 6:
        return False
    if isinstance(value, Mapping):
        return any((isinstance(k, str) and _bad_text(k)) or _has_bad_text(v, depth + 1, seen)
                   for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_bad_text(v, depth + 1, seen) for v in value)
    if seen is not None:
        key = id(value)
        if key in seen:
            return seen[key]
    bad = False
    for name in _RECORD_FIELDS:
        try:
            field = getattr(value, name, None)
        except Exception:
            continue
        if field is not None and not callable(field) and _has_bad_text(field, depth + 1, seen):
            bad = True
            break
    if seen is not None:
        seen[id(value)] = bad
    return bad


def _split_bad(batch: Sequence[Any]) -> tuple[list[Any], int]:
    seen: dict[int, bool] = {}
    good = [item for item in batch if not _has_bad_text(item, 0, seen)]
    return good, len(batch) - len(good)


def _clean_metrics(data: Any) -> tuple[Any, int]:
    """``data`` without the data points (or metrics) whose text cannot be encoded."""
    seen: dict[int, bool] = {}
    if not _has_bad_text_metrics(data, seen):
        return data, 0
    dropped = 0
    resource_metrics = []
    for rm in data.resource_metrics:
        if _has_bad_text(rm.resource, 0, seen):
            dropped += sum(_points(m) for sm in rm.scope_metrics for m in sm.metrics)
            continue
        scope_metrics = []
        for sm in rm.scope_metrics:
            if _has_bad_text(sm.scope, 0, seen):
                dropped += sum(_points(m) for m in sm.metrics)
                continue
            metrics = []
            for m in sm.metrics:
                if any(_has_bad_text(getattr(m, f, None)) for f in ("name", "description", "unit")):
                    dropped += _points(m)
                    continue
                points = m.data.data_points
                good = [p for p in points if not _has_bad_text(p.attributes)]
                if len(good) != len(points):
                    dropped += len(points) - len(good)
                    m = dataclasses.replace(m, data=dataclasses.replace(m.data, data_points=good))
                metrics.append(m)
            scope_metrics.append(dataclasses.replace(sm, metrics=metrics))
        resource_metrics.append(dataclasses.replace(rm, scope_metrics=scope_metrics))
    return dataclasses.replace(data, resource_metrics=resource_metrics), dropped


def _has_bad_text_metrics(data: Any, seen: dict[int, bool]) -> bool:
    for rm in data.resource_metrics:
        if _has_bad_text(rm.resource, 0, seen):
            return True
        for sm in rm.scope_metrics:
            if _has_bad_text(sm.scope, 0, seen):
                return True
            for m in sm.metrics:
                if any(_has_bad_text(getattr(m, f, None)) for f in ("name", "description", "unit")):
                    return True
                if any(_has_bad_text(p.attributes) for p in m.data.data_points):
                    return True
    return False


def _points(metric: Any) -> int:
    try:
        return len(metric.data.data_points)
    except Exception:
        return 1


def metric_points(data: Any) -> int:
    try:
        return sum(_points(m) for rm in data.resource_metrics for sm in rm.scope_metrics
                   for m in sm.metrics)
    except Exception:
        return 1


def _bad_records(signal: str, n: int, detail: str = "") -> None:
    if once(Topic.BAD_RECORDS):
        emit(f"otel_jax: dropped {n} {_UNITS.get(signal, signal)} whose text cannot be encoded "
             f"(e.g. a lone surrogate in a string{detail}); the rest of the telemetry is "
             "exported. Later bad records are dropped without a warning.")
