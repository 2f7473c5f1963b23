"""``make screenshots``: the Dagster UI over the demo, as a data engineer sees it, saved as ``docs/images/*.png``.

Runs on the demo home (``$PRIVRELEASE_HOME``, default ``./demo``, as ``make demo`` leaves it; a demo table missing
there is built first, ``demo.run_demo``) plus one refused release of ``adult_requests`` (``demo.demo_refusal``, made
once). It starts ``dagster-webserver`` on that home on a free loopback port, waits until the code location is
loaded, then drives Debian's Chromium (``/usr/bin/chromium``; Playwright cannot download browsers here) through
Playwright at a fixed viewport over the pages of ``SHOTS``: each is taken once its landmark text is shown and no
loading placeholder is left. The webserver is stopped at the end, also on an error.

Usage: ``python scripts/screenshots.py [--home DIR] [--only NAME ...]``. Costs the webserver's start (the code
location's import) and a few seconds per page.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page, ViewportSize, sync_playwright

from dagster_privrelease import demo

IMAGES = demo.ROOT / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
#: How long a page or the webserver may take (a loaded 2-core machine is slow).
TIMEOUT_MS = 180_000
#: A Dagster UI loading placeholder (its class names keep the component's name).
LOADING = "[class*='Skeleton_skeleton'], [class*='Spinner']"


@dataclass(frozen=True)
class Shot:
    """One page: the image's ``name``, the UI ``path`` (``{run}``: the refused run's id), the ``landmark`` text
    that says it loaded, and the texts to ``click`` in turn before the picture (a partition, a dialog)."""

    name: str
    path: str
    landmark: str
    click: tuple[str, ...] = ()


SHOTS = (
    Shot("lineage", "/locations/privrelease_demo/asset-groups/adult", "published_release"),
    Shot("published_release", "/assets/adult/published_release", "Metadata"),
    Shot("check", "/assets/adult/release_candidate?view=checks", "Checks"),
    Shot("partition", "/assets/adult/published_release?view=partitions", "000010", click=("000010",)),
    Shot("report", "/assets/adult/published_release?view=partitions", "000010", click=("000010", "[Show Markdown]")),
    Shot("xy_release", "/assets/adult_xy/published_release", "Metadata"),
    Shot("refused_run", "/runs/{run}?logs=type%3ASTEP_FAILURE", "adult_requests_release"),
    Shot("sensor", "/locations/privrelease_demo/sensors/adult_requests_release_requests", "adult_requests_release_requests",
         click=("View logs",)),
    Shot("sensors", "/automation", "adult_source_changed"),
    Shot("timeline", "/overview/activity/timeline", "adult_release", click=("6hr",)),
)


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def location_loaded(url: str) -> bool:
    """Whether the webserver at ``url`` answers and has loaded the example code location."""
    query = {"query": "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"}
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps(query).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            entries = json.load(response)["data"]["workspaceOrError"]["locationEntries"]
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return any(e["name"] == demo.LOCATION and e["loadStatus"] == "LOADED" for e in entries)


@contextmanager
def webserver(home: Path) -> Iterator[str]:
    """``dagster-webserver`` on ``home``'s Dagster instance and the workspace of the example code location, on a
    free loopback port; yields its URL once the location is loaded; stops it and its code server on exit. RuntimeError when it exits
    or does not load in ``TIMEOUT_MS``."""
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home / ".dagster"), "PRIVRELEASE_HOME": str(home)}
    command = [str(Path(sys.executable).parent / "dagster-webserver"), "-w", str(demo.WORKSPACE),
               "-h", "127.0.0.1", "-p", str(port)]
    log = (home / "webserver.log").open("w")
    # a session of its own: stopping it stops its code server too (the process group of the webserver started here)
    server = subprocess.Popen(command, cwd=demo.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not location_loaded(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dagster-webserver did not load the code location; see {log.name}")
            time.sleep(2)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def settle(page: Page, landmark: str) -> None:
    """Wait until ``page`` shows ``landmark`` and no loading placeholder, closing the UI's community dialog."""
    page.get_by_text(landmark).first.wait_for(timeout=TIMEOUT_MS)
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()
    page.wait_for_function(f"() => !document.querySelector({LOADING!r})", timeout=TIMEOUT_MS)
    page.wait_for_timeout(1_500)  # charts and the graph's layout animate in


def take(page: Page, url: str, shot: Shot, run: str) -> Path:
    """Visit ``shot``'s page and save it as ``IMAGES/<name>.png``."""
    page.goto(url + shot.path.format(run=run), wait_until="domcontentloaded")
    settle(page, shot.landmark)
    for text in shot.click:
        page.get_by_text(text, exact=True).first.click()
        page.wait_for_function(f"() => !document.querySelector({LOADING!r})", timeout=TIMEOUT_MS)
        page.wait_for_timeout(1_500)
    path = IMAGES / f"{shot.name}.png"
    page.screenshot(path=str(path))
    return path


def main(argv: list[str] | None = None) -> None:
    """Build what the demo home lacks, start the webserver on it and save every page of ``SHOTS``."""
    parser = argparse.ArgumentParser(description="Save the Dagster UI over the demo as docs/images/*.png.")
    parser.add_argument("--home", type=Path, default=demo.demo_home(), help="the demo home (default ./demo)")
    parser.add_argument("--only", nargs="*", choices=[s.name for s in SHOTS], help="take these pages only")
    args = parser.parse_args(argv)
    home = args.home.resolve()
    started = time.monotonic()
    for name, table in demo.DEMOS.items():
        if not (table.folder(home) / "releases.duckdb").exists():
            print(f"building the demo table {name} ({table.releases} releases) under {home}", flush=True)
            demo.run_demo(name, table.releases, home)
    run = demo.demo_refusal(home=home)
    IMAGES.mkdir(parents=True, exist_ok=True)
    shots = [s for s in SHOTS if not args.only or s.name in args.only]
    with webserver(home) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport=VIEWPORT)
        for shot in shots:
            print(f"{take(page, url, shot, run).relative_to(demo.ROOT)}", flush=True)
        browser.close()
    print(f"{len(shots)} screenshots in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
