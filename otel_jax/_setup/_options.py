"""``install()``'s options, defined once: their defaults, checks and ``OTEL_JAX_*`` variables.

``install()``'s keyword signature, ``JaxInstrumentor().instrument(**options)``, the
environment reading and the documented option list all follow :class:`InstallOptions`:
a field added here is an option everywhere (tests check the signature and the docs
against it).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from .._core import _scrub
from .._core._text import safe_repr
from .._core._vocab import LEDGER_ENV, LOG_FORMAT_ENV, SCRUB_ENV
from .._emit._console import LOG_FORMATS, LogFormat
from .._emit._logs import LOG_OUTPUTS, LogOutput
from .._emit._spans import EAGER_OP_SPANS
from .._fleet._ranks import DEFAULT_TIMEOUT_S, ON_DIVERGENCE
from .._pipeline._history import DEFAULT_MAX_FUNCTIONS
from .._pipeline._policy import ON_RECOMPILE, STORM_THRESHOLD

__all__ = ["InstallOptions", "OPTION_NAMES", "env_variable"]

#: The Prometheus port's variable is OpenTelemetry's own, read with the default providers.
PROMETHEUS_PORT_ENV = "OTEL_EXPORTER_PROMETHEUS_PORT"
_LOG_LEVELS = ("debug", "info", "warning")


# ``SCRUB_ENV`` and ``LEDGER_ENV`` are read where they are used, whenever the option is None
# (the testing kit and the report scrub without install(); the ledger's place is resolved at
# each compile); the others are read here, by install().

# --- checks: a clear error for a mistake in the program, said at once ------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _one_of(name: str, choices: Sequence[str]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in choices:
            raise ValueError(f"{name} must be one of {tuple(choices)}, not {value!r}")
        return value
    return check


def _provider(name: str, kind: str, method: str) -> Callable[[Any], Any]:
    """``None`` (the application's global provider) or an OpenTelemetry provider: an object
    with its ``get_...`` method, whatever its class (the SDK's, a proxy, a wrapper)."""
    def check(provider: Any) -> Any:
        if provider is not None and not callable(getattr(provider, method, None)):
            raise TypeError(f"{name} must be None or an OpenTelemetry {kind} (an object with "
                            f"{method}()), not {safe_repr(provider, 80)}")
        return provider
    return check


def _log_output(out: Any) -> Any:
    if not (out is None or (isinstance(out, str) and out in LOG_OUTPUTS)
            or (not isinstance(out, str) and callable(getattr(out, "write", None)))):
        raise ValueError(f"log_output must be one of {LOG_OUTPUTS}, None or a text stream "
                         f"with a write() method, not {out!r}")
    return out


def _storm_threshold(threshold: Any) -> Any:
    if not _is_int(threshold) or threshold < 1:
        raise ValueError(f"storm_threshold must be an int >= 1 (recompiles of one function "
                         f"before the storm warning), not {threshold!r}")
    return threshold


def _warmup_steps(warmup: Any) -> Any:
    if warmup is not None and (not _is_int(warmup) or warmup < 0):
        raise ValueError(f"warmup_steps must be None or an int >= 0 (otel_jax.step() calls), "
                         f"not {warmup!r}")
    return warmup


def _scrub_rules(scrub: Any) -> Any:
    if not (scrub is None or isinstance(scrub, (bool, _scrub.ScrubRules))):
        raise TypeError(f"scrub must be None, a bool or an otel_jax.ScrubRules, not {scrub!r}")
    return scrub


def _rank_local(local: Any) -> tuple[str, ...]:
    try:
        ok = not isinstance(local, str) and all(isinstance(p, str) and p for p in local)
    except TypeError:  # not iterable
        ok = False
    if not ok:
        raise ValueError("rank_local must be a sequence of function-name patterns "
                         f"(e.g. ('evaluate', '*.log_images')), not {local!r}")
    return tuple(local)


def _divergence_timeout(timeout: Any) -> Any:
    if (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
            or not 0 < float(timeout) <= 3600):
        raise ValueError(f"divergence_timeout_s must be seconds, > 0 and <= 3600, "
                         f"not {timeout!r}")
    return timeout


def _ledger_path(ledger: Any) -> Any:
    if not (ledger is None or isinstance(ledger, (bool, str, os.PathLike))) or ledger is True \
            or (isinstance(ledger, str) and not ledger.strip()):
        raise ValueError(f"ledger_path must be None, False or a file path, not {ledger!r}")
    return ledger


def _flag(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"emit_in_background must be True or False, not {value!r}")
    return value


def _hazards_flag(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"hazards must be True or False, not {value!r}")
    return value


def _max_functions(value: Any) -> Any:
    if not _is_int(value) or value < 1:
        raise ValueError(f"max_functions must be an int >= 1 (functions whose compile detail "
                         f"is kept), not {value!r}")
    return value


def _programs_folder(folder: Any) -> Any:
    if not (folder is None or isinstance(folder, (str, os.PathLike))) or (
            isinstance(folder, str) and not folder.strip()):
        raise ValueError(f"programs must be None or a folder path, not {folder!r}")
    return folder


def _path(raw: str) -> Any:
    return raw.strip() or None


def _prometheus_port(port: Any) -> Any:
    if port is not None and (not _is_int(port) or not 0 <= port <= 65535):
        raise ValueError(f"prometheus_port must be None or an int port number 0-65535, "
                         f"not {port!r}")
    return port


# --- reading a variable: its text to the option's value (then the same check) ---------------

def _text(raw: str) -> Any:
    return raw.strip().lower()


def _output(raw: str) -> Any:
    value = raw.strip()
    return None if value.lower() in ("none", "off", "") else value.lower()


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _bool(raw: str) -> Any:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"not one of {_TRUE + _FALSE}")


def _int(raw: str) -> Any:
    return int(raw.strip())


def _int_or_none(raw: str) -> Any:
    value = raw.strip()
    return None if value.lower() in ("none", "") else int(value)


def _float(raw: str) -> Any:
    return float(raw.strip())


def _patterns(raw: str) -> Any:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def _option(default: Any, check: Callable[[Any], Any], *, env: str | None = None,
            parse: Callable[[str], Any] | None = None, by_identity: bool = False) -> Any:
    """One option: its default, its check, and its variable (``env``: read by install() through
    ``parse`` when set; ``env`` without ``parse``: read where the option is used)."""
    return field(default=default, metadata={
        "check": check, "env": env, "parse": parse, "by_identity": by_identity})


@dataclass(frozen=True)
class InstallOptions:
    """``otel_jax.install()``'s options, checked (see ``install`` for what each does).

    Building one raises ``ValueError`` (``TypeError`` for a provider or ``scrub`` of another
    type) naming the option for a value the program passed that cannot work.
    :meth:`with_environment` fills in the ``OTEL_JAX_*`` variables, for the options left at
    their default; a bad variable never raises (one ``OtelJaxWarning``, the default kept).
    """

    tracer_provider: Any = _option(
        None, _provider("tracer_provider", "TracerProvider", "get_tracer"), by_identity=True)
    meter_provider: Any = _option(
        None, _provider("meter_provider", "MeterProvider", "get_meter"), by_identity=True)
    logger_provider: Any = _option(
        None, _provider("logger_provider", "LoggerProvider", "get_logger"), by_identity=True)
    log_output: IO[str] | LogOutput | None = _option(
        "stderr", _log_output, env="OTEL_JAX_LOG_OUTPUT", parse=_output, by_identity=True)
    log_format: LogFormat = _option("auto", _one_of("log_format", LOG_FORMATS),
                                    env=LOG_FORMAT_ENV, parse=_text)
    log_level: Literal["debug", "info", "warning"] = _option(
        "info", _one_of("log_level", _LOG_LEVELS), env="OTEL_JAX_LOG_LEVEL", parse=_text)
    prometheus_port: int | None = _option(None, _prometheus_port, env=PROMETHEUS_PORT_ENV)
    storm_threshold: int = _option(STORM_THRESHOLD, _storm_threshold,
                                   env="OTEL_JAX_STORM_THRESHOLD", parse=_int)
    warmup_steps: int | None = _option(None, _warmup_steps, env="OTEL_JAX_WARMUP_STEPS",
                                       parse=_int_or_none)
    on_recompile: Literal["log", "warn", "raise"] = _option(
        "log", _one_of("on_recompile", ON_RECOMPILE), env="OTEL_JAX_ON_RECOMPILE", parse=_text)
    scrub: _scrub.ScrubRules | bool | None = _option(None, _scrub_rules, env=SCRUB_ENV)
    on_divergence: Literal["log", "raise", "off"] = _option(
        "log", _one_of("on_divergence", ON_DIVERGENCE), env="OTEL_JAX_ON_DIVERGENCE",
        parse=_text)
    divergence_timeout_s: float = _option(DEFAULT_TIMEOUT_S, _divergence_timeout,
                                          env="OTEL_JAX_DIVERGENCE_TIMEOUT_S", parse=_float)
    rank_local: Sequence[str] = _option((), _rank_local, env="OTEL_JAX_RANK_LOCAL",
                                        parse=_patterns)
    ledger_path: str | os.PathLike[str] | bool | None = _option(None, _ledger_path,
                                                                env=LEDGER_ENV)
    eager_op_spans: Literal["nested", "always"] = _option(
        "nested", _one_of("eager_op_spans", EAGER_OP_SPANS), env="OTEL_JAX_EAGER_OP_SPANS",
        parse=_text)
    emit_in_background: bool = _option(True, _flag, env="OTEL_JAX_EMIT_IN_BACKGROUND",
                                       parse=_bool)
    hazards: bool = _option(True, _hazards_flag, env="OTEL_JAX_HAZARDS", parse=_bool)
    max_functions: int = _option(DEFAULT_MAX_FUNCTIONS, _max_functions,
                                 env="OTEL_JAX_MAX_FUNCTIONS", parse=_int)
    programs: str | os.PathLike[str] | None = _option(None, _programs_folder,
                                                     env="OTEL_JAX_PROGRAMS", parse=_path)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](getattr(self, f.name)))

    def as_dict(self) -> dict[str, Any]:
        """Every option by name (shallow: providers and streams are the objects given)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def with_environment(self, environ: Mapping[str, str] | None = None,
                         warn: Callable[[str, str], object] | None = None) -> InstallOptions:
        """These options, where left at their default, from their ``OTEL_JAX_*`` variable.

        A value a variable cannot give is reported through ``warn(key, message)`` (once
        per variable) and the default kept: nothing read from the environment raises.
        """
        environ = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            parse, env = f.metadata["parse"], f.metadata["env"]
            if parse is None or env is None or not same(f, getattr(self, f.name), f.default):
                continue
            raw = environ.get(env)
            if raw is None or not raw.strip():
                continue
            try:
                changes[f.name] = f.metadata["check"](parse(raw))
            except (ValueError, TypeError) as exc:
                if warn is not None:
                    warn(f"env:{env}", f"otel_jax: {env}={raw!r} is not usable ({exc}); "
                                       f"{f.name} stays {f.default!r}.")
        return dataclasses.replace(self, **changes) if changes else self

    def differing(self, asked: InstallOptions) -> list[str]:
        """The options ``asked`` sets (not left at the default) to other values than these."""
        return [f.name for f in dataclasses.fields(self)
                if not same(f, getattr(asked, f.name), f.default)
                and not same(f, getattr(asked, f.name), getattr(self, f.name))]


def same(f: dataclasses.Field[Any], a: Any, b: Any) -> bool:
    """Whether two values of option ``f`` are the same (providers and streams: the same
    object; never raises on a broken ``__eq__``)."""
    if f.metadata["by_identity"] and not (isinstance(a, str) and isinstance(b, str)):
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return False


#: Every option's name, in install()'s order.
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(InstallOptions))


def env_variable(name: str) -> str | None:
    """The environment variable of option ``name`` (``None``: none)."""
    env: str | None = {f.name: f.metadata["env"]
                       for f in dataclasses.fields(InstallOptions)}[name]
    return env
