"""The browser edition's test: the built JupyterLite site (lite/dist) served on 127.0.0.1, in headless Chromium.

Slow (the Pyodide kernel starts in each page), so plain pytest skips it; `make test-lite` builds the site and
selects it with `-m lite`. Every request the pages make to anything but 127.0.0.1 is aborted and counted.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

# Requests a service worker makes are routed (and so counted) only with this on; Playwright's driver reads it when
# it starts, so it is set before any browser is.
os.environ["PW_EXPERIMENTAL_SERVICE_WORKER_NETWORK_EVENTS"] = "1"

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
from lab_harness import CHROMIUM, Chromium, start_chromium, stop_chromium

SITE = Path(__file__).resolve().parents[2] / "lite" / "dist"


def _selected(config: pytest.Config) -> bool:
    expression = config.getoption("markexpr") or ""
    return re.search(r"\blite\b", expression) is not None and re.search(r"\bnot\s+lite\b", expression) is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _selected(config):
        return
    skip = pytest.mark.skip(reason="the browser edition's test (JupyterLite in headless Chromium): make test-lite")
    for item in items:
        if item.get_closest_marker("lite") is not None:
            item.add_marker(skip)


class _Site(http.server.SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".json": "application/json",
    }

    def log_message(self, format: str, *args: object) -> None:  # quiet: the test reads its own figures
        pass


@dataclass
class Served:
    url: str
    outside: list[str] = field(default_factory=list)  # every request to anything but 127.0.0.1, aborted


def serve(folder: Path = SITE) -> tuple[Served, http.server.ThreadingHTTPServer]:
    """Serve the built site on 127.0.0.1 (a free port), on a thread; shut the server down when done."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Site, directory=str(folder)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="lite-site", daemon=True).start()
    return Served(f"http://127.0.0.1:{server.server_address[1]}"), server


@pytest.fixture(scope="session")
def site() -> Iterator[Served]:
    if not (SITE / "jupyter-lite.json").exists():
        pytest.fail(f"{SITE} is not built: run `make lite` (make test-lite does it)")
    served, server = serve()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Chromium]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's Chromium (as root: apt-get install -y chromium)")
    home = Path(tempfile.mkdtemp(prefix="agentlab-lite-"))
    browser = start_chromium(home)
    try:
        yield browser
    finally:
        stop_chromium(browser)
        shutil.rmtree(home, ignore_errors=True)


def only_here(served: Served):
    """A route handler: a request to 127.0.0.1 goes on; any other is aborted and counted."""

    def route(route, request) -> None:
        if urllib.parse.urlsplit(request.url).hostname == "127.0.0.1" or request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            served.outside.append(request.url)
            route.abort()

    return route
