"""Browser tests: Debian's Chromium driven by Playwright (sync API) against the app served by a
real uvicorn on a free loopback port. Screenshots go to test-artifacts/ (look at them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.browser.server import ROOT, uvicorn_server

# Generous waits: the suite must pass on a machine that is busy with other work (another
# `make test` beside it); a test bounds its work by steps, never by the wall clock.
WAIT_MS = 30_000

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def base_url():
    ARTIFACTS.mkdir(exist_ok=True)
    with uvicorn_server("testapp:create", factory=True, app_dir=str(ROOT / "tests" / "browser"),
                        log_path=ARTIFACTS / "uvicorn.log") as base:
        yield base


@pytest.fixture(scope="session")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    sync_api.expect.set_options(timeout=WAIT_MS)
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, base_url):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url,
                                  color_scheme="light")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.set_default_timeout(WAIT_MS)
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page, name: str, full_page: bool = True) -> Path:
    """Save a screenshot under test-artifacts/ (they are how we see what a student sees)."""
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
