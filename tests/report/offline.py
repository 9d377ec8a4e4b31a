"""The pages (the explorer's app with an analysis' documents embedded) in headless Chromium, from file:// with
every other request refused and recorded; and the document a page embeds, read back from its HTML."""

from __future__ import annotations

import html as html_lib
import json
import re
import time
from pathlib import Path
from typing import Any

from tests.serve.test_browser import CHROMIUM, FLAGS


def offline_page(
    p: Any, page_file: Path, drawn: str, loaded: list[float] | None = None
) -> tuple[Any, Any, list[str], list[str]]:
    """Chromium on file://`page_file`, every non-file request aborted and recorded in `left`, page errors in
    `errors`; `drawn`: a selector visible once the app has drawn (the seconds to it appended to `loaded`)."""
    from playwright.sync_api import expect

    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    page = browser.new_page(viewport={"width": 1280, "height": 1800})
    left: list[str] = []
    errors: list[str] = []

    def refuse(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()

    page.route("**/*", refuse)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # The renderer started first, as in a browser already open: the time is the page's own (parse, app, draw),
    # not Chromium's process start, which on a loaded CI machine alone can take a second.
    page.goto("about:blank")
    started = time.monotonic()
    page.goto(page_file.as_uri())
    expect(page.locator(drawn).first).to_be_visible()
    if loaded is not None:
        loaded.append(time.monotonic() - started)
    return browser, page, left, errors


def embedded(page_file: Path) -> tuple[str, dict[str, Any]]:
    """(the view the app draws, the document) embedded in a page."""
    text = page_file.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="cg-ray-run" data-view="(\w+)">(.*?)</script>', text, re.S)
    assert found, f"{page_file.name} embeds no document"
    return found.group(1), json.loads(found.group(2))


def self_contained(page_file: Path) -> None:
    """Nothing the page would fetch: no src= or stylesheet link, no URL but the arena's links to its runs."""
    text = page_file.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=|<link[^>]+stylesheet", text), "a script or style outside the page"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html_lib.unescape(text)), "a reference off the page"
