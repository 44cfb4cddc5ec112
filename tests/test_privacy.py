"""Secrets never reach telemetry (issue 12, item 3).

A static value's repr is the only user text otel_jax emits (array values never
are). Scrubbing replaces what looks sensitive by ``[scrubbed #xxxx]``; the
digest still tells a changed secret from an unchanged one.
"""

from __future__ import annotations

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

try:
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as InMemoryLogExporter
except ImportError:  # older SDKs
    from opentelemetry.sdk._logs.export import InMemoryLogExporter

from conftest import Telemetry, diff_of

import otel_jax
from otel_jax import ScrubRules, _cli
from otel_jax._core import _scrub
from otel_jax._core._text import safe_repr

SECRET = "sk-live-51HqT2eLxkWq9Zp0aB3cD4eF5gH6iJ7k"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    api_key: str
    lr: float
    layers: int


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    activation: str
    dropout: float
    widths: tuple


def _step(x, cfg):
    return x * cfg.lr * cfg.layers


@pytest.fixture
def full_telemetry():
    """Spans, metrics, the JSON log and OpenTelemetry log records, all in memory."""
    otel_jax.uninstall()
    t = Telemetry()
    t.log_exporter = InMemoryLogExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(t.log_exporter))
    yield t, logger_provider
    otel_jax.uninstall()


def _install(t, logger_provider, **kwargs):
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     logger_provider=logger_provider, log_output=t.log, **kwargs)


def _everything_emitted(t, fn) -> str:
    parts = [json.dumps(dict(s.attributes)) for s in t.spans()]
    parts += [json.dumps(line) for line in t.log_lines()]
    for data in t.log_exporter.get_finished_logs():
        record = getattr(data, "log_record", data)
        parts.append(str(record.body))
        parts.append(json.dumps(dict(record.attributes or {})))
    for entry in otel_jax.compile_history(fn):
        parts.append(str(entry))
        parts.append(json.dumps(entry.signature, default=str) if hasattr(entry, "signature")
                     else "")
        parts.append(json.dumps(entry.as_dict(), default=str) if hasattr(entry, "as_dict")
                     else "")
    return "\n".join(parts)


def test_a_config_secret_reaches_no_signal(full_telemetry, tmp_path):
    t, logger_provider = full_telemetry
    _install(t, logger_provider)
    step = jax.jit(_step, static_argnums=1)
    step(jnp.ones(2), TrainConfig(SECRET, 0.1, 2))
    step(jnp.ones(2), TrainConfig(SECRET, 0.2, 2))
    emitted = _everything_emitted(t, step)
    assert SECRET not in emitted and "sk-live" not in emitted
    span = t.compiles()[-1]
    assert span.attributes["jax.compile.cause.kind"] == "static_argument"
    cause = span.attributes["jax.compile.cause"]
    assert "lr" in cause and "0.1" in cause and "0.2" in cause  # what changed is still told
    (change,) = diff_of(span)
    assert change["path"].endswith("lr")
    # the whole value, as compile_history shows it, has the secret scrubbed
    static = otel_jax.compile_history(step)[-1].signature["static_arguments"]
    assert "api_key=[scrubbed #" in json.dumps(static)
    report = _report_of(t, tmp_path / "compiles.log")
    assert "_step" in report and SECRET not in report


def test_a_changed_secret_is_said_to_change_without_its_value(full_telemetry):
    t, logger_provider = full_telemetry
    _install(t, logger_provider)
    step = jax.jit(_step, static_argnums=1)
    step(jnp.ones(2), TrainConfig(SECRET, 0.1, 2))
    step(jnp.ones(2), TrainConfig(SECRET + "x", 0.1, 2))
    emitted = _everything_emitted(t, step)
    assert SECRET not in emitted and "sk-live" not in emitted
    (change,) = diff_of(t.compiles()[-1])
    assert change["path"].endswith("api_key")
    before = re.search(r"\[scrubbed #(\w+)\]", change["before"])
    after = re.search(r"\[scrubbed #(\w+)\]", change["after"])
    assert before and after and before.group(1) != after.group(1)


def _report_of(t, path) -> str:
    import contextlib
    import io

    otel_jax.flush()
    path.write_text(t.log.getvalue())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _cli.main(["report", str(path)])
    return out.getvalue()


def test_a_changed_secret_shows_as_a_change_without_its_value(telemetry):
    step = jax.jit(_step, static_argnums=1)
    step(jnp.ones(2), TrainConfig(SECRET, 0.1, 2))
    step(jnp.ones(2), TrainConfig(SECRET.replace("51", "77"), 0.1, 2))
    span = telemetry.compiles()[-1]
    (change,) = diff_of(span)
    before = re.search(r"#\w{4}", change["before"]).group()
    after = re.search(r"#\w{4}", change["after"]).group()
    assert before != after
    assert "51Hq" not in json.dumps(change) and "77Hq" not in json.dumps(change)


def test_a_static_argument_with_a_sensitive_name_is_scrubbed_whole(telemetry):
    def connect(x, password):
        return x + len(password)

    f = jax.jit(connect, static_argnames="password")
    f(jnp.ones(2), password="hunter2")
    f(jnp.ones(2), password="hunter3")
    span = telemetry.compiles()[-1]
    text = json.dumps(dict(span.attributes))
    assert "hunter" not in text
    (change,) = diff_of(span)
    assert change["path"] == "password"
    assert change["before"].startswith("[scrubbed #") and change["before"] != change["after"]
    history = otel_jax.compile_history(f)
    assert "hunter" not in str(history) and "hunter" not in json.dumps(
        [e.signature for e in history if hasattr(e, "signature")], default=str)


def test_install_can_switch_scrubbing_off_extend_it_or_hide_every_static_value(
        full_telemetry):
    t, logger_provider = full_telemetry
    step = jax.jit(_step, static_argnums=1)

    def cause_after(rules, lr):
        _install(t, logger_provider, scrub=rules)
        try:
            step(jnp.ones(2), TrainConfig(SECRET, lr, 2))
            # what this compile saw (the earlier side was captured under other rules):
            # the changed field in the cause, the whole value in compile_history
            cause = t.compiles()[-1].attributes["jax.compile.cause"].split(" -> ")[-1]
            static = otel_jax.compile_history(step)[-1].signature["static_arguments"]
            return cause + "\n" + json.dumps(static)
        finally:
            otel_jax.uninstall()

    # values no other test compiles with (JAX would reuse its executable)
    cause_after(None, 1.1)
    assert SECRET in cause_after(False, 1.2)
    extended = cause_after(ScrubRules().extend(names=[r"^lr$"]), 1.3)
    assert "lr=1.3" not in extended and "lr=[scrubbed #" in extended
    assert SECRET not in extended
    hidden = cause_after(ScrubRules(hide_values=True), 1.4)
    assert "lr=" not in hidden and "TrainConfig #" in hidden
    replaced = cause_after(ScrubRules(names=[r"^layers$"], values=[]), 1.5)
    assert SECRET in replaced and "layers=[scrubbed" in replaced
    # back to the defaults once uninstalled
    assert _scrub.active() is not None and SECRET not in safe_repr(SECRET)


def test_the_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_SCRUB", "off")
    _scrub.configure(None)
    try:
        assert safe_repr(SECRET) == repr(SECRET)
        monkeypatch.setenv("OTEL_JAX_SCRUB", "hidden")
        _scrub.configure(None)
        assert safe_repr(TrainConfig("x", 0.1, 2), name="cfg").startswith("<")
    finally:
        monkeypatch.delenv("OTEL_JAX_SCRUB")
        _scrub.configure(None)
    assert "[scrubbed #" in safe_repr(SECRET)


@pytest.mark.parametrize("bad", [
    {"names": "password"}, {"values": [3]}, {"names": ["("]},
])
def test_bad_rules_fail_at_install_not_in_a_compile(bad):
    with pytest.raises((TypeError, re.error)):
        ScrubRules(**bad)
    with pytest.raises(TypeError):
        otel_jax.install(scrub="yes")  # type: ignore[arg-type]
    assert otel_jax.installation() is None


# The fault family "secrets in static values": each shape, in each container.
SECRETS = {
    "openai key": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t",
    "stripe key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "github token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "aws key id": "AKIAIOSFODNN7EXAMPLE",
    "slack token": "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
    "hugging face token": "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "google api key": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "pem private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    "password in a url": "postgres://admin:Tr0ub4dor3@db.internal:5432/app",
    "bearer header": "Authorization: Bearer abcdef0123456789abcdef",
}
SENSITIVE_NAMES = ["password", "api_key", "apiKey", "API-KEY", "secret", "client_secret",
                   "auth", "authorization", "token", "access_token", "hf_token", "cookie",
                   "session_id", "private_key", "credentials", "db_passwd"]
BENIGN = {"max_tokens": 512, "num_tokens": 3, "token_ids": 4, "pad_token": "<pad>",
          "key": 7, "rng_key": 1, "author": "me", "lr": 0.25, "tokenizer": "bpe"}


def _containers(value):
    yield "bare", value
    yield "in a tuple", (1, value)
    yield "in a dict", {"x": value}
    yield "in a dataclass", TrainConfig(value, 0.1, 2)


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_secret_shaped_values_are_scrubbed_anywhere(kind):
    secret = SECRETS[kind]
    core = {"password in a url": "Tr0ub4dor3", "bearer header": "abcdef0123456789abcdef"
            }.get(kind, secret)
    for where, value in _containers(secret):
        text = safe_repr(value, 2000)
        for piece in re.split(r"\W+", core):
            if len(piece) >= 10:
                assert piece not in text, (kind, where, text)
        assert "[scrubbed #" in text, (kind, where, text)


@pytest.mark.parametrize("name", SENSITIVE_NAMES)
def test_values_under_sensitive_names_are_scrubbed(name):
    assert safe_repr("hunter2", name=name).startswith("[scrubbed #")
    assert "hunter2" not in safe_repr({name: "hunter2", "n": 1})
    assert "hunter2" not in safe_repr(f"Cfg({name}='hunter2', n=1)")
    assert "hunter2" not in safe_repr(f"{name}: hunter2")


def test_ordinary_values_are_left_alone():
    text = safe_repr(BENIGN, 2000)
    for key, value in BENIGN.items():
        assert f"{key!r}: {value!r}" in text
    plain = ModelConfig("relu", 0.1, (8, 8))
    assert safe_repr(plain, 2000) == repr(plain)
    assert safe_repr("relu", name="activation") == "'relu'"


def test_a_secret_cut_by_the_length_limit_is_still_scrubbed():
    text = safe_repr({"filler": "x" * 100, "api_key": "A" * 400}, 160)
    assert "AAAAAAAA" not in text
    text = safe_repr("y" * 90 + SECRETS["github token"], 100)
    assert "ghp_16C7" not in text


TOKEN = SECRETS["github token"]


def _record_kit_texts(recorder) -> str:
    return "\n".join(f"{r.cause}\n{r.hint}\n{r.diff.to_json()}\n"
                     + "\n".join(f"{h.path} {h.text} {h.hint}" for h in r.hazards)
                     for r in recorder.records)


def test_a_secret_shaped_key_or_name_is_scrubbed_in_every_path(full_telemetry, tmp_path):
    # A token used as a dict key (an argument path, JAX's own key path), as a static
    # argument's name, and as a key whose entry appears, changes shape and goes away
    # (the diff's tree walk): in no signal, not in compile_history, not in any report.
    t, logger_provider = full_telemetry
    _install(t, logger_provider)

    def total(d):
        return sum(v.sum() for v in d.values())

    def scaled(x, **kw):
        return x * next(iter(kw.values()))

    f = jax.jit(total)
    g = jax.jit(scaled, static_argnames=(TOKEN,))
    with otel_jax.testing.record_compiles() as recorder:
        f({TOKEN: jnp.ones(2), "b": jnp.ones(1)})
        f({TOKEN: jnp.ones(3), "b": jnp.ones(1)})
        f({"b": jnp.ones(1)})
        f({"b": jnp.ones(1), TOKEN: jnp.ones(3)})
        g(jnp.ones(2), **{TOKEN: 2})
        g(jnp.ones(2), **{TOKEN: 3})
    emitted = _everything_emitted(t, f) + _everything_emitted(t, g)
    for entry in [*otel_jax.compile_history(f), *otel_jax.compile_history(g)]:
        emitted += entry._repr_html_()
    emitted += otel_jax.compile_history(f)._repr_html_() + _record_kit_texts(recorder)
    assert "ghp_16C7" not in emitted
    # what changed is still told: the path reads with its key replaced
    causes = [s.attributes["jax.compile.cause"] for s in t.compiles()]
    assert any("['[scrubbed #" in c and "f32[2] -> f32[3]" in c for c in causes), causes
    assert any(c.startswith("[scrubbed #") and "2 -> 3" in c for c in causes), causes
    log = tmp_path / "compiles.log"
    reports = [_report_of(t, log)]
    for fmt in ("json", "markdown", "html"):
        out = tmp_path / f"report.{fmt}"
        assert _cli.main(["report", str(log), "--format", fmt, "-o", str(out)]) == 0
        reports.append(out.read_text())
    for fmt in ("table", "json", "markdown", "html"):
        out = tmp_path / f"diff.{fmt}"
        _cli.main(["diff", str(log), str(log), "--format", fmt, "-o", str(out)])
        reports.append(out.read_text())
    assert all(reports) and "ghp_16C7" not in "\n".join(reports)


@pytest.mark.parametrize("value", ["hiden", "strict", "\x1b[31mred"])
def test_an_unknown_scrub_variable_is_refused_and_the_strictest_rules_apply(
        full_telemetry, monkeypatch, value):
    from otel_jax._core import _failopen

    t, logger_provider = full_telemetry
    monkeypatch.setenv("OTEL_JAX_SCRUB", value)
    _failopen.reset_warnings()
    try:
        # what reads the rules without install() (the testing kit, a report) gets them too
        _scrub.configure(None)
        assert "TrainConfig #" in safe_repr(TrainConfig("x", 0.1, 2), name="cfg")
        with pytest.warns(otel_jax.OtelJaxWarning) as caught:
            _install(t, logger_provider)
        (warning,) = [w for w in caught if "OTEL_JAX_SCRUB" in str(w.message)]
        message = str(warning.message)
        assert "\x1b" not in message and "\n" not in message and "strictest" in message
        step = jax.jit(_step, static_argnums=1)
        step(jnp.ones(2), TrainConfig(SECRET, 3.25, 2))
        static = otel_jax.compile_history(step)[-1].signature["static_arguments"]
        assert "TrainConfig #" in json.dumps(static) and "3.25" not in json.dumps(static)
    finally:
        otel_jax.uninstall()
        monkeypatch.delenv("OTEL_JAX_SCRUB")
        _scrub.configure(None)
        _failopen.reset_warnings()
    assert "0.1" in safe_repr(TrainConfig("x", 0.1, 2), name="cfg")
