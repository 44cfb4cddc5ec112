"""Bad-text cleaning: records whose text cannot be encoded are taken out of a batch."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

from otel_jax._core import _failopen
from otel_jax._core._failopen import OtelJaxWarning
from otel_jax._emit._clean import (
    _bad_records,
    _clean_metrics,
    _has_bad_text,
    _split_bad,
    metric_points,
)

BAD = "lone \udcff surrogate"


def test_bad_text_is_found_in_strings_mappings_sequences_and_record_fields():
    assert not _has_bad_text("plain") and not _has_bad_text("ünïcode ✓")
    assert _has_bad_text(BAD)
    assert _has_bad_text({"k": [1, ("x", BAD)]})
    assert _has_bad_text({BAD: 1})  # a key too
    assert not _has_bad_text({"k": b"\xff", "n": 1.5, "b": True, "none": None})
    assert _has_bad_text(SimpleNamespace(name="ok", attributes={"a": BAD}))
    assert not _has_bad_text(SimpleNamespace(name="ok", other=BAD))  # not a record field


def test_a_shared_resource_is_checked_once():
    checked = []

    class Resource:
        @property
        def attributes(self):
            checked.append(1)
            return {"a": "fine"}

    resource = Resource()
    records = [SimpleNamespace(name=f"r{i}", resource=resource) for i in range(5)]
    assert _split_bad(records) == (records, 0)
    assert len(checked) == 1


def test_a_batch_keeps_its_good_records():
    good, bad = _split_bad(["a", BAD, "b", {"x": BAD}])
    assert good == ["a", "b"] and bad == 2


def metrics_data():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    counter = MeterProvider(metric_readers=[reader]).get_meter("m").create_counter("c")
    counter.add(1, {"f": "good"})
    counter.add(1, {"f": "bad \udcff"})
    counter.add(1, {"f": "also good"})
    return reader.get_metrics_data()


def test_bad_metric_points_are_taken_out_and_counted():
    data = metrics_data()
    assert metric_points(data) == 3
    cleaned, dropped = _clean_metrics(data)
    assert dropped == 1 and metric_points(cleaned) == 2
    [metric] = [m for rm in cleaned.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics]
    assert sorted(p.attributes["f"] for p in metric.data.data_points) == ["also good", "good"]
    assert _clean_metrics(cleaned) == (cleaned, 0)  # clean data is returned as it is


def test_bad_records_are_said_once():
    _failopen.reset_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _bad_records("logs", 2, "; UnicodeEncodeError")
        _bad_records("logs", 5)
    said = [str(w.message) for w in caught if issubclass(w.category, OtelJaxWarning)]
    assert len(said) == 1 and said[0].startswith("otel_jax: dropped 2 log records whose text")
    assert "UnicodeEncodeError" in said[0]
