"""Shared set-up of the browser tests: Debian's Chromium driven by Playwright, screenshots."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import REPO, Served

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = REPO / "test-artifacts" / "dashboard"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

WAIT_MS = 30_000

#: Every browser test needs Chromium; the Franka ones franky-sim too. Without them they skip, saying what to install.
NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
NEEDS_FRANKY_SIM = pytest.mark.skipif(
    importlib.util.find_spec("franky_sim") is None, reason="franky-sim is not installed (pip install rpent[sim])")
#: The bundled Franka recipe the browser tests replay.
FRANKA_PICK = REPO / "robots" / "franka" / "recipes" / "pick_cube.jsonl"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip)")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_dashboard(page: Any, served: Served) -> None:
    open_page(page, served.base_url + "/")


def open_page(page: Any, url: str) -> None:
    """Load the dashboard at `url` and wait until the session is ready and the event stream live."""
    page.goto(url)
    page.wait_for_selector("[data-testid=session-status]:has-text('ready')", timeout=WAIT_MS)
    page.wait_for_selector("[data-testid=link-status]:has-text('live')", timeout=WAIT_MS)
