"""Headless Chromium driven over its DevTools pipe (`--remote-debugging-pipe`): JSON
messages ended by NUL on file descriptors 3 and 4, so no driver and no WebSocket client
are needed, only Debian's `chromium`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
"""The browser, or None where the machine has none."""

_TO_BROWSER = 3
_FROM_BROWSER = 4

_WAIT_FOR = """new Promise(done => {
  const start = Date.now();
  (function poll() {
    const found = [...document.querySelectorAll(%s)];
    if (found.length) return done(found.map(e => [e.getAttribute("href"), e.textContent]));
    if (Date.now() - start > %d) return done([]);
    setTimeout(poll, 50);
  })();
})"""


class Browser:
    """One headless Chromium with one page, for as long as the `with` block lasts."""

    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._pending = b""
        self._last_id = 0
        self._events: list[str] = []
        """Events the browser sent while a call waited for its reply, by method."""

    def __enter__(self) -> Browser:
        assert CHROMIUM is not None
        child_reads, self._writes = os.pipe()
        self._reads, child_writes = os.pipe()

        def as_devtools_pipe() -> None:
            """In the child: its ends of the pipes on the descriptors Chromium reads."""
            reading, writing = os.dup(child_reads), os.dup(child_writes)
            os.dup2(reading, _TO_BROWSER)
            os.dup2(writing, _FROM_BROWSER)

        self._process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=as_devtools_pipe,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(child_reads)
        os.close(child_writes)
        pages = [t for t in self._call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        self._session = self._call(
            "Target.attachToTarget", targetId=pages[0]["targetId"], flatten=True
        )["sessionId"]
        self._call("Page.enable", self._session)
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=30)
        os.close(self._writes)
        os.close(self._reads)

    def _call(self, method: str, session: str | None = None, **params: Any) -> Any:
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._writes, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            if "method" in reply:
                self._events.append(reply["method"])

    def _receive(self) -> Any:
        while b"\0" not in self._pending:
            chunk = os.read(self._reads, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its DevTools pipe")
            self._pending += chunk
        raw, _, self._pending = self._pending.partition(b"\0")
        return json.loads(raw)

    def open(self, url: str) -> None:
        """Go to `url` and wait until its page has loaded."""
        self._events.clear()
        self._call("Page.navigate", self._session, url=url)
        while "Page.loadEventFired" not in self._events:
            message = self._receive()
            if "method" in message:
                self._events.append(message["method"])

    def wait_for(self, selector: str, *, timeout_ms: int = 15_000) -> list[tuple[str, str]]:
        """Each element matching `selector` on the page (its href and text), as soon as
        there is one; none after `timeout_ms`."""
        expression = _WAIT_FOR % (json.dumps(selector), timeout_ms)
        result = self._call(
            "Runtime.evaluate",
            self._session,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return [(href, text) for href, text in result["result"]["value"]]
