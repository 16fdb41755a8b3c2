"""A real browser for the console's tests: Playwright driving Debian's chromium (`make test` installs it; never
`playwright install`, whose downloads are blocked here), headless, with nothing reaching out to the network, and
the console's login as a user does it. Screenshots go under build/screenshots (ignored by git)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).parents[1] / "build" / "screenshots"
WAIT_MS = 60_000
"""How long a page or a condition may take on a loaded machine (a deadline, not a pace)."""


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Browser, dark: bool = False) -> Page:
    """A page of a fresh context (its own cookies), in the system's light or dark setting."""
    context = browser.new_context(color_scheme="dark" if dark else "light", accept_downloads=True)
    context.set_default_timeout(WAIT_MS)
    return context.new_page()


def log_in(page: Page, url: str, access_key: str, secret_key: str) -> None:
    page.goto(f"{url}/console/login")
    page.fill("input[name=access_key]", access_key)
    page.fill("input[name=secret_key]", secret_key)
    page.click("button[type=submit]")
    page.wait_for_selector("#logout")


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
