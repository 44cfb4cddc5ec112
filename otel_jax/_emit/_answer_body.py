"""A collector's answer costs at most :data:`MAX_ANSWER_BYTES` of its body.

An OTLP/HTTP answer is a few bytes (an empty ``Export*ServiceResponse``, a partial
success's message, an error status); ``requests`` reads a body whole before the exporter
sees the status, so a collector (or whatever listens on its port) that answers with
100 MB costs the training process 100 MB and more, for every export, and the time to read
it. The observing session (:mod:`._observe`) asks for the body streamed, records the
status as soon as it arrives, and reads the body here, to the cap: the rest is never read
and the connection is closed. What happened to the body is a note on the request's
:class:`~._health.Answer` (``body``), so the warnings say the endpoint answered and how,
never "no answer".
"""

from __future__ import annotations

from typing import Any

from .._core._failopen import Topic, WarnKey, emit, once

#: The most of an answer's body read (decoded); the rest is left unread, its connection
#: closed. An OTLP answer is far smaller; a collector's error page fits.
MAX_ANSWER_BYTES = 64 << 10
_CHUNK = 16 << 10

#: The note on an answer whose status arrived and whose body is being read.
READING = "its body not read to its end"


def over_note() -> str:
    return f"with a body over {MAX_ANSWER_BYTES >> 10} KiB, read no further"


def read_bounded(response: Any) -> str | None:
    """Read the body of ``response`` (a ``requests.Response`` made with ``stream=True``) into
    it, to :data:`MAX_ANSWER_BYTES` at most; ``None`` when it was read whole, else the note
    saying what was cut (the rest unread, the connection closed)."""
    kept = bytearray()
    note: str | None = None
    try:
        for chunk in response.iter_content(_CHUNK):
            room = MAX_ANSWER_BYTES - len(kept)
            if len(chunk) > room:
                kept += chunk[:room]
                note = over_note()
                break
            kept += chunk
    except Exception as exc:  # the body broke off: the status still stands
        note = f"its body broke off ({type(exc).__name__})"
    if note is not None:
        try:
            response.close()  # before the body counts as read: closes the connection
        except Exception:
            pass
    response._content = bytes(kept)
    response._content_consumed = True
    if note is None:
        release = getattr(response.raw, "release_conn", None)
        if release is not None:  # read to its end: the connection goes back to the pool
            try:
                release()
            except Exception:
                pass
    return note


def say_accepted_oversized(url: str, status: str) -> None:
    """An endpoint that accepted a batch answered with a body over the cap: said once per
    endpoint (no failure of an export says it: the batch counts as exported)."""
    endpoint = url.split("/v1/", 1)[0]
    if once(WarnKey(Topic.ANSWER_BODY, endpoint)):
        emit(f"otel_jax: the OTLP endpoint {endpoint} answered {status} {over_note()} "
             f"(an OTLP answer is a few bytes: is a collector listening there?). Each "
             f"answer's body is read to {MAX_ANSWER_BYTES >> 10} KiB at most and its "
             "connection closed; what the endpoint accepted counts as exported.")
