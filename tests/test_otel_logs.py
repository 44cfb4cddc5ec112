"""The OpenTelemetry log records: one per compile, one per hazard, in the compile's trace."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

try:
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as InMemoryLogExporter
except ImportError:  # older SDKs
    from opentelemetry.sdk._logs.export import InMemoryLogExporter

from conftest import Telemetry

import otel_jax
from otel_jax._core._vocab import EVENT_COMPILE, EVENT_HAZARD, Attr
from otel_jax._emit._otel_logs import EVENT_NAME_FIELD, OtelLogEmitter


@pytest.mark.hazards
def test_compile_and_hazard_records_name_their_event_and_link_the_compile_span():
    otel_jax.uninstall()
    t = Telemetry()
    exporter = InMemoryLogExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     logger_provider=logger_provider, log_output=None)
    try:
        @jax.jit
        def grows(x):
            return x * 2

        for n in (1, 2, 3, 4):  # a length that changes at every compile: a hazard
            grows(jnp.ones(n))
        assert otel_jax.flush(60)
    finally:
        otel_jax.uninstall()
    records = [d.log_record for d in exporter.get_finished_logs()
               if str(d.log_record.attributes.get(Attr.FUNCTION, "")).endswith("grows")]
    spans = {s.context.span_id for s in t.spans()}
    # The event's name is the record's own field (the log data model's EventName), not
    # also the `event.name` attribute that the field replaced.
    assert all(Attr.EVENT_NAME not in r.attributes for r in records)
    compiles = [r for r in records if r.event_name == EVENT_COMPILE]
    hazards = [r for r in records if r.event_name == EVENT_HAZARD]
    assert len(compiles) == 4 and hazards
    for r in compiles:
        assert str(r.body).startswith(f"{EVENT_COMPILE} ") and ".grows: " in str(r.body)
        assert r.severity_text == "INFO" and r.span_id in spans
    for r in hazards:
        assert str(r.body).startswith(f"{EVENT_HAZARD} ") and ": shape: " in str(r.body)
        assert r.severity_text in ("WARN", "INFO") and r.span_id in spans
        assert r.attributes[Attr.FUNCTION].endswith("grows")
        assert r.attributes[Attr.HAZARD_KIND] == "shape"


def test_the_event_name_is_an_attribute_where_the_api_has_no_field_for_it():
    """An API without the log record's own event name (before 1.35) gets the attribute."""
    exporter = InMemoryLogExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = logger_provider.get_logger("tests")
    for field in (True, False):
        OtelLogEmitter(logger, event_name_field=field)._record(
            1.0, None, SeverityNumber.INFO, EVENT_COMPILE, "f: shape: x", {Attr.FUNCTION: "f"})
    with_field, without = (d.log_record for d in exporter.get_finished_logs())
    assert with_field.event_name == EVENT_COMPILE
    assert dict(with_field.attributes) == {Attr.FUNCTION: "f"}
    assert not without.event_name
    assert dict(without.attributes) == {Attr.EVENT_NAME: EVENT_COMPILE, Attr.FUNCTION: "f"}
    # The API installed here has the field, and it is what otel_jax uses.
    assert EVENT_NAME_FIELD is True


@pytest.mark.parametrize("log_level", ["info", "debug"])
def test_eager_op_records_are_sent_only_when_asked_for(log_level):
    """JAX's eager op compiles (DEBUG) reach the log store only with ``log_level="debug"``,
    as the JSON and console lines: the program's own compiles are sent either way."""
    otel_jax.uninstall()
    t = Telemetry()
    exporter = InMemoryLogExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     logger_provider=logger_provider, log_output=None, log_level=log_level,
                     eager_op_spans="always")
    try:
        @jax.jit
        def own(x):
            return x * 2

        # eager ops (a shape no other test uses): JAX compiles them one at a time
        x = jnp.arange(1237.0 + (log_level == "debug")) + 1.5
        own(x)
        assert otel_jax.flush(60)
    finally:
        otel_jax.uninstall()
    compiles = [d.log_record for d in exporter.get_finished_logs()
                if d.log_record.event_name == EVENT_COMPILE]
    eager = [r for r in compiles if r.attributes.get(Attr.EAGER_OP) is True]
    assert [str(r.attributes[Attr.FUNCTION]).rsplit(".", 1)[-1]
            for r in compiles if r not in eager] == ["own"]
    # the eager ops did compile, and are spans as ever
    assert [s for s in t.spans() if s.attributes.get(Attr.EAGER_OP)]
    if log_level == "debug":
        assert eager and all(r.severity_text == "DEBUG" for r in eager)
    else:
        assert eager == []
