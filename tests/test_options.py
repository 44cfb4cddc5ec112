"""install()'s options, defined once by ``InstallOptions``: the signature, the checks, the
``OTEL_JAX_*`` variables, the instrumentor and the docs all follow it."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import Telemetry, clean_env, pythonpath

import otel_jax
from otel_jax import OtelJaxWarning
from otel_jax._core import _failopen, _vocab
from otel_jax._emit import _logs
from otel_jax._fleet import _ranks
from otel_jax._pipeline import _engine, _policy
from otel_jax._pipeline._engine import ENGINE
from otel_jax._setup._options import OPTION_NAMES, InstallOptions, env_variable

ROOT = Path(__file__).resolve().parent.parent
FIELDS = dataclasses.fields(InstallOptions)


def _installed(**options):
    t = Telemetry()
    otel_jax.uninstall()
    return t, otel_jax.install(tracer_provider=t.tracer_provider,
                               meter_provider=t.meter_provider, **options)


@pytest.fixture(autouse=True)
def _uninstalled(monkeypatch):
    for f in FIELDS:
        if env_variable(f.name):
            monkeypatch.delenv(env_variable(f.name), raising=False)
    _failopen.reset_warnings()
    otel_jax.uninstall()
    yield
    otel_jax.uninstall()


# --- one definition ----------------------------------------------------------------------------

def test_install_parameters_are_the_option_fields_with_their_defaults_and_types():
    params = inspect.signature(otel_jax.install).parameters
    assert tuple(params) == OPTION_NAMES
    for f in FIELDS:
        p = params[f.name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.default == f.default and type(p.default) is type(f.default), f.name
        assert p.annotation == f.type, f.name  # what mypy checks a caller against


def test_the_engine_and_the_cross_rank_check_start_from_the_option_defaults():
    defaults = InstallOptions()
    fresh = _engine.Engine()
    assert fresh.storm_threshold == defaults.storm_threshold == _policy.STORM_THRESHOLD
    assert fresh.on_recompile == defaults.on_recompile
    check = _ranks.CrossRank(_failopen.FailOpen())
    assert check.timeout_s == defaults.divergence_timeout_s == _ranks.DEFAULT_TIMEOUT_S
    # a fresh engine compares nothing until a check is plugged in; otel_jax's import
    # plugs the one install() configures into the process's engine
    assert fresh.cross_rank.on_divergence == "off"
    from otel_jax._setup import _checks

    assert ENGINE.cross_rank is _checks.CROSS_RANK and ENGINE.ledger is _checks.LEDGER


def test_options_are_frozen_and_normalised():
    options = InstallOptions(rank_local=["evaluate", "*.log_images"])
    assert options.rank_local == ("evaluate", "*.log_images")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.storm_threshold = 3  # type: ignore[misc]


class _TracerProviderOnly:
    """A tracer provider given where a logger provider was asked for."""

    def get_tracer(self, *args, **kwargs):
        raise AssertionError("never called")

    def __repr__(self) -> str:
        return "TracerProviderOnly()"


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"log_level": "verbose"}, ValueError), ({"storm_threshold": 0}, ValueError),
    ({"warmup_steps": 2.5}, ValueError), ({"log_output": 42}, ValueError),
    ({"on_recompile": "explode"}, ValueError), ({"on_divergence": "shout"}, ValueError),
    ({"divergence_timeout_s": 0}, ValueError), ({"rank_local": "evaluate"}, ValueError),
    ({"rank_local": 3}, ValueError), ({"ledger_path": True}, ValueError),
    ({"eager_op_spans": "sometimes"}, ValueError), ({"prometheus_port": 70000}, ValueError),
    ({"scrub": "yes"}, TypeError), ({"tracer_provider": 42}, TypeError),
    ({"meter_provider": "prometheus"}, TypeError),
    ({"logger_provider": _TracerProviderOnly()}, TypeError),
], ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else "")
def test_every_path_checks_an_option_alike(kwargs, error):
    name = next(iter(kwargs))
    with pytest.raises(error, match=name) as direct:
        InstallOptions(**kwargs)
    with pytest.raises(error) as through_install:
        otel_jax.install(**kwargs)
    with pytest.raises(error) as through_instrumentor:
        otel_jax.JaxInstrumentor().instrument(**kwargs)
    assert str(direct.value) == str(through_install.value) == str(through_instrumentor.value)
    assert "\n" not in str(direct.value)  # one line, naming the option and what it takes
    assert otel_jax.installation() is None  # nothing half-installed


# --- the instrumentor --------------------------------------------------------------------------

def test_the_instrumentor_takes_every_option():
    t = Telemetry()
    instrumentor = otel_jax.JaxInstrumentor()
    instrumentor.instrument(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                            log_output=t.log, storm_threshold=3, on_divergence="off",
                            divergence_timeout_s=5.0, rank_local=("evaluate",),
                            ledger_path=False, scrub=False, eager_op_spans="always")
    try:
        handle = otel_jax.installation()
        assert handle is not None
        assert ENGINE.storm_threshold == 3
        assert ENGINE.cross_rank.rank_local == ("evaluate",)
        assert ENGINE.cross_rank.timeout_s == 5.0
        assert ENGINE.ledger.setting is False
        assert handle._options == InstallOptions(
            tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
            log_output=t.log, storm_threshold=3, on_divergence="off",
            divergence_timeout_s=5.0, rank_local=("evaluate",), ledger_path=False,
            scrub=False, eager_op_spans="always")
    finally:
        instrumentor.uninstrument()


def test_an_unknown_option_is_an_error_in_the_instrumentor_as_in_install():
    with pytest.raises(TypeError, match="storm_treshold"):
        otel_jax.install(storm_treshold=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="storm_treshold") as caught:
        otel_jax.JaxInstrumentor().instrument(storm_treshold=3)
    assert "storm_threshold" in str(caught.value)  # the options it takes are named
    assert otel_jax.installation() is None


# --- the environment ---------------------------------------------------------------------------

def test_variables_fill_the_options_left_at_their_default():
    environ = {"OTEL_JAX_STORM_THRESHOLD": "3", "OTEL_JAX_LOG_LEVEL": " DEBUG ",
               "OTEL_JAX_RANK_LOCAL": "evaluate, *.log_images", "OTEL_JAX_LOG_OUTPUT": "none",
               "OTEL_JAX_WARMUP_STEPS": "10", "OTEL_JAX_ON_RECOMPILE": "raise",
               "OTEL_JAX_ON_DIVERGENCE": "off", "OTEL_JAX_DIVERGENCE_TIMEOUT_S": "2.5",
               "OTEL_JAX_EAGER_OP_SPANS": "always"}
    options = InstallOptions().with_environment(environ)
    assert (options.storm_threshold, options.log_level, options.rank_local) == (
        3, "debug", ("evaluate", "*.log_images"))
    assert (options.log_output, options.warmup_steps, options.on_recompile) == (
        None, 10, "raise")
    assert (options.on_divergence, options.divergence_timeout_s, options.eager_op_spans) == (
        "off", 2.5, "always")
    # What the program passes wins; the environment's reading leaves the rest alone.
    passed = InstallOptions(storm_threshold=5, log_output="structlog").with_environment(environ)
    assert passed.storm_threshold == 5 and passed.log_output == "structlog"
    assert passed.log_level == "debug"
    assert InstallOptions().with_environment({}) == InstallOptions()


def test_a_bad_variable_warns_once_and_keeps_the_default():
    said: list[tuple[str, str]] = []
    environ = {"OTEL_JAX_STORM_THRESHOLD": "0", "OTEL_JAX_DIVERGENCE_TIMEOUT_S": "soon",
               "OTEL_JAX_LOG_LEVEL": "verbose"}
    options = InstallOptions().with_environment(environ, lambda k, m: said.append((k, m)))
    assert options == InstallOptions()
    assert sorted(k for k, _ in said) == sorted(f"env:{v}" for v in environ)
    [(_, message)] = [s for s in said if "STORM" in s[0]]
    assert "OTEL_JAX_STORM_THRESHOLD='0'" in message and "storm_threshold stays 8" in message


def test_install_reads_the_variables(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_STORM_THRESHOLD", "2")
    monkeypatch.setenv("OTEL_JAX_RANK_LOCAL", "evaluate")
    t, handle = _installed(log_output=Telemetry().log)
    log = handle._options.log_output
    assert ENGINE.storm_threshold == 2 and ENGINE.cross_rank.rank_local == ("evaluate",)

    @jax.jit
    def stormy(x):
        return x + 1

    for n in range(1, 4):
        stormy(jnp.ones(n))
    otel_jax.flush()
    events = [line for line in log.getvalue().splitlines() if _vocab.EVENT_STORM in line]
    assert len(events) == 1 and '"threshold": 2' in events[0]
    # A second install() with the same environment asks for nothing else.
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtelJaxWarning)
        assert otel_jax.install(tracer_provider=t.tracer_provider,
                                meter_provider=t.meter_provider, log_output=log) is handle


def test_install_with_a_bad_variable_warns_and_goes_on(monkeypatch):
    monkeypatch.setenv("OTEL_JAX_ON_RECOMPILE", "explode")
    monkeypatch.setenv("OTEL_JAX_LOG_OUTPUT", "none")
    with pytest.warns(OtelJaxWarning, match="OTEL_JAX_ON_RECOMPILE='explode'") as caught:
        _, handle = _installed()
    assert caught[0].filename == __file__  # points at the install() call
    assert ENGINE.on_recompile == "log"
    assert not [s for s in handle.sinks if isinstance(s, _logs.LogEmitter)]  # none: no lines


def test_the_variables_configure_an_instrumentor_called_with_nothing(tmp_path):
    """What ``opentelemetry-instrument`` does: ``instrument()`` with no argument, in a fresh
    process whose environment says what it wants."""
    script = tmp_path / "zero_code.py"
    script.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        from otel_jax import JaxInstrumentor
        from otel_jax._pipeline._engine import ENGINE

        JaxInstrumentor().instrument()

        @jax.jit
        def step(x):
            return x.sum()

        for n in (1, 2, 3):
            step(jnp.ones(n))
        print("rank_local", ",".join(ENGINE.cross_rank.rank_local))
    """))
    env = clean_env(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                    OTEL_LOGS_EXPORTER="none", OTEL_JAX_STORM_THRESHOLD="2",
                    OTEL_JAX_RANK_LOCAL="evaluate,*.log_images", PYTHONPATH=pythonpath(ROOT))
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(ln) for ln in result.stderr.splitlines() if ln.startswith("{")]
    storms = [ln for ln in lines if ln.get("event") == _vocab.EVENT_STORM]
    field = _vocab.Field
    assert [(s[field.FUNCTION], s[field.THRESHOLD]) for s in storms] == [("step", 2)]
    assert "rank_local evaluate,*.log_images" in result.stdout


# --- the docs ----------------------------------------------------------------------------------

def _shown(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def test_the_docs_api_names_every_option_with_its_default():
    readme = (ROOT / "docs" / "configuration.md").read_text()
    api = readme[readme.index("## `install()`"):]
    block = api[api.index("```python"):api.index("```", api.index("```python") + 3)]
    for f in FIELDS:
        assert f"{f.name}={_shown(f.default)}" in block, f.name


def test_telemetry_md_lists_every_option_its_default_and_variable():
    doc = (ROOT / "docs" / "telemetry.md").read_text()
    section = doc[doc.index("### Options"):doc.index("\n## ", doc.index("### Options"))]
    rows = {m[0]: (m[1], m[2]) for m in re.findall(
        r"^\| `(\w+)` \| `([^`]+)` \| (`[A-Z_]+`|–) \|", section, re.M)}
    assert tuple(rows) == OPTION_NAMES
    for f in FIELDS:
        default, variable = rows[f.name]
        assert default == _shown(f.default), f.name
        assert variable == (f"`{env_variable(f.name)}`" if env_variable(f.name) else "–"), f.name


def test_install_docstring_describes_every_option():
    doc = inspect.getdoc(otel_jax.install) or ""
    args = doc[doc.index("Args:"):doc.index("Raises:")]
    described = set(re.findall(r"^    (\w+(?:, \w+)*):", args, re.M))
    assert {n for entry in described for n in entry.split(", ")} == set(OPTION_NAMES)
