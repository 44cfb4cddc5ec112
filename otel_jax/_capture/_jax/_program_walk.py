"""The lowered program read op by op: how many operations, which of the user's source lines
made them, the constants baked into it; and XLA's cost analysis of the compiled program.

Its own module: it walks JAX's MLIR module through the ``jaxlib.mlir`` Python bindings
(``Operation.regions``/``blocks``/``operations``, ``Location`` with its ``is_a_*`` kinds and
``filename``/``start_line``/``callee``/``caller``/``child_loc``/``locations``) and reads
``LoadedExecutable.cost_analysis()``. Source locations come as JAX writes them: a name
(the op's name stack, ``jit(f)/while/body/mul``) around a call-site chain of the user's
frames, innermost first (``callsite("body"("a.py":4:12) at "f"("a.py":9:8))``), or a
fused location; JAX keeps its own frames out of that chain, a wrapper library's stay in
it, and the op is put on the innermost frame the ``is_user`` test accepts.

Checked on JAX 0.8.0, 0.10.2 and 0.12.x (the oldest, default and newest test venvs).
Bounded: the walk stops after ``MAX_OPS`` operations (the count is then "at least"); each
distinct location is resolved once, its chain followed 64 deep at most. Measured (JAX
0.10.2, a loaded 2-core CPU): 21,002 operations in 0.1-0.2 s of the thread that makes the
record. Fallback, decided by what fails: bindings
without the ``Location`` kinds leave the counts without lines; a walk that raises gives
no walk (``None``); a cost analysis the backend does not give (or that raises) gives no
flops or bytes. Never a number that was not read.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._core._where import jax_call

#: The most operations walked: a program past it is said to have at least this many.
MAX_OPS = 250_000
#: Constants kept, largest first (each with its line and type).
MAX_CONSTANTS = 8
#: A constant smaller than this is not kept one by one (only counted in the total).
CONSTANT_MIN_BYTES = 1024
#: Distinct locations (and files) whose resolution is kept.
MAX_LOCATIONS = 65_536
#: The name-stack words of a loop XLA runs (the body of a scan or fori_loop).
_LOOP_WORDS = ("while", "scan")

#: An op repeating this many times at one place is code repeated (a loop unrolled).
MIN_REPEAT = 16

#: ``file:line`` of the user's frame an op is put on ("" when none is known).
Line = str
#: By line: (its ops repeated ``MIN_REPEAT`` times or more, the most repeats, that op).
Repeats = tuple[int, int, str]

_CONSTANT_OPS = frozenset({"stablehlo.constant", "mhlo.constant", "arith.constant"})
_ELEMENT = re.compile(r"^(?:tensor<)?(?:(?P<dims>(?:[0-9?]+x)*)(?P<type>[a-z]+[0-9]*|"
                      r"complex<[a-z]+[0-9]*>))>?$")
_BITS = re.compile(r"([0-9]+)")


@dataclass(frozen=True, slots=True)
class Constant:
    """One constant baked into the program: its size, type and the user's line."""

    line: Line
    nbytes: int
    type: str  # ``f32[1000,64]``


@dataclass(frozen=True, slots=True)
class ProgramWalk:
    """What one walk of a lowered program found (plain data)."""

    ops: int  # operations walked (every nested region's too)
    complete: bool  # False: the walk stopped at ``MAX_OPS``: the program has at least ``ops``
    by_line: dict[Line, int]  # ops by the user's line ("" for ops with no user line)
    #: by line: its ops whose place (chain, name stack, op name) repeats ``MIN_REPEAT``
    #: times or more, the most times one place repeats (the passes of a loop unrolled
    #: there; 1 for code written once) and that op's name
    repeats: dict[Line, Repeats]
    #: by line: the ops there inside a loop XLA runs (a scan or fori_loop body)
    in_loops: dict[Line, int]
    constant_bytes: int  # all the constants' bytes (a splat counts one element)
    constants: tuple[Constant, ...]  # the largest, largest first


class _Resolver:
    """Locations resolved to the user's line and the op's place, each distinct one once.
    The bindings make a new ``Location`` object at each read, hashed by identity; its
    attribute (``loc.attr``) hashes and compares as MLIR uniques it (checked on jaxlib
    0.8.0 and 0.10.2), so equal locations share one entry."""

    def __init__(self, is_user: Callable[[str], bool]) -> None:
        self.is_user = is_user
        self.user_files: dict[str, bool] = {}
        self.seen: dict[Any, tuple[Line, Any, bool]] = {}
        self.broken = False  # the bindings' locations could not be read

    def __call__(self, loc: Any) -> tuple[Line, Any, bool]:
        """(the user's line, the op's place: its whole chain and name stack, in a loop)."""
        try:
            key = loc.attr
            return self.seen[key]
        except KeyError:
            pass
        except Exception:  # no attribute, or one that does not hash: resolved each time
            key = None
        found = self._resolve(loc)
        if key is not None:
            # the location itself is the op's place: equal ones are one place
            found = (found[0], key, found[2])
            if len(self.seen) >= MAX_LOCATIONS:
                self.seen.clear()
            self.seen[key] = found
        return found

    def _resolve(self, loc: Any) -> tuple[Line, Any, bool]:
        names: list[str] = []
        frames: list[tuple[str, int, int]] = []
        if not self.broken:
            try:
                _flatten(loc, names, frames, 0)
            except Exception:  # locations read another way: the counts, without lines
                self.broken = True
                names, frames = [], []
        line = ""
        for file, number, _ in frames:
            user = self.user_files.get(file)
            if user is None:
                if len(self.user_files) >= MAX_LOCATIONS:
                    self.user_files.clear()
                user = self.user_files[file] = bool(file) and self.is_user(file)
            if user:
                line = f"{file}:{number}"
                break
        looped = any(w in part.split("/") for part in names for w in _LOOP_WORDS)
        return line, (tuple(names), tuple(frames)), looped


#: The kinds of location by their class in the bindings that give each its own (jaxlib
#: 0.10: ``NameLoc``...); older ones give one ``Location`` with ``is_a_name()``...
_KINDS = {"NameLoc": "name", "CallSiteLoc": "callsite", "FileLineColLoc": "file",
          "FusedLoc": "fused", "UnknownLoc": ""}


def _kind(loc: Any) -> str:
    kind = _KINDS.get(type(loc).__name__)
    if kind is not None:
        return kind
    for name in ("name", "callsite", "file", "fused"):
        test = getattr(loc, f"is_a_{name}", None)
        if test is not None and test():
            return name
    return ""


def _flatten(loc: Any, names: list[str], frames: list[tuple[str, int, int]],
             depth: int) -> None:
    """The frames of ``loc``, innermost first, and the names around them."""
    if depth > 64:
        return
    kind = _kind(loc)
    if kind == "name":
        names.append(str(loc.name_str))
        _flatten(loc.child_loc, names, frames, depth + 1)
    elif kind == "callsite":
        _flatten(loc.callee, names, frames, depth + 1)
        _flatten(loc.caller, names, frames, depth + 1)
    elif kind == "file":
        frames.append((str(loc.filename), int(loc.start_line), int(loc.start_col)))
    elif kind == "fused":
        for inner in loc.locations:
            _flatten(inner, names, frames, depth + 1)
            if frames:
                break


def _constant(op: Any) -> tuple[int, str] | None:
    """A constant's bytes (a splat: one element's) and its type, as ``f32[2,3]``."""
    try:
        text = str(op.result.type)
    except Exception:
        return None
    match = _ELEMENT.match(text)
    if match is None:
        return None
    dims = [d for d in (match["dims"] or "").split("x") if d]
    if any(not d.isdigit() for d in dims):
        return None
    element = match["type"]
    bits = _BITS.search(element)
    width = int(bits.group(1)) if bits else 8
    if element.startswith("complex"):
        width *= 2
    count = math.prod(int(d) for d in dims)
    try:
        splat = bool(op.attributes["value"].is_splat)
    except Exception:
        splat = False
    nbytes = max(1, (width + 7) // 8) * (1 if splat else count)
    kind = re.sub(r"complex<([a-z]+[0-9]*)>", r"c\1", element)
    return nbytes, f"{kind}[{','.join(dims)}]"


def _first_use(operation: Any) -> Any:
    """The first operation using ``operation``'s result (``None``: none, or bindings
    without ``Value.uses``)."""
    try:
        for use in operation.result.uses:
            return use.owner
    except Exception:
        pass
    return None


@jax_call
def walk_program(module: Any, is_user: Callable[[str], bool],
                 max_ops: int = MAX_OPS) -> ProgramWalk | None:
    """Walk ``module`` (a lowered MLIR module), at most ``max_ops`` operations; each op is
    put on the innermost frame of its location that ``is_user`` accepts. ``None`` where
    the bindings do not walk (a module or operation API that moved): no count, rather
    than a wrong one."""
    try:
        return _walk(module, _Resolver(is_user), max_ops)
    except Exception:
        return None


def _walk(module: Any, resolve: _Resolver, max_ops: int) -> ProgramWalk:
    by_line: Counter[Line] = Counter()
    places: Counter[tuple[Line, Any, str]] = Counter()
    in_loops: Counter[Line] = Counter()
    constants: list[Constant] = []
    constant_bytes = 0
    ops = 0
    complete = True
    blocks: list[Any] = [module.body]
    while blocks:
        block = blocks.pop()
        for op in block.operations:
            if ops >= max_ops:
                complete = False
                blocks.clear()
                break
            ops += 1
            operation = op.operation
            name = str(operation.name)
            line, place, looped = resolve(operation.location)
            constant = _constant(operation) if name in _CONSTANT_OPS else None
            if constant is not None:
                # JAX puts a constant at the jit call; it comes from the line using it
                # (its own place: a literal repeats with the line using it, not per use)
                used = _first_use(operation)
                if used is not None:
                    used_line, place, _ = resolve(used.location)
                    line = used_line or line
            by_line[line] += 1
            places[(line, place, name)] += 1
            if looped:
                in_loops[line] += 1
            if constant is not None:
                constant_bytes += constant[0]
                if constant[0] >= CONSTANT_MIN_BYTES:
                    constants.append(Constant(line, *constant))
                    if len(constants) > 4 * MAX_CONSTANTS:
                        constants.sort(key=lambda c: -c.nbytes)
                        del constants[MAX_CONSTANTS:]
            for region in operation.regions:
                blocks.extend(region.blocks)
    repeats: dict[Line, Repeats] = {}
    for (line, _, name), n in places.items():
        ops_repeated, most, most_name = repeats.get(line, (0, 0, ""))
        if n >= MIN_REPEAT:
            ops_repeated += n
        if n > most:
            most, most_name = n, name
        repeats[line] = (ops_repeated, most, most_name)
    constants.sort(key=lambda c: -c.nbytes)
    return ProgramWalk(ops, complete, dict(by_line), repeats, dict(in_loops),
                       constant_bytes, tuple(constants[:MAX_CONSTANTS]))


@dataclass(frozen=True, slots=True)
class ProgramCost:
    """XLA's cost analysis of the compiled program (``None``: not given)."""

    flops: float | None = None
    bytes_accessed: float | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


@jax_call
def program_cost(executable: Any) -> ProgramCost | None:
    """XLA's cost analysis of ``executable`` (what JAX's backend-compile entry returned):
    ``flops`` and ``bytes accessed``, or ``None`` where this backend gives none. Older
    jaxlibs give a list of one dict per program: the first is read."""
    read = getattr(executable, "cost_analysis", None)
    if not callable(read):
        return None
    try:
        found = read()
    except Exception:  # UNIMPLEMENTED on this backend, or the call moved
        return None
    if isinstance(found, (list, tuple)):
        found = found[0] if found else None
    if not isinstance(found, dict):
        return None
    cost = ProgramCost(_number(found.get("flops")), _number(found.get("bytes accessed")))
    return None if cost.flops is None and cost.bytes_accessed is None else cost


#: Constants with more elements than this are written elided (``dense_resource<__elided__>``)
#: in a kept program's text: their values never leave the process.
TEXT_ELEMENTS_LIMIT = 16


@jax_call
def program_text(module: Any) -> str | None:
    """The lowered program as text a person reads, with its source locations (MLIR's
    ``get_asm`` with debug information, as ``Lowered.as_text(debug_info=True)``), large
    constants elided; ``None`` where the bindings do not print it."""
    try:
        text = module.operation.get_asm(enable_debug_info=True,
                                        large_elements_limit=TEXT_ELEMENTS_LIMIT)
    except Exception:
        return None
    return text if isinstance(text, str) else None
