"""Reading otel_jax's JSON log lines: one bounded line at a time, parsed fast.

Each line is read with ``readline(MAX_LINE_BYTES)``, so a corrupt log with a gigantic
line never sits in memory whole; an over-long line is read on in chunks with every JSON
string cut short (:func:`_condense`), so one huge field does not cost the event.  A
substring test sorts compile and divergence lines from the rest before anything is
parsed, and orjson parses them when it is installed (:func:`_loads`).  The field readers
(:func:`_seconds`, :func:`_text`, :func:`_is_rank`) turn what a line holds into values the
aggregate can trust, whatever the line says.

Standard library and the vocabulary only: the report runs where only a log is.
"""

from __future__ import annotations

import json
import re
from typing import IO, Any, Protocol

from .._core._vocab import EVENT_COMPILE, EVENT_DIVERGENCE, Field


def event_marker(event: str) -> bytes:
    """The bytes every line of the event ``event`` holds (its ``"event"`` value as JSON
    writes it): a cheap substring test done before parsing, since most lines of a mixed
    log are other events and a substring search is far cheaper than parsing."""
    return json.dumps(event).encode()


_COMPILE_MARKER = event_marker(EVENT_COMPILE)
_DIVERGENCE_MARKER = event_marker(EVENT_DIVERGENCE)

#: Longest line read whole; a longer one is read on in chunks with its strings cut short
#: (:func:`_condense`), never held in memory whole, so a corrupt log cannot exhaust memory.
MAX_LINE_BYTES = 1 << 20

#: Length caps for strings kept from the log (bounds memory per entry): names, file paths,
#: rendered diffs, hints and causes, argument paths.
_MAX_NAME = 200
_MAX_FILE = 400
_MAX_DIFF = 240
_MAX_HINT = 400
_MAX_PATH = 120

#: Bytes kept of each JSON string of an over-long line (the report keeps far less).
MAX_FIELD_BYTES = 16 * 1024
_STRING_STOP = re.compile(rb'["\\]')
_ELLIPSIS = b"..."


_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


def _drop_high_surrogate(out: list[bytes]) -> int:
    """Drop the escape of a surrogate pair's first half kept just before a cut (alone it is
    no character); the bytes dropped."""
    if out and len(out[-1]) == 6 and _HIGH_SURROGATE.fullmatch(out[-1]):
        return len(out.pop())
    return 0


def _condense(first: bytes, readline: Any, limit: int) -> bytes | None:
    """The over-long line that starts with ``first``, read on with ``readline(limit)`` to its
    end, with every JSON string longer than :data:`MAX_FIELD_BYTES` cut short (at a character
    boundary, never inside an escape, marked ``...``).  ``None`` when even that is longer
    than ``limit`` (a huge array, not text).  Memory stays within about ``2 * limit``."""
    out: list[bytes] = []
    size = 0
    in_str = skipping = False
    kept = 0
    carry = b""
    chunk: bytes = first
    while True:
        last = not chunk or chunk.endswith(b"\n")
        buf = carry + chunk if carry else chunk
        carry = b""
        pos, end = 0, len(buf)
        while pos < end:
            if not in_str:
                j = buf.find(b'"', pos)
                piece = buf[pos:] if j < 0 else buf[pos:j + 1]
                out.append(piece)
                size += len(piece)
                if j < 0:
                    break
                in_str, skipping, kept, pos = True, False, 0, j + 1
                continue
            m = _STRING_STOP.search(buf, pos)
            stop = end if m is None else m.start()
            if not skipping and stop > pos:
                room = MAX_FIELD_BYTES - kept
                if stop - pos > room:
                    cut = pos + room
                    while cut > pos and buf[cut] & 0xC0 == 0x80:  # inside a UTF-8 sequence
                        cut -= 1
                    if cut == pos:
                        size -= _drop_high_surrogate(out)
                    out += (buf[pos:cut], _ELLIPSIS)
                    size += cut - pos + 3
                    skipping = True
                else:
                    out.append(buf[pos:stop])
                    size += stop - pos
                    kept += stop - pos
            if m is None:
                break
            if buf[stop] == 0x22:  # the closing quote
                out.append(b'"')
                size += 1
                in_str, pos = False, stop + 1
                continue
            need = 6 if buf[stop + 1:stop + 2] == b"u" else 2
            if stop + need > end and not last:  # an escape split across chunks
                carry = buf[stop:]
                break
            if not skipping:
                if kept + need > MAX_FIELD_BYTES:
                    size -= _drop_high_surrogate(out)
                    out.append(_ELLIPSIS)
                    size += 3
                    skipping = True
                else:
                    out.append(buf[stop:stop + need])
                    size += need
                    kept += need
            pos = stop + need
        if size > limit:  # not text that cutting strings can shrink: drain, then give up
            while not last:
                chunk = readline(limit)
                last = not chunk or chunk.endswith(b"\n")
            return None
        if last:
            return b"".join(out)
        chunk = readline(limit)


def _loads() -> Any:
    """``json.loads``, or with orjson installed (the extra ``otel_jax[report]``) orjson's,
    three times faster, falling back to ``json.loads`` for what orjson refuses (``NaN``,
    ``Infinity``, invalid text).  One difference is left: orjson reads an integer past 64
    bits as a float, which the report then rejects as mistyped (a count, a line number)
    where the standard library's int would be used."""
    try:
        import orjson
    except ImportError:
        return json.loads
    fast, error, slow = orjson.loads, orjson.JSONDecodeError, json.loads

    def loads(line: bytes) -> Any:
        try:
            return fast(line)
        except error:
            return slow(line)

    return loads


class Sink(Protocol):
    """What :func:`read_lines` feeds: the aggregate (:class:`._aggregate.Report`)."""

    def add(self, ev: dict[str, Any]) -> None:
        """One parsed ``jax.compile`` event."""

    def add_divergence(self, ev: Any) -> None:
        """One parsed ``jax.compile.divergence`` event; raises on one it cannot use."""

    def add_other(self, line: bytes) -> bool:
        """Any other line: ``True`` when it was used, else it counts as skipped."""


def read_lines(stream: IO[bytes], sink: Sink) -> int:
    """Feed a binary stream of log lines, one JSON object per line, to ``sink``; the number
    of lines skipped (not JSON, not an event the sink takes, or a value no check foresaw).

    Reads with ``readline(MAX_LINE_BYTES)`` so even a corrupt log with a gigantic line is
    processed in bounded memory.
    """
    readline = stream.readline
    loads = _loads()
    marker = _COMPILE_MARKER
    limit = MAX_LINE_BYTES
    add, add_divergence, add_other = sink.add, sink.add_divergence, sink.add_other
    skipped = 0
    while True:
        line = readline(limit)
        if not line:
            break
        if len(line) >= limit and not line.endswith(b"\n"):
            # Over-long line: read on chunk by chunk, every JSON string cut short, so
            # an event with one huge field still counts, in bounded memory.
            condensed = _condense(line, readline, limit)
            if condensed is None:
                skipped += 1
                continue
            line = condensed
        if marker not in line:
            if _DIVERGENCE_MARKER in line:
                try:
                    add_divergence(loads(line))
                except Exception:  # bad JSON, or a value no check foresaw
                    skipped += 1
            elif line.strip() and not add_other(line):
                skipped += 1
            continue
        try:
            event = loads(line)
        except (ValueError, RecursionError):  # bad JSON/UTF-8, deep nesting
            skipped += 1
            continue
        if type(event) is not dict or event.get(Field.EVENT) != EVENT_COMPILE:
            skipped += 1
            continue
        try:
            add(event)
        except Exception:  # a value no check above foresaw: skip the line, never crash
            skipped += 1
    return skipped


#: What a compressed log is read to, at most: ``MAX_EXPANSION`` times its own size in bytes
#: (an otel_jax log compresses some 10-80 times: each line has its own ids, times and
#: durations), and a line per ``MIN_COMPRESSED_PER_LINE`` bytes of it; never less than the
#: floors, so that a small log is always read whole. A few megabytes that expand to
#: gigabytes (of blank lines, say, each one a turn of the reader's loop) are read to these
#: bounds, in seconds, and the report says what it left unread.
MAX_EXPANSION = 256
MIN_COMPRESSED_PER_LINE = 2
#: Longest line of a compressed log read on: past it the log reads as ended. otel_jax writes
#: no line near it (its reprs are bounded); a line longer is a bomb (gigabytes of one byte,
#: no newline), and reading to its end would cost seconds per gigabyte while the report
#: could keep nothing of it (it keeps at most :data:`MAX_LINE_BYTES` of a line).
MAX_COMPRESSED_LINE_BYTES = 16 * MAX_LINE_BYTES
FLOOR_BYTES = 64 << 20
FLOOR_LINES = 100_000


class Decompressed:
    """A decompressed log read no further than its bounds (see :data:`MAX_EXPANSION`): past
    them it reads as ended, and :attr:`stopped` says so. A line begun when a bound is
    reached is read to its end, so that no line is cut by a bound, unless the line itself
    is past :data:`MAX_COMPRESSED_LINE_BYTES` or the bytes bound: then the log ends inside
    it (:attr:`cut_line`, the bytes read of it), and the reader skips it as unreadable."""

    def __init__(self, raw: IO[bytes], compressed_bytes: int) -> None:
        self._raw = raw
        self.compressed_bytes = compressed_bytes
        self.max_bytes = max(FLOOR_BYTES, MAX_EXPANSION * compressed_bytes)
        self.max_lines = max(FLOOR_LINES, compressed_bytes // MIN_COMPRESSED_PER_LINE)
        self.bytes = 0
        self.lines = 0
        self.stopped = False
        self._in_line = False  # the last read ended inside a line
        self._line_bytes = 0  # bytes read of the line the last read ended inside
        #: Bytes read of the line the log was stopped inside; 0 when stopped between lines.
        self.cut_line = 0

    def _past(self) -> bool:
        if self.stopped:
            return True
        if self._in_line:
            # Inside a line the bytes bound holds too, and a line is no longer than
            # MAX_COMPRESSED_LINE_BYTES: gigabytes without a newline are not read to their end.
            if (self._line_bytes >= MAX_COMPRESSED_LINE_BYTES
                    or self.bytes >= self.max_bytes + MAX_LINE_BYTES):
                self.stopped = bool(self._raw.peek(1))  # type: ignore[attr-defined]
                self.cut_line = self._line_bytes if self.stopped else 0
        elif self.bytes >= self.max_bytes or self.lines >= self.max_lines:
            self.stopped = bool(self._raw.peek(1))  # type: ignore[attr-defined]
            self._in_line = not self.stopped  # at the end: nothing is left to stop before
        return self.stopped

    def _count(self, data: bytes) -> None:
        self.bytes += len(data)
        newlines = data.count(b"\n")
        self.lines += newlines
        if newlines:
            self._line_bytes = len(data) - data.rindex(b"\n") - 1
        else:
            self._line_bytes += len(data)
        self._in_line = bool(data) and not data.endswith(b"\n")

    def readline(self, size: int = -1) -> bytes:
        if self._past():
            return b""
        line = self._raw.readline(size)
        self._count(line)
        return line

    def read(self, size: int = -1) -> bytes:
        if self._past():
            return b""
        room = self.max_bytes - self.bytes
        data = self._raw.read(room if size < 0 or size > room > 0 else size)
        self._count(data)
        return data

    def peek(self, size: int = 0) -> bytes:
        return b"" if self._past() else bytes(self._raw.peek(size))  # type: ignore[attr-defined]

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> Decompressed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def said(self, name: str) -> str:
        """What was left unread, in one line (``name``: the file, printable)."""
        if self.cut_line:
            return (f"stopped reading {name} inside line {self.lines + 1}, after "
                    f"{self.cut_line} bytes of it without a newline ({self.bytes} bytes "
                    f"decompressed from {self.compressed_bytes} bytes), that line skipped and "
                    f"the rest unread: a line of a compressed log is read to "
                    f"{MAX_COMPRESSED_LINE_BYTES >> 20} MiB at most, and the log to "
                    f"{MAX_EXPANSION} times its size")
        return (f"stopped reading {name} after {self.lines} lines ({self.bytes} bytes) "
                f"decompressed from {self.compressed_bytes} bytes, the rest unread: a "
                f"compressed log is read to {MAX_EXPANSION} times its size and to a line per "
                f"{MIN_COMPRESSED_PER_LINE} bytes of it (at least {FLOOR_BYTES >> 20} MiB "
                f"and {FLOOR_LINES} lines)")


def open_log(path: str) -> IO[bytes]:
    """The log file at ``path`` as a binary stream (``.gz`` decompressed as it is read, no
    further than :class:`Decompressed`'s bounds)."""
    if path.endswith(".gz"):
        import gzip
        import os

        size = os.path.getsize(path)
        return Decompressed(gzip.open(path, "rb"), size)  # type: ignore[arg-type,return-value]
    return open(path, "rb")


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading an opened log may raise when the file is unreadable or corrupt."""
    import zlib

    # OSError: unreadable, or not gzip (gzip.BadGzipFile); EOFError: truncated .gz;
    # zlib.error: corrupt compressed data.
    return (OSError, EOFError, zlib.error)


def _is_rank(value: Any) -> bool:
    """A process index as JAX numbers them (not a bool, not negative)."""
    return type(value) is int and value >= 0


#: Longest duration taken from a log field (about 116 days); larger values are
#: corrupt and ignored, so that sums stay finite.
_MAX_SECONDS = 1e7


def _seconds(v: Any) -> float | None:
    """A usable duration from a log field: a finite number in ``[0, _MAX_SECONDS]``.
    (``json.loads`` accepts ``NaN``/``Infinity`` and integers of any size, and bools
    are ints; all are rejected.)"""
    if type(v) is float or type(v) is int:
        if 0 <= v <= _MAX_SECONDS:  # NaN fails the comparison; no float() of a huge int
            return float(v)
    return None


def _text(v: Any, limit: int) -> str | None:
    """A non-empty string field, truncated to ``limit`` characters."""
    if v is None or v == "":
        return None
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."
