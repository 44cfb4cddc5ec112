"""Per-function memory of past compiles, bounded however many compiles happen."""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from .._capture._jax._memory import ProgramMemory
from .._capture._signature import Signature
from .._capture._source import FunctionInfo
from .._core._vocab import ENTRY_SIGNATURE, DiffKey, Field
from .._explain._program import ProgramFacts

DEFAULT_SIGNATURES_PER_FUNCTION = 16
DEFAULT_ENTRIES_PER_FUNCTION = 64
#: Functions whose detail (signatures, compile entries, causes) is kept, by default
#: (``install(max_functions=...)``, ``OTEL_JAX_MAX_FUNCTIONS``).
DEFAULT_MAX_FUNCTIONS = 4096
#: Functions whose compile count is kept (an int each), however few keep their detail.
_MAX_COUNTED_FUNCTIONS = 100_000


@dataclass(frozen=True, slots=True)
class CompileEntry:
    """One compilation of a function, as ``otel_jax.compile_history`` returns it."""

    count: int
    cause_kind: str
    cause: str
    diff: tuple[dict[str, str], ...]
    compile_s: float
    trace_s: float | None
    lower_s: float | None
    backend_compile_s: float | None
    callsite: str | None
    timestamp: float
    persistent_cache_hit: bool | None = None
    _signature: Signature | None = field(default=None, repr=False, compare=False)
    #: XLA's memory analysis of the program (what a later recompile's growth is read against)
    _memory: ProgramMemory | None = field(default=None, repr=False, compare=False)
    #: the lowered program's size by line (what a later recompile's growth is read against)
    _program: ProgramFacts | None = field(default=None, repr=False, compare=False)

    @property
    def signature(self) -> dict[str, Any]:
        """Argument paths with types and placements, static arguments, pytree, jit options."""
        if self._signature is None or not self._signature.captured:
            return {}
        return self._signature.as_dict()

    def as_dict(self) -> dict[str, Any]:
        """Everything as plain data (JSON-serialisable)."""
        return {
            Field.COUNT: self.count, Field.CAUSE_KIND: self.cause_kind, Field.CAUSE: self.cause,
            Field.DIFF: list(self.diff), ENTRY_SIGNATURE: self.signature,
            Field.COMPILE_S: self.compile_s, Field.TRACE_S: self.trace_s,
            Field.LOWER_S: self.lower_s, Field.BACKEND_COMPILE_S: self.backend_compile_s,
            Field.CALLSITE: self.callsite, Field.TIMESTAMP: self.timestamp,
            Field.PERSISTENT_CACHE_HIT: self.persistent_cache_hit,
        }

    def __getitem__(self, key: str) -> Any:
        """``entry["cause_kind"]`` reads like ``entry.cause_kind``: plain-data access."""
        if key.startswith("_") or key not in self.as_dict():
            raise KeyError(key)
        return getattr(self, key)

    def _repr_html_(self) -> str:
        """Jupyter's view: the cause, the diff as a before/after table, the durations and
        the signature, every text escaped."""
        e = _html_text
        ms = [f"{name} {v * 1e3:.1f} ms" for name, v in (
            ("compile", self.compile_s), ("trace", self.trace_s), ("lower", self.lower_s),
            ("backend", self.backend_compile_s)) if v is not None]
        out = [f"<div><b>#{self.count}</b> <code>{e(self.cause_kind)}</code>: "
               f"{e(self.cause or '-')}<br><small>{e(' · '.join(ms))}"
               + (f" · at <code>{e(self.callsite)}</code>" if self.callsite else "")
               + (f" · persistent cache {'hit' if self.persistent_cache_hit else 'miss'}"
                  if self.persistent_cache_hit is not None else "") + "</small>"]
        if self.diff:
            keys = (DiffKey.PATH, DiffKey.KIND, DiffKey.BEFORE, DiffKey.AFTER)
            out.append(_html_table(keys, [[d.get(k, "") for k in keys] for d in self.diff]))
        signature = self.signature
        arguments = signature.get("arguments", {})
        statics = signature.get("static_arguments", {})
        if arguments or statics:
            rows = [[path, arg.get("type", ""), arg.get("placement", "")]
                    for path, arg in arguments.items()]
            rows += [[name, f"static = {value}", ""] for name, value in statics.items()]
            out.append(_html_table(("argument", "type", "placement"), rows))
        return "".join(out) + "</div>"

    def __str__(self) -> str:
        lines = [f"#{self.count} {self.cause_kind}: {self.cause or '-'}"
                 f"  ({self.compile_s * 1e3:.1f} ms, at {self.callsite or '?'})"]
        for path, arg in self.signature.get("arguments", {}).items():
            placement = arg["placement"]
            lines.append(f"    {path}: {arg['type']}"
                         + ("" if placement == "uncommitted" else f"  [{placement}]"))
        for name, value in self.signature.get("static_arguments", {}).items():
            lines.append(f"    {name} (static) = {value}")
        return "\n".join(lines)


def _html_text(value: Any) -> str:
    """Text for an HTML page: control characters and bidirectional overrides shown as
    escapes, markup escaped (names and reprs come from user code)."""
    import html

    from .._report._text import printable

    return html.escape(printable(str(value)), quote=True)


def _html_table(header: tuple[str, ...], rows: list[list[Any]]) -> str:
    head = "".join(f"<th style=\"text-align:left\">{_html_text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style=\"text-align:left\"><code>{_html_text(c)}"
                                    "</code></td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class CompileHistory(list[CompileEntry]):
    """The compiles of a function, oldest first (``otel_jax.compile_history``): a list,
    shown in Jupyter as one table row per compile."""

    def _repr_html_(self) -> str:
        if not self:
            return "<p>no compiles recorded</p>"
        rows = []
        for entry in self:
            diff = "; ".join(f"{d.get(DiffKey.PATH, '')}: {d.get(DiffKey.BEFORE, '')} -> "
                             f"{d.get(DiffKey.AFTER, '')}" for d in entry.diff[:4])
            if len(entry.diff) > 4:
                diff += f"; +{len(entry.diff) - 4} more"
            phases = " / ".join("-" if v is None else f"{v * 1e3:.1f}"
                                for v in (entry.trace_s, entry.lower_s, entry.backend_compile_s))
            rows.append([f"#{entry.count}", entry.cause_kind, entry.cause or "-", diff,
                         f"{entry.compile_s * 1e3:.1f}", phases, entry.callsite or "",
                         {None: "", True: "hit", False: "miss"}[entry.persistent_cache_hit]])
        return _html_table(("compile", "cause kind", "cause", "diff", "ms",
                            "trace / lower / backend ms", "call site", "persistent cache"),
                           rows)


@dataclass
class FunctionHistory:
    info: FunctionInfo
    signatures: deque[tuple[int, Signature]]
    entries: deque[CompileEntry]
    causes: Counter[str] = field(default_factory=Counter)
    recompiles: int = 0  # compiles XLA had to redo (persistent-cache hits excluded)
    storm_warned: bool = False


class History:
    """Signatures and compile entries per function key, least recently compiled evicted first.

    Counts live apart from the evictable histories so that
    ``jax.compile.count`` stays exact even after a function's signatures
    were dropped.
    """

    def __init__(self, signatures_per_function: int = DEFAULT_SIGNATURES_PER_FUNCTION,
                 entries_per_function: int = DEFAULT_ENTRIES_PER_FUNCTION,
                 max_functions: int = DEFAULT_MAX_FUNCTIONS) -> None:
        self._lock = threading.RLock()
        self._functions: OrderedDict[tuple[Any, ...], FunctionHistory] = OrderedDict()
        self._counts: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._signatures_per_function = max(1, signatures_per_function)
        self._entries_per_function = max(1, entries_per_function)
        self._max_functions = max(1, max_functions)
        #: Functions whose detail was dropped to keep within ``max_functions`` (the least
        #: recently compiled first), for the process: ``jax.compile.functions_dropped``.
        self.dropped_functions = 0

    @property
    def max_functions(self) -> int:
        return self._max_functions

    def set_max_functions(self, max_functions: int) -> None:
        """Keep the detail of at most ``max_functions`` functions from now on (the least
        recently compiled dropped at once where more are kept)."""
        with self._lock:
            self._max_functions = max(1, max_functions)
            self._evict()

    def _evict(self) -> None:
        while len(self._functions) > self._max_functions:
            self._functions.popitem(last=False)
            self.dropped_functions += 1

    def after_fork(self) -> None:
        """In a forked child: a lock another thread held at the fork is made anew."""
        self._lock = threading.RLock()

    def begin(self, info: FunctionInfo) -> tuple[int, list[tuple[int, Signature]]]:
        """Count one more compile of ``info``; return that count and its earlier signatures.

        Earlier signatures come as ``(count, signature)``, oldest first.
        """
        key = info.key
        with self._lock:
            count = self._counts.pop(key, 0) + 1
            self._counts[key] = count
            if len(self._counts) > _MAX_COUNTED_FUNCTIONS:
                self._counts.popitem(last=False)
            fh = self._functions.get(key)
            earlier = list(fh.signatures) if fh is not None else []
        return count, earlier

    def latest(self, info: FunctionInfo) -> Signature | None:
        """The last kept signature of ``info``, whose parts a new signature may share."""
        with self._lock:
            fh = self._functions.get(info.key)
            return fh.signatures[-1][1] if fh is not None and fh.signatures else None

    def finish(self, info: FunctionInfo, count: int, signature: Signature, entry: CompileEntry,
               cause_kind: str, recompile: bool) -> FunctionHistory:
        """Remember a finished compile; returns the function's history for storm checks."""
        key = info.key
        with self._lock:
            fh = self._functions.pop(key, None)
            if fh is None:
                fh = FunctionHistory(info, deque(maxlen=self._signatures_per_function),
                                     deque(maxlen=self._entries_per_function))
            self._functions[key] = fh
            self._evict()
            if signature.captured:
                fh.signatures.append((count, signature))
            fh.entries.append(entry)
            fh.causes[cause_kind] += 1
            fh.recompiles += recompile
            return fh

    def forget(self, info: FunctionInfo, count: int) -> None:
        """Undo compile ``count`` of ``info`` when it was the last one recorded: a compile
        refused by ``on_recompile="raise"`` did not happen, and its retry is the same
        compile again (same count, same cause), not a recompile of it."""
        key = info.key
        with self._lock:
            if self._counts.get(key) != count:
                return
            self._counts[key] = count - 1
            fh = self._functions.get(key)
            if fh is None:
                return
            if fh.signatures and fh.signatures[-1][0] == count:
                fh.signatures.pop()
            if fh.entries and fh.entries[-1].count == count:
                entry = fh.entries.pop()
                fh.causes[entry.cause_kind] -= 1
                if count > 1 and not entry.persistent_cache_hit:
                    fh.recompiles -= 1

    def memory(self, info: FunctionInfo, count: int) -> ProgramMemory | None:
        """The memory analysis of compile ``count`` of ``info``, while its entry is kept."""
        with self._lock:
            fh = self._functions.get(info.key)
            for entry in reversed(fh.entries if fh is not None else ()):
                if entry.count == count:
                    return entry._memory
            return None

    def program(self, info: FunctionInfo, count: int) -> ProgramFacts | None:
        """The program analysis of compile ``count`` of ``info``, while its entry is kept."""
        with self._lock:
            fh = self._functions.get(info.key)
            for entry in reversed(fh.entries if fh is not None else ()):
                if entry.count == count:
                    return entry._program
            return None

    def entries(self, info: FunctionInfo) -> list[CompileEntry]:
        with self._lock:
            fh = self._functions.get(info.key)
            return CompileHistory(fh.entries) if fh is not None else CompileHistory()

    def entries_by_name(self, qualname: str) -> list[CompileEntry]:
        with self._lock:
            out: list[CompileEntry] = []
            for key, fh in self._functions.items():
                if key[0] == qualname:
                    out.extend(fh.entries)
            return CompileHistory(sorted(out, key=lambda e: e.timestamp))

    def count(self, info: FunctionInfo) -> int:
        with self._lock:
            return self._counts.get(info.key, 0)

    def clear(self) -> None:
        with self._lock:
            self._functions.clear()
            self._counts.clear()
