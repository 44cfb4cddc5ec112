"""Shared fixtures: real JAX on several CPU devices, otel_jax installed on in-memory exporters."""

from __future__ import annotations

import functools
import io
import json
import os
import socket
import textwrap

# The suite's outcome must not depend on the environment it was started from: a user's
# OpenTelemetry or JAX settings (an OTLP endpoint, JAX_ENABLE_X64, another platform, XLA
# flags) would change what the tests in this process see and what every subprocess they
# start inherits. Only the suite's own variable (where the test servers are) is kept.
#: The platforms the suite runs on, in JAX_PLATFORMS's syntax: the CPU unless this names
#: others (``OTEL_JAX_TEST_PLATFORMS=tpu`` runs it on a TPU, "" on whatever JAX picks). The
#: suite reads what it needs from ``jax.devices()`` and skips, with a reason, what the
#: devices there cannot do (``needs_devices``, ``needs_loopback``).
TEST_PLATFORMS_ENV = "OTEL_JAX_TEST_PLATFORMS"
_platforms = os.environ.get(TEST_PLATFORMS_ENV, "cpu")
for _name in [n for n in os.environ if n.startswith(("OTEL_", "JAX_")) or n == "XLA_FLAGS"]:
    if _name not in ("OTEL_JAX_TOOLS_DIR", TEST_PLATFORMS_ENV):
        del os.environ[_name]
# The programs the tests start run on the CPU wherever the suite runs (one program at a
# time can hold a TPU chip: a second one fails to open it), this process on _platforms.
os.environ["JAX_PLATFORMS"] = "cpu"
# Several CPU devices for the sharding and device-placement tests; must be set
# before JAX starts its backend (it changes only the CPU's backend).
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
# Hazards are off but in the tests marked ``hazards`` (``_hazards_where_marked``, per
# test): off here too, so that a fixture wider than a test (a module's compile records)
# installs otel_jax as the tests around it do.
os.environ["OTEL_JAX_HAZARDS"] = "off"

import jax  # noqa: E402
import pytest  # noqa: E402

if _platforms != "cpu":
    jax.config.update("jax_platforms", _platforms or None)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import otel_jax  # noqa: E402
from otel_jax._core import _failopen  # noqa: E402
from otel_jax._pipeline._engine import ENGINE  # noqa: E402


class FlushingSpanExporter(InMemorySpanExporter):
    """Reads what otel_jax emitted so far: compiles are emitted off the compiling thread."""

    def get_finished_spans(self):  # type: ignore[no-untyped-def]
        otel_jax.flush()
        return super().get_finished_spans()


class FlushingMetricReader(InMemoryMetricReader):
    """Collects after what otel_jax still has to emit (see FlushingSpanExporter)."""

    def get_metrics_data(self):  # type: ignore[no-untyped-def]
        otel_jax.flush()
        return super().get_metrics_data()


class BackendCompiles:
    """Backend compiles counted by JAX's own monitoring event, independently of otel_jax."""

    EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, event: str, duration: float, **kwargs) -> None:
        if event == self.EVENT:
            self.names.append(str(kwargs.get("fun_name", "?")))

    def __enter__(self) -> BackendCompiles:
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc) -> None:
        from jax._src import monitoring

        remove = (getattr(monitoring, "unregister_event_duration_listener", None)
                  or monitoring._unregister_event_duration_listener_by_callback)  # JAX 0.8
        remove(self)


class Telemetry:
    """What one installed otel_jax emitted during a test."""

    def __init__(self) -> None:
        self.exporter = FlushingSpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = FlushingMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.log = io.StringIO()
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self, name_prefix: str = "jax.compile ") -> list:
        otel_jax.flush()  # compiles are emitted off the compiling thread
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(name_prefix)]

    def compiles(self, function: str | None = None, *, eager: bool = False) -> list:
        out = []
        for s in self.spans():
            if s.attributes.get("jax.compile.eager_op") and not eager:
                continue
            if function is None or s.attributes["code.function.name"] == function:
                out.append(s)
        return out

    def last(self, function: str):
        spans = self.compiles(function)
        assert spans, f"no compile span for {function}"
        return spans[-1]

    def log_lines(self) -> list[dict]:
        otel_jax.flush()  # compiles are emitted, and lines written, off the compiling thread
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line.strip()]

    def metric_points(self, name: str) -> list:
        return self.collect_metrics().get(name, [])

    def collect_metrics(self) -> dict[str, list]:
        """All data points by metric name, from one collection (exemplars reset per one)."""
        otel_jax.flush()
        data = self.reader.get_metrics_data()
        out: dict[str, list] = {}
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out


@pytest.fixture
def telemetry():
    otel_jax.uninstall()
    t = Telemetry()
    errors_before = ENGINE.internal_errors
    # Every compile a span, JAX's eager op compiles outside any span included: the tests
    # read each compile's facts from its span (the default leaves those out).
    otel_jax.install(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider,
                     log_output=t.log, eager_op_spans="always")
    try:
        yield t
    finally:
        otel_jax.uninstall()
    t.internal_errors = ENGINE.internal_errors - errors_before


@pytest.fixture
def persistent_cache(tmp_path):
    """JAX's persistent compilation cache on, in this process, for one test."""
    from jax._src import compilation_cache

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    saved = {n: getattr(jax.config, n) for n in names}
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        for n, v in saved.items():
            jax.config.update(n, v)
        compilation_cache.reset_cache()


#: Hazards name recompiles before they happen; most tests recompile on purpose (a new shape
#: per call) and count the warnings and lines they expect: hazards are off there, on in
#: the tests marked ``hazards`` (and in programs those start, through ``clean_env``).
HAZARDS_ENV = "OTEL_JAX_HAZARDS"


@pytest.fixture(autouse=True)
def _hazards_where_marked(request, monkeypatch):
    on = request.node.get_closest_marker("hazards") is not None
    monkeypatch.setenv(HAZARDS_ENV, "on" if on else "off")
    monkeypatch.setattr(ENGINE, "hazards", on)
    yield


@pytest.fixture(autouse=True)
def _no_internal_errors(request):
    """Any otel_jax internal error is a bug, unless the test injects one on purpose."""
    before = ENGINE.internal_errors
    _failopen.reset_warnings()  # each test sees each warning afresh
    yield
    if "injects_errors" not in request.keywords:
        assert ENGINE.internal_errors == before, "otel_jax hit an internal error"


@pytest.fixture
def library_module(tmp_path, monkeypatch):
    """``make(name, source)``: a module in a file otel_jax treats as a wrapper library's."""
    import importlib.util

    from otel_jax._capture import _source

    files: set[str] = set()
    real = _source.is_library_file

    def is_library(filename):
        return filename in files or real(filename)

    monkeypatch.setattr(_source, "is_library_file", is_library)

    def make(name: str, source: str):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        files.add(str(path))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return make


def diff_of(span) -> list[dict]:
    return json.loads(span.attributes["jax.compile.cause.diff"])


def needs_devices(n: int = 2) -> list:
    """This process's devices, or a skip where fewer than ``n`` exist: the CPU has four
    (``XLA_FLAGS`` above), a machine with one accelerator chip has one."""
    devices = jax.devices()
    if len(devices) < n:
        pytest.skip(f"needs {n} devices; {len(devices)} {devices[0].platform} device(s) here "
                    f"({devices[0].device_kind})")
    return devices


def platform() -> str:
    """The platform the suite's JAX computes on (``jax.devices()[0].platform``)."""
    return jax.devices()[0].platform


def accelerator() -> bool:
    """Whether the suite computes on an accelerator rather than the CPU. One program at a time
    can hold a TPU chip: the programs a test starts run on the CPU there (``clean_env``)."""
    return platform() != "cpu"


# --- servers built from their Go modules (scripts/ensure-tools) ----------------------------

from pathlib import Path  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
TOOLS_VERSIONS_FILE = _REPO / "scripts" / "tools.versions"


def tools_versions() -> dict[str, str]:
    """KEY=VALUE pairs of scripts/tools.versions (shared with scripts/ensure-tools)."""
    values = {}
    for line in TOOLS_VERSIONS_FILE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def tools_dir() -> Path:
    """Where scripts/ensure-tools builds the servers; same default as the script."""
    if os.environ.get("OTEL_JAX_TOOLS_DIR"):
        return Path(os.environ["OTEL_JAX_TOOLS_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "otel_jax-tools"


def tool_path(name: str) -> Path:
    """The path of a server binary ("jaeger", "prometheus", "promtool", "victoria-logs"),
    built or not."""
    versions = tools_versions()
    if name == "jaeger":
        return tools_dir() / f"jaeger-{versions['JAEGER_VERSION']}" / "jaeger"
    if name in ("prometheus", "promtool"):
        return tools_dir() / f"prometheus-{versions['PROMETHEUS_VERSION']}" / name
    if name == "victoria-logs":
        return tools_dir() / f"victorialogs-{versions['VICTORIALOGS_VERSION']}" / name
    raise ValueError(name)


def require_tool(name: str) -> str:
    """The binary, or a skip where no Go toolchain could build it, or a failure where Go is
    there and scripts/ensure-tools has not been run."""
    import shutil

    path = tool_path(name)
    if os.access(path, os.X_OK):
        return str(path)
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain: Jaeger v2, Prometheus 3 and VictoriaLogs are built from "
                    "their Go modules by scripts/ensure-tools (`make tools`)")
    pytest.fail(f"{path} is missing: run scripts/ensure-tools (`make tools`), which builds "
                f"it with Go into {tools_dir()}")


@pytest.fixture(scope="session")
def promtool_binary() -> str:
    return require_tool("promtool")


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    return require_tool("prometheus")


@pytest.fixture(scope="session")
def jaeger_binary() -> str:
    return require_tool("jaeger")


@pytest.fixture(scope="session")
def victorialogs_binary() -> str:
    return require_tool("victoria-logs")


# --- helpers of the tests that start processes and servers ------------------------------

@functools.cache
def _no_loopback() -> str:
    """Why no TCP socket on 127.0.0.1 can be opened here ("" where one can): some sandboxed
    accelerator machines allow none at all, not even on the loopback."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
    except OSError as exc:
        return f"no TCP socket can be opened on 127.0.0.1 here ({exc!r})"
    return ""


def needs_loopback() -> None:
    """A skip, with the reason, where the test's servers, receivers or job coordinator (all
    on 127.0.0.1) could not listen."""
    if _no_loopback():
        pytest.skip(_no_loopback())


def loopback_listener() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1 (or a skip: ``needs_loopback``)."""
    needs_loopback()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    return server


def free_port() -> int:
    """A loopback port nothing listens on right now (or a skip: ``needs_loopback``)."""
    with loopback_listener() as s:
        return s.getsockname()[1]


#: What a program a test starts needs beside its own variables to run here: the CPU where
#: this process may hold an accelerator (one program at a time can hold a TPU chip).
CHILD_PLATFORM: dict[str, str] = {} if _platforms == "cpu" else {"JAX_PLATFORMS": "cpu"}


def pythonpath(*first: str | Path) -> str:
    """PYTHONPATH for a program a test starts: ``first`` (the checkout), then this process's
    own PYTHONPATH, where the machine's packages may come from (a TPU host's JAX does)."""
    inherited = os.environ.get("PYTHONPATH")
    return os.pathsep.join([*map(str, first), *([inherited] if inherited else [])])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without OpenTelemetry, JAX and XLA settings, plus ``extra``:
    what a subprocess under test starts from."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "JAX_")) and k != "XLA_FLAGS"}
    if HAZARDS_ENV in os.environ:  # as the test is marked (``_hazards_where_marked``)
        env[HAZARDS_ENV] = os.environ[HAZARDS_ENV]
    env.update(CHILD_PLATFORM)
    env.update(extra)
    return env


# Programs the subprocess tests run: a compile outside otel_jax's own spans, and a storm.
PLAIN_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from opentelemetry import trace

    @jax.jit
    def step(x):
        return x * 2

    with trace.get_tracer("plain").start_as_current_span("control"):
        step(jnp.ones(3))
        step(jnp.ones(4))
""")

STORM_SCRIPT = textwrap.dedent("""
    import sys, time
    import otel_jax
    otel_jax.install(log_output=None)
    import jax, jax.numpy as jnp

    @jax.jit
    def storm_step(x):
        return x.sum()

    deadline = time.time() + float(sys.argv[1])
    n = 1
    while time.time() < deadline:
        storm_step(jnp.ones(n))  # a new shape every call: a recompile storm
        n += 1
        time.sleep(0.2)
""")


# The start of the persistent-cache programs: JAX's persistent cache in argv[1] with its
# write threshold (seconds) in argv[2], otel_jax installed with its JSON lines in ``buf``
# and its metrics in ``reader``. What follows compiles and prints one JSON line.
PERSISTENT_CACHE_PREAMBLE = textwrap.dedent("""
    import io, json, sys, warnings
    warnings.simplefilter("always")
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(sys.argv[2]))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import jax.numpy as jnp
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    import otel_jax

    reader = InMemoryMetricReader()
    buf = io.StringIO()
    otel_jax.install(log_output=buf, meter_provider=MeterProvider(metric_readers=[reader]))
""")


def run_persistent_cache_program(tmp_path: Path, body: str, cache_dir: Path,
                                 min_compile_time: float = 0.0,
                                 env: dict[str, str] | None = None,
                                 timeout: float = 180) -> tuple[dict, str]:
    """Run ``PERSISTENT_CACHE_PREAMBLE + body`` in a fresh process (a restart) against
    ``cache_dir``; its last stdout line as JSON, and its stderr."""
    import subprocess
    import sys

    script = tmp_path / "program.py"
    script.write_text(PERSISTENT_CACHE_PREAMBLE + textwrap.dedent(body))
    out = subprocess.run([sys.executable, str(script), str(cache_dir), str(min_compile_time)],
                         env=clean_env(**(env or {})), capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr
