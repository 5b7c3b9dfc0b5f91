"""Helpers for the browser tests (tests/book/test_site.py, tests/viz/test_static_explorers.py).

Playwright for Python (sync API) drives the system's Chromium through ``executable_path``: Playwright's
own browser download is never used (``playwright install`` is not needed). ``browser_unavailable()``
says why the browser tests must skip (no Chromium), or None; a missing Playwright (requirements.txt) fails.

``LocalSite`` serves a folder on 127.0.0.1; ``Browser(site)`` opens pages with the network off: every
request that does not go to that server is aborted and recorded, and each ``Page`` records what it
asked for, what failed and which JavaScript errors it raised.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

# Quiet, deterministic headless Chromium (no background traffic, no QUIC, no GPU).
CHROMIUM_ARGS = (
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
    """The browser binary: $CHROMIUM if set (None if it names no executable), else the usual names on PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser_unavailable() -> str | None:
    """Why the browser tests cannot run here (a skip message), or None when they can. Only a missing Chromium, a
    system package, skips; Playwright is in requirements.txt, so a missing one fails (ImportError), never skips."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        raise ImportError("browser test needs Playwright for Python, which requirements.txt installs: "
                          "`pip install -r requirements.txt` (no `playwright install`: the tests drive the system "
                          "Chromium)") from error
    if not find_chromium():
        if os.environ.get("CHROMIUM"):
            return f"browser test needs Chromium: $CHROMIUM={os.environ['CHROMIUM']!r} is not an executable"
        return ("browser test needs Chromium: install it (`apt-get install chromium`) "
                "or set $CHROMIUM to a Chromium/Chrome binary")
    return None


def launch(playwright):
    """The system Chromium, headless, started by Playwright."""
    return playwright.chromium.launch(executable_path=find_chromium(), headless=True, args=list(CHROMIUM_ARGS))


def page_with_errors(browser, url: str, width: int = 1000, height: int = 900):
    """(page, errors): ``url`` loaded in a new page of ``browser``; ``errors`` collects its uncaught exceptions and
    console errors from the start, so a test can assert there were none."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url, wait_until="load")
    return page, errors


def browser_for_a_module():
    """The body of a module-scoped pytest fixture: ``yield from browser_for_a_module()`` yields a started headless
    Chromium and closes it after the module's tests, or skips them with the reason none can start."""
    import pytest

    missing = browser_unavailable()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright
    playwright = sync_playwright().start()
    browser = launch(playwright)
    yield browser
    browser.close()
    playwright.stop()


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


# ---------------------------------------------------------------------------------- browser
class Browser:
    """Headless system Chromium; every page gets a fresh context whose network reaches only ``site``."""

    def __init__(self, site: LocalSite, width: int = 1280, height: int = 900):
        from playwright.sync_api import sync_playwright

        self.site, self.size = site, {"width": width, "height": height}
        self._playwright = sync_playwright().start()
        try:
            self._browser = launch(self._playwright)
        except Exception:
            self._playwright.stop()
            raise

    def open(self, url: str) -> "Page":
        context = self._browser.new_context(viewport=self.size, service_workers="block")
        page = Page(self.site, context)
        page.page.goto(url, wait_until="load")
        return page

    def close(self) -> None:
        try:
            self._browser.close()
        finally:
            self._playwright.stop()


class Page:
    """One page in its own browser context, with the log of its requests, failures and errors.

    ``page.page`` is the Playwright page; ``evaluate`` awaits a returned promise and returns its JSON value.
    """

    def __init__(self, site: LocalSite, context):
        self.site, self.context = site, context
        self.blocked: list[str] = []  # requests aborted because they would leave 127.0.0.1
        self._requests: list[str] = []
        self._failed: list[str] = []
        self._errors: list[str] = []
        context.route("**/*", self._gate)
        context.route_web_socket(lambda url: True, self._gate_socket)
        context.on("request", lambda request: self._requests.append(request.url))
        context.on("response", self._on_response)
        context.on("requestfailed", self._on_failed)
        self.page = context.new_page()
        self.page.on("pageerror", lambda error: self._errors.append(str(error)))
        self.page.on("console", lambda message: self._errors.append(message.text)
                     if message.type == "error" else None)
        self.page.on("websocket", lambda socket: self._requests.append(socket.url))

    def _gate(self, route) -> None:
        url = route.request.url
        if self.site.is_local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("blockedbyclient")

    def _gate_socket(self, socket) -> None:
        self._requests.append(socket.url)
        if self.site.is_local(socket.url):
            socket.connect_to_server()
        else:  # not connected to any server: the page sees a socket that closes
            self.blocked.append(socket.url)
            socket.close()

    def _on_response(self, response) -> None:
        if response.status >= 400:
            self._failed.append(f"{response.status} {response.url}")

    def _on_failed(self, request) -> None:
        error = request.failure or "?"
        if self.site.is_local(request.url) and "ERR_ABORTED" not in error:  # aborted = cancelled by the page
            self._failed.append(f"{error} {request.url}")

    def evaluate(self, expression: str, arg=None):
        """Evaluate a JS expression (or call a JS function with ``arg``); promises are awaited."""
        return self.page.evaluate(expression, arg)

    def requests(self) -> list[str]:
        """Every URL the page asked for (documents, scripts, fonts, images, XHR, web sockets)."""
        return list(self._requests)

    def failed_local_responses(self) -> list[str]:
        """Local URLs answered with an HTTP error (missing file) or that failed to load."""
        return list(self._failed)

    def js_errors(self) -> list[str]:
        """Uncaught exceptions and console errors of the page."""
        return list(self._errors)

    def screenshot(self, path: Path, full_page: bool = False, max_height: int = 4000) -> None:
        """Save a PNG of the viewport, or of the page's top ``max_height`` pixels with ``full_page``.

        The full page is shot by making the viewport that tall (a real layout), not by stitching
        beyond the viewport, which misplaces the theme's sticky sidebar.
        """
        size = self.page.viewport_size
        if full_page:
            height = self.evaluate("document.documentElement.scrollHeight")
            self.set_viewport(size["width"], min(height, max_height))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=path, timeout=60_000)
        finally:
            if full_page:
                self.set_viewport(size["width"], size["height"])

    def set_viewport(self, width: int, height: int) -> None:
        self.page.set_viewport_size({"width": width, "height": height})
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def close(self) -> None:
        self.context.close()


def live_site(root: Path, names=None) -> Path:
    """A folder laid out like the built book for the live model's page tests: the bundle of the shipped models
    ``names`` (all of them if None) in ``_assets/live/``, and an empty ``notebooks/`` for the pages; returns ``root``."""
    from minitfm.viz import live_model

    if names is None:
        live_model.bundle(root / "_assets" / "live")
    else:
        live_model.bundle(root / "_assets" / "live", names)
    (root / "notebooks").mkdir(exist_ok=True)
    return root
