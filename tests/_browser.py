"""Headless Chromium driven over the DevTools protocol on a pipe (standard library only).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages from its fd 3 and
writes them to its fd 4, each one JSON text ended by a NUL byte.  :class:`Browser` opens one
page, records what the page logged (console calls, uncaught exceptions, log entries such as
a Content Security Policy violation) and every network request it made, and answers
``evaluate`` and ``screenshot``.  Every wait is bounded.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome",
              "google-chrome-stable")


def find_chromium() -> str | None:
    """The Chromium binary to run, or ``None``."""
    for name in CANDIDATES:
        path = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


#: How long Chromium may take to start and answer its first call.
STARTUP_TIMEOUT_S = 180.0


class Browser:
    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="otel_jax-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium's ends, moved to fds >= 10 so that the shell below can put them on 3 and
        # 4 in either order; a shell does the wiring because a preexec_fn would run Python
        # in a forked child of a multithreaded process (JAX's), which can deadlock.
        theirs = []
        for fd in (to_chrome_r, from_chrome_w):
            theirs.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
            os.close(fd)
        read_end, write_end = theirs
        args = [shutil.which("bash") or "/bin/bash", "-c",  # dash reads only fds 0-9
                f'exec "$@" 3<&{read_end} 4>&{write_end} {read_end}<&- {write_end}>&-', "sh",
                binary, "--headless", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--mute-audio",
                "--hide-scrollbars", "about:blank"]
        # stderr to a file: Chromium logs plenty, and a full pipe would block it
        self._stderr = open(os.path.join(self._profile.name, "stderr.log"), "w+b")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, pass_fds=tuple(theirs))
        for fd in theirs:
            os.close(fd)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.console: list[str] = []
        self.requests: list[str] = []
        try:
            # The first answer comes once Chromium has started: on a busy 2-core machine
            # that alone can take longer than a call's usual bound.
            target = self.call("Target.createTarget", {"url": "about:blank"},
                               timeout=STARTUP_TIMEOUT_S)["targetId"]
            self.session = self.call("Target.attachToTarget",
                                     {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable", session=True)
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1,
                       "mobile": False}, session=True)
        except BaseException:
            self.close()
            raise

    # -- protocol --------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from Chromium in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                self._stderr.seek(0)
                err = self._stderr.read().decode(errors="replace")
                raise BrowserError(f"Chromium closed the pipe: {err[-2000:]}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            self._event(message)
        return message

    def _event(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        method, params = message["method"], message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console.append(" ".join(str(a.get("value", a.get("description")))
                                         for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(str(details.get("exception", {}).get("description")
                                    or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = False, timeout: float = 60.0) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def wait_for(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        for message in self.events:
            if message["method"] == method:
                return message
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("method") == method:
                return message

    # -- page ------------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Load ``path`` and wait until its load event fired."""
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"],
                              "height": min(size["height"], 16000), "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def element_screenshot(self, element_id: str, path: Path) -> None:
        """A PNG of the element with this id only, wherever it is on the page."""
        box = self.evaluate(f"""(() => {{
            const r = document.getElementById({json.dumps(element_id)}).getBoundingClientRect();
            return {{x: r.left + window.scrollX, y: r.top + window.scrollY,
                    width: r.width, height: r.height}};
        }})()""")
        data = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {**box, "scale": 1}}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self._send({"id": 0, "method": "Browser.close"})
                except OSError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_chrome, self._from_chrome):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._stderr.close()
            self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
