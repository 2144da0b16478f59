"""The built documentation site in a real browser: the home page and a rule page render
with the theme, and the site's search finds a rule by its name. Left out where the
machine has no Chromium (Debian's `chromium`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .browser import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """The tests' output stays the tests'."""


@pytest.fixture(scope="module")
def site_url(docs_site: Path) -> Iterator[str]:
    """The built site, served on the loopback interface (search needs http, not file)."""
    handler = functools.partial(_QuietHandler, directory=str(docs_site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium-profile")) as running:
        yield running


def _texts(found: list[tuple[str, str]]) -> list[str]:
    """Headings' text, without the permalink sign the theme appends."""
    return [text.removesuffix("¶").strip() for _, text in found]


def test_the_home_page_renders(browser: Browser, site_url: str) -> None:
    browser.open(site_url)
    assert _texts(browser.wait_for("article h1")) == ["sessionfix"]
    tabs = {href for href, _ in browser.wait_for("nav.md-nav a.md-nav__link[href]")}
    assert "rules/" in tabs
    assert "agents/claude-code/" in tabs


def test_a_rule_page_renders(browser: Browser, site_url: str) -> None:
    browser.open(f"{site_url}rules/stale-file-read/")
    assert _texts(browser.wait_for("article h1")) == ["stale-file-read (SF301)"]
    sections = _texts(browser.wait_for("article h2"))
    assert sections[:2] == ["What it does", "Why is this bad?"]


def test_the_search_finds_a_rule_by_its_name(browser: Browser, site_url: str) -> None:
    browser.open(f"{site_url}?q=stale-file-read")
    results = browser.wait_for(".md-search-result__item > .md-search-result__link")
    assert results, "no search results"
    first_href, first_text = results[0]
    assert first_href.startswith(f"{site_url}rules/stale-file-read/")
    assert "stale-file-read (SF301)" in first_text
