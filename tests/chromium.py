"""Pages rendered in headless Chromium (Debian's ``chromium``, driven by Playwright, the dev extra), for the tests of
the release certificate. A test that renders is skipped, with the reason, where either is missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@dataclass(frozen=True)
class Rendered:
    """What Chromium made of one page.

    Attributes:
        errors: console errors and warnings, uncaught page errors, and every request for anything but the page
            itself (a self-contained page fetches nothing).
        plots: the bounding box of each ``svg`` element (None where it is not laid out).
        bars: the bounding box of each ``svg rect.bar`` (a histogram's bars).
    """

    errors: list[str]
    plots: list[dict | None]
    bars: list[dict | None]


def render(*pages: Path) -> list[Rendered]:
    """Load each of ``pages`` (local HTML files) in one headless Chromium, in turn; what each showed. Cost: one
    browser start (about a second), then a page load each."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright (the dev extra) renders the page")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian's chromium package)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            return [_load(browser, path) for path in pages]
        finally:
            browser.close()


def _load(browser, path: Path) -> Rendered:
    """``path`` loaded in a new page of ``browser`` (closed after)."""
    uri, errors = path.as_uri(), []
    page = browser.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: errors.append(f"fetched {r.url}") if r.url != uri else None)
    page.goto(uri)
    try:
        return Rendered(errors, [svg.bounding_box() for svg in page.query_selector_all("svg")],
                        [bar.bounding_box() for bar in page.query_selector_all("svg rect.bar")])
    finally:
        page.close()
