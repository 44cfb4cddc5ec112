"""From JAX's compile events to one ``CompileRecord`` per backend compile.

Data flows one way: JAX event -> signature -> cause diff -> record -> sinks
(span, metrics, log line, test recorders). Everything here runs inside JAX's
monitoring listeners, synchronously on the compiling thread, where an
exception would surface in the user's jit call: every step is guarded, and a
failure degrades the explanation (``unknown`` at worst) and warns once.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from itertools import islice
from typing import Any

from . import _diff, _jax_hooks, _signature
from ._hints import hint_for
from ._history import CompileEntry, History
from ._record import PHASES, CompileRecord, Phase
from ._source import (
    FunctionInfo,
    find_user_function,
    find_user_function_in_closure,
    function_info,
    is_jax_file,
    is_library_file,
    name_from_event,
    owner_info,
    qualname_at,
    user_callsite,
)
from ._text import safe_repr

Sink = Callable[[CompileRecord], None]

_logger = logging.getLogger("otel_jax")
_MAX_PENDING_PHASES = 64
_PHASE_KEY = {_jax_hooks.TRACE_EVENT: "trace_s", _jax_hooks.LOWER_EVENT: "lower_s"}
_PHASE_NAME = dict(PHASES)
_PLACEHOLDERS = frozenset({"<unknown>", "<unnamed function>", "<unnamed wrapped function>"})
_ON_RECOMPILE = ("log", "warn", "raise")


class OtelJaxWarning(RuntimeWarning):
    """otel_jax could not do part of its work; the user's program is unaffected."""


class RecompileError(RuntimeError):
    """A recompile after warm-up, raised when installed with ``on_recompile="raise"``."""

    def __init__(self, record: CompileRecord) -> None:
        self.record = record
        super().__init__(
            f"{record.function.qualname} recompiled after warm-up (compile "
            f"#{record.count}, cause {record.cause_kind}: {record.cause}). "
            f"Hint: {record.hint}")


class Engine:
    """Owns JAX's hooks while anything consumes compile records, and builds them."""

    def __init__(self) -> None:
        self.history = History()
        self.storm_threshold = 8
        self.on_recompile = "log"
        self.internal_errors = 0
        self._warmup_done = False
        self._warmup_steps: int | None = None
        self._steps = 0
        self._sinks: list[Sink] = []
        self._storm_sink: Callable[[dict[str, Any]], None] | None = None
        self._lock = threading.RLock()
        self._tls = threading.local()
        self._hooks: _jax_hooks.Hooks | None = None
        self._warned: set[str] = set()
        self._device_cache: dict[str, Any] = {}

    # --- lifecycle -------------------------------------------------------------

    def add_sink(self, sink: Sink, *, first: bool = False) -> None:
        """Start delivering records to ``sink``; hooks JAX on the first one."""
        with self._lock:
            self._sinks = [sink, *self._sinks] if first else [*self._sinks, sink]
            if self._hooks is None:
                hooks = _jax_hooks.Hooks(self._on_time_span, self._on_event)
                hooks.install()
                self._hooks = hooks
                if not hooks.captures_signatures:
                    self.warn_once(
                        "no-capture",
                        "otel_jax: this JAX version does not call jax._src.pjit._infer_params "
                        "and _run_python_pjit on a dispatch miss; compiles are still reported, "
                        "but recompile causes will be 'unknown' (signatures cannot be "
                        "captured).")

    def remove_sink(self, sink: Sink) -> None:
        """Stop delivering to ``sink``; unhooks JAX when no sink is left."""
        with self._lock:
            self._sinks = [s for s in self._sinks if s is not sink]
            if not self._sinks and self._hooks is not None:
                self._hooks.uninstall()
                self._hooks = None

    def set_storm_sink(self, sink: Callable[[dict[str, Any]], None] | None) -> None:
        self._storm_sink = sink

    # --- warm-up -----------------------------------------------------------------

    def configure_warmup(self, steps: int | None) -> None:
        with self._lock:
            self._warmup_steps = steps
            self._steps = 0
            self._warmup_done = False

    def step(self) -> None:
        with self._lock:
            self._steps += 1
            if self._warmup_steps is not None and self._steps >= self._warmup_steps:
                self._warmup_done = True

    def mark_warmup_done(self) -> None:
        self._warmup_done = True

    # --- failure handling ----------------------------------------------------------

    def warn_once(self, key: str, message: str) -> None:
        """One clear warning per kind of problem; never raises into the caller."""
        if key in self._warned:
            return
        self._warned.add(key)
        try:
            warnings.warn(message, OtelJaxWarning, stacklevel=3)
        except Exception:  # warnings turned into errors must not reach JAX
            _logger.warning(message)

    def _internal_error(self, where: str, exc: BaseException) -> None:
        self.internal_errors += 1
        _logger.debug("otel_jax internal error in %s", where, exc_info=exc)
        self.warn_once(
            f"internal:{where}:{type(exc).__name__}",
            f"otel_jax: internal error in {where} ({type(exc).__name__}: "
            f"{safe_repr(str(exc), 200)}); the jit call is unaffected and the compile is "
            "reported with the best explanation available.")

    # --- JAX listeners -----------------------------------------------------------

    def _on_event(self, event: str, **kwargs: Any) -> None:
        try:
            if event == _jax_hooks.CACHE_HIT_EVENT:
                self._tls.cache_hit = True
            elif event == _jax_hooks.CACHE_WRITE_EVENT:
                self._tls.cache_written = True
        except Exception as exc:
            self._internal_error("event listener", exc)

    def _on_time_span(self, event: str, start: float, end: float, **kwargs: Any) -> None:
        if event not in _jax_hooks.PHASE_EVENTS:
            return
        try:
            name = str(kwargs.get("fun_name", "?"))
            if event != _jax_hooks.BACKEND_COMPILE_EVENT:
                pending = getattr(self._tls, "phases", None)
                if pending is None:
                    pending = self._tls.phases = []
                if len(pending) >= _MAX_PENDING_PHASES:
                    del pending[: _MAX_PENDING_PHASES // 2]
                pending.append((event, name, start, end))
                return
            record, storm = self._build_record(name, start, end)
        except Exception as exc:
            self._internal_error("compile listener", exc)
            return
        self._deliver(record)
        if storm is not None:
            self._warn_storm(storm)
        self._enforce_policy(record)

    # --- building the record --------------------------------------------------------

    def _take_phases(self, name: str, since: float) -> dict[str, Phase]:
        """This compile's trace and lower phases: same function, not before its miss began.

        A trace without a compile (``jax.eval_shape``, ``.trace()``) leaves a
        phase behind; ``since`` keeps it from being taken for a later compile.
        """
        pending = getattr(self._tls, "phases", None) or []
        self._tls.phases = []
        wanted = {_jax_hooks.TRACE_EVENT: name_from_event(name), _jax_hooks.LOWER_EVENT: name}
        found: dict[str, Phase] = {}
        for event, fun_name, start, end in reversed(pending):
            key = _PHASE_KEY[event]
            if key not in found and wanted[event] == fun_name and start >= since:
                found[key] = Phase(_PHASE_NAME[key], start, end)
        return found

    def _take_miss(self, name: str) -> _jax_hooks.Miss | None:
        miss = _jax_hooks.current_miss()
        if miss is None:
            return None
        event_fun = name_from_event(name)
        # Some JAX versions name partials and callable objects "<unknown>" or
        # "<unnamed wrapped function>".
        if event_fun != _jax_hooks.event_name(miss.fun) and event_fun not in _PLACEHOLDERS:
            return None  # a compile this miss did not cause (e.g. an eager op inside)
        _jax_hooks.clear_miss()
        return miss

    def _build_record(self, name: str, start: float, end: float,
                      ) -> tuple[CompileRecord, dict[str, Any] | None]:
        """The record of one backend compile, and the storm warning it triggers, if any."""
        cache_hit = getattr(self._tls, "cache_hit", False)
        cache_written = getattr(self._tls, "cache_written", False)
        self._tls.cache_hit = self._tls.cache_written = False
        cache_in_use = _jax_hooks.persistent_cache_enabled()
        miss = self._take_miss(name)
        # Without a miss (AOT compile of an earlier lowering, moved internals) any
        # phase of this function seen in the last minute is taken as its own.
        phases = self._take_phases(name, miss.started if miss is not None else start - 60.0)
        phases["backend_compile_s"] = Phase("jax.backend_compile", start, end)
        info, stands_for = self._function_info(miss, name)
        eager = miss is not None and self._is_eager(miss, info)
        signature = self._capture_signature(miss, stands_for)

        count, earlier = self.history.begin(info)
        kind, cause, diff, compared = self._cause(info, count, earlier, signature)
        record = CompileRecord(
            function=info, count=count, cause_kind=kind, cause=cause, diff=diff,
            signature=signature,
            start=min(p.start for p in phases.values()), end=end, phases=phases,
            callsite=self._callsite(), eager_op=eager,
            persistent_cache_hit=cache_hit if cache_in_use else None,
            persistent_cache_written=cache_written if cache_in_use else None,
            hint=hint_for(kind, transformed=bool(signature.transform)),
            compared_with=compared,
        )
        record.after_warmup = self._warmup_done and not eager
        self._fill_devices(record, miss)
        if cache_in_use and not cache_hit and not cache_written:
            record.persistent_cache_skip_reason = _jax_hooks.persistent_cache_skip_reason(
                phases["backend_compile_s"].seconds, record.process_index)
        entry = CompileEntry(
            count=count, cause_kind=kind, cause=cause,
            diff=tuple(c.as_dict() for c in diff.changes),
            compile_s=record.compile_s, trace_s=record.phase_seconds("trace_s"),
            lower_s=record.phase_seconds("lower_s"),
            backend_compile_s=record.phase_seconds("backend_compile_s"),
            callsite=record.callsite, timestamp=record.start,
            persistent_cache_hit=record.persistent_cache_hit,
            _signature=signature,
        )
        fh = self.history.finish(info, count, signature, entry, kind, record.is_recompile)
        storm = None
        if (record.is_recompile and not eager and not fh.storm_warned
                and fh.recompiles >= self.storm_threshold):
            fh.storm_warned = True
            storm = self._storm_event(record, fh.recompiles, dict(fh.causes))
        return record, storm

    def _function_info(self, miss: _jax_hooks.Miss | None, name: str,
                       ) -> tuple[FunctionInfo, Any | None]:
        """What names the compile, and the user's function a library's one stands for.

        The second is set when a library jits a function of its own that closes
        over the user's (``jax.pmap``): the user's function object, not the
        library's per-call one, is the identity that matters.
        """
        if miss is None:
            return FunctionInfo(name_from_event(name)), None
        try:
            fun = self._jitted_function(miss)
            if fun is None:  # a transformed program known only by its jaxpr
                return self._jaxpr_info(miss.fun), None
            statics = () if miss.transformed else (
                v for _, v in _jax_hooks.static_arguments(miss))
            return self._named_function(fun, statics)
        except Exception as exc:
            self._internal_error("function name", exc)
            return FunctionInfo(name_from_event(name)), None

    @staticmethod
    def _jitted_function(miss: _jax_hooks.Miss) -> Any | None:
        """The jitted function behind a miss: for a transformed program, the one that
        bound it when that call is still running (vmap), else ``None``."""
        return getattr(miss.fun, "origin", None) if miss.transformed else miss.fun

    @staticmethod
    def _named_function(fun: Any, statics: Any) -> tuple[FunctionInfo, Any | None]:
        info = function_info(fun)
        if info.file is None or not is_library_file(info.file):
            return info, None
        user = find_user_function(statics)
        if user is not None:
            return function_info(user), None
        # Only JAX's own wrappers (pmap, vectorize): another library's function
        # may close over user callbacks it merely calls (an optax schedule),
        # which would be the wrong name.
        user = find_user_function_in_closure(fun) if is_jax_file(info.file) else None
        if user is not None:
            return function_info(user), user
        return owner_info(fun) or info, None

    @staticmethod
    def _jaxpr_info(fun: Any) -> FunctionInfo:
        """Name and site of a transformed program, from its jaxpr's ``"f at file:line"``."""
        name = str(fun.__name__)
        head, sep, site = (fun.source or "").rpartition(" at ")
        file, colon, line = site.rpartition(":")
        if not (sep and colon and line.isdigit()):
            return FunctionInfo(name)
        name = head or name
        return FunctionInfo(qualname_at(file, int(line), name) or name, file, int(line))

    def _is_eager(self, miss: _jax_hooks.Miss, info: FunctionInfo) -> bool:
        fun = self._jitted_function(miss)
        if fun is None:  # jnp.sum under grad is still one of JAX's own ops
            return info.file is not None and is_jax_file(info.file)
        # A library's jitted function standing for a user's one (jax.pmap's)
        # is named after the user's function and is not an eager op.
        return _jax_hooks.is_eager_op(fun) and (info.file is None or is_library_file(info.file))

    def _capture_signature(self, miss: _jax_hooks.Miss | None, stands_for: Any | None = None,
                           ) -> _signature.Signature:
        if miss is None:
            return _signature.uncaptured()
        try:
            return _signature.from_miss(miss, stands_for)
        except Exception as exc:
            self._internal_error("signature capture", exc)
            return _signature.uncaptured()

    def _cause(self, info: FunctionInfo, count: int,
               earlier: list[tuple[int, _signature.Signature]],
               signature: _signature.Signature,
               ) -> tuple[str, str, _diff.Diff, int | None]:
        empty = _diff.Diff((), 0)
        if count == 1:
            return _diff.FIRST_COMPILE, f"first compilation of {info.qualname}", empty, None
        if not signature.captured:
            return (_diff.UNKNOWN, "signature not captured for this compile (no jit dispatch "
                    "miss seen: a compile JAX started without a jit call, or JAX internals "
                    "that moved)", empty, None)
        if not earlier:
            return (_diff.UNKNOWN, f"compile #{count} of {info.qualname}, but no earlier "
                    "signature is kept to compare with", empty, None)
        try:
            index, old = _diff.closest([s for _, s in earlier], signature)  # type: ignore[misc]
            d = _diff.diff(old, signature)
        except Exception as exc:
            self._internal_error("cause diff", exc)
            return (_diff.UNKNOWN, f"cause diff failed ({type(exc).__name__}); compared "
                    f"{len(earlier)} earlier signatures", empty, None)
        compared = earlier[index][0]
        if not d.changes:
            return (_diff.UNKNOWN, f"same signature as compile #{compared} (arguments, static "
                    "arguments, pytree, tracing context, jit options and function object all "
                    "equal): likely a cache eviction (jax.clear_caches(), clear_cache())",
                    d, compared)
        return d.kind, _diff.describe(d), d, compared

    def _callsite(self) -> str | None:
        try:
            return user_callsite(skip=3)
        except Exception as exc:
            self._internal_error("callsite", exc)
            return None

    def _fill_devices(self, record: CompileRecord, miss: _jax_hooks.Miss | None) -> None:
        try:
            devices: set[Any] = set()
            if miss is not None:
                for value in islice(miss.args_flat, 256):  # one mesh is enough to see
                    sharding = getattr(value, "sharding", None)
                    if sharding is not None:
                        devices.update(sharding.device_set)
            if not devices:
                devices = {self._default_device()}
            device = min(devices, key=lambda d: getattr(d, "id", 0))
            record.device_platform = str(getattr(device, "platform", "unknown"))
            record.device_kind = str(getattr(device, "device_kind", "unknown"))
            record.device_count = len(devices)
            record.process_index = self._process_index()
        except Exception as exc:
            self._internal_error("device info", exc)

    def _default_device(self) -> Any:
        device = self._device_cache.get("default")
        if device is None:
            import jax

            device = self._device_cache["default"] = jax.devices()[0]
        return device

    def _process_index(self) -> int:
        index = self._device_cache.get("process_index")
        if index is None:
            import jax

            index = self._device_cache["process_index"] = int(jax.process_index())
        return int(index)

    # --- delivery ---------------------------------------------------------------------

    def _deliver(self, record: CompileRecord) -> None:
        for sink in list(self._sinks):
            try:
                sink(record)
            except Exception as exc:
                self._internal_error(f"sink {getattr(sink, '__name__', type(sink).__name__)}",
                                     exc)

    def _storm_event(self, record: CompileRecord, recompiles: int,
                     causes: dict[str, int]) -> dict[str, Any]:
        return {
            "function": record.function.qualname,
            "file": record.function.file,
            "line": record.function.line,
            "recompiles": recompiles,
            "threshold": self.storm_threshold,
            "causes": {k: v for k, v in causes.items() if k != _diff.FIRST_COMPILE},
            "last_cause": record.cause,
            "hint": record.hint,
        }

    def _warn_storm(self, event: dict[str, Any]) -> None:
        """One WARNING naming the function and the causes seen so far (then keeps counting)."""
        sink = self._storm_sink
        try:
            if sink is not None:
                sink(event)
                return
        except Exception as exc:
            self._internal_error("storm warning", exc)
        _logger.warning(
            "%s recompiled %d times (threshold %d); causes so far: %s; last: %s",
            event["function"], event["recompiles"], self.storm_threshold, event["causes"],
            event["last_cause"])

    def _enforce_policy(self, record: CompileRecord) -> None:
        if not (record.after_warmup and record.is_recompile):
            return
        if self.on_recompile == "raise":
            raise RecompileError(record)
        if self.on_recompile == "warn":
            warnings.warn(str(RecompileError(record)), OtelJaxWarning, stacklevel=2)


ENGINE = Engine()

