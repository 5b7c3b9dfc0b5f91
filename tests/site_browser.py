"""Helpers for tests/test_site.py: serve the built book locally and drive headless Chromium.

No third-party dependency: the DevTools protocol (CDP) is spoken over ``--remote-debugging-pipe``
(JSON messages separated by NUL bytes on file descriptors 3 and 4 of the browser), so neither
websockets, selenium nor playwright is needed - only a Chromium or Chrome binary.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--hide-scrollbars",
    "--mute-audio",
)


def find_chromium() -> str | None:
    """The browser binary: $CHROMIUM if set, else the usual names on PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# ---------------------------------------------------------------------------------- HTTP server
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        pass


class LocalSite:
    """Serve a folder on 127.0.0.1 on a free port, from a background thread."""

    def __init__(self, root: Path):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def is_local(self, url: str) -> bool:
        """True for this server's own URLs and for data:/blob:/about: URLs (no network)."""
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname == "127.0.0.1" \
            and parts.port == self.port

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------- CDP client
class CDPError(RuntimeError):
    pass


class Browser:
    """Headless Chromium driven through the DevTools protocol over a pipe.

    Every request of every page is intercepted (Fetch domain): requests to ``site`` go through,
    anything else is failed - the network is off for the page - and recorded in ``blocked``.
    """

    def __init__(self, binary: str, site: LocalSite, timeout: float = 30.0):
        self.site = site
        self.timeout = timeout
        self.blocked: list[str] = []
        self._profile = tempfile.mkdtemp(prefix="minitfm-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds():  # the browser reads commands on fd 3 and writes replies on fd 4
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=child_fds,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.call("Browser.getVersion")

    # -- plumbing
    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        with self._lock:
            self._next_id += 1
            message = {"id": self._next_id, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
            return self._next_id

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[-1] = {"error": {"message": "browser closed the pipe"}}
                    self._cond.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if message.get("method") == "Fetch.requestPaused":
                    self._gate(message)
                with self._cond:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._cond.notify_all()

    def _gate(self, message: dict) -> None:
        params, session = message["params"], message.get("sessionId")
        url = params["request"]["url"]
        if self.site.is_local(url):
            self._send("Fetch.continueRequest", {"requestId": params["requestId"]}, session)
        else:
            self.blocked.append(url)
            self._send("Fetch.failRequest", {"requestId": params["requestId"],
                                             "errorReason": "BlockedByClient"}, session)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        call_id = self._send(method, params, session)
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while call_id not in self._replies:
                if -1 in self._replies:
                    raise CDPError(f"{method}: browser exited")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"{method}: no reply within {timeout or self.timeout} s")
                self._cond.wait(left)
            reply = self._replies.pop(call_id)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if event.get("method") == method and event.get("sessionId") == session:
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"no {method} within {timeout or self.timeout} s")
                self._cond.wait(left)

    def events_of(self, session: str, since: int = 0) -> list[dict]:
        with self._cond:
            return [e for e in self.events[since:] if e.get("sessionId") == session]

    # -- pages
    def open(self, url: str, width: int = 1280, height: int = 900) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for method in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            self.call(method, session=session)
        self.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session=session)
        page.set_viewport(width, height)
        page.navigate(url)
        return page

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session
        self.first_event = len(browser.events)

    def navigate(self, url: str) -> None:
        since = len(self.browser.events)
        reply = self.browser.call("Page.navigate", {"url": url}, session=self.session)
        if reply.get("errorText"):
            raise CDPError(f"navigate {url}: {reply['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, since)

    def evaluate(self, expression: str, timeout: float | None = None):
        """Evaluate a JS expression (awaiting a returned promise) and return its JSON value."""
        reply = self.browser.call("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True, "userGesture": True,
        }, session=self.session, timeout=timeout)
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CDPError(f"JS error: {text}")
        return reply["result"].get("value")

    def requests(self) -> list[str]:
        """Every URL the page asked for (documents, scripts, fonts, images, XHR, web sockets)."""
        urls = []
        for event in self.browser.events_of(self.session, self.first_event):
            if event["method"] == "Network.requestWillBeSent":
                urls.append(event["params"]["request"]["url"])
            elif event["method"] == "Network.webSocketCreated":
                urls.append(event["params"]["url"])
        return urls

    def failed_local_responses(self) -> list[str]:
        """Local URLs answered with an HTTP error (missing file) or that failed to load."""
        bad, urls = [], {}
        for event in self.browser.events_of(self.session, self.first_event):
            params = event["params"]
            if event["method"] == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
            elif event["method"] == "Network.responseReceived" and params["response"]["status"] >= 400:
                bad.append(f"{params['response']['status']} {params['response']['url']}")
            elif event["method"] == "Network.loadingFailed" and not params.get("canceled"):
                url = urls.get(params["requestId"], "?")
                if self.browser.site.is_local(url):
                    bad.append(f"{params.get('errorText')} {url}")
        return bad

    def js_errors(self) -> list[str]:
        """Uncaught exceptions and console.error messages of the page."""
        errors = []
        for event in self.browser.events_of(self.session, self.first_event):
            params = event["params"]
            if event["method"] == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        return errors

    def screenshot(self, path: Path, full_page: bool = False, max_height: int = 4000) -> None:
        """Save a PNG of the viewport, or of the page's top ``max_height`` pixels with ``full_page``.

        The full page is shot by making the viewport that tall (a real layout), not with
        captureBeyondViewport, which misplaces the theme's sticky sidebar.
        """
        import base64

        metrics = self.evaluate("[innerWidth, innerHeight, document.documentElement.scrollHeight]")
        width, height, page_height = metrics
        if full_page:
            self.set_viewport(width, min(page_height, max_height))
        try:
            data = self.browser.call("Page.captureScreenshot", {"format": "png"},
                                     session=self.session, timeout=60)["data"]
        finally:
            if full_page:
                self.set_viewport(width, height)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def set_viewport(self, width: int, height: int) -> None:
        self.browser.call("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                          session=self.session)
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def close(self) -> None:
        try:
            self.browser.call("Target.closeTarget", {"targetId": self.target})
        except CDPError:
            pass
