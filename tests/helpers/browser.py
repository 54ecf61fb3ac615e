"""Headless Chromium through Selenium for the browser tests of the self-contained HTML results viewer.

Debian's ``chromium`` and ``chromium-driver`` packages (``make browser``) provide the browser and its
WebDriver; nothing is downloaded. Starting the driver takes about 1.5 s here and opening a local page
about 0.05 s once warm, so ``chromium_session`` keeps one driver per test process and ``BrowserPage``
gives each test a fresh tab with an empty console log.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

# Headless, offline and quiet: no GPU, no network calls of the browser's own, no sandbox (we run as root
# in containers) and /tmp instead of a small /dev/shm.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)

_shots = itertools.count()


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return f"{' and '.join(absent)} not found: run `make browser` (Debian's chromium and chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: run `make setup` (it is in the dev extras) and `make browser`"
    return None


@contextmanager
def chromium_driver(user_data_dir: Path, window_size: tuple[int, int] = (1280, 900)) -> Iterator[WebDriver]:
    """A headless Chromium WebDriver with a new profile in ``user_data_dir`` (created if absent) and the
    browser console recorded at every level; quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    user_data_dir.mkdir(parents=True, exist_ok=True)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.add_argument(f"--window-size={window_size[0]},{window_size[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


class BrowserPage:
    """One test's view of the shared driver: a fresh tab, the console entries logged since it opened,
    and helpers to open a local file and save a screenshot. ``driver`` is the Selenium WebDriver itself
    (find_element, execute_script, ...)."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver
        self._entries: list[dict[str, Any]] = []
        self.new_page()

    def new_page(self) -> None:
        """Close every tab, open an empty one and forget the console entries seen so far."""
        previous = list(self.driver.window_handles)
        self.driver.switch_to.new_window("tab")
        fresh = self.driver.current_window_handle
        for handle in previous:
            self.driver.switch_to.window(handle)
            self.driver.close()
        self.driver.switch_to.window(fresh)
        self.driver.get_log("browser")  # drained: entries of earlier pages are not this page's
        self._entries = []

    def open(self, path: Path | str) -> None:
        """Load the local file ``path`` through its ``file://`` URL and wait for its load event."""
        self.driver.get(Path(path).resolve().as_uri())

    def console(self) -> list[dict[str, Any]]:
        """Every console entry since the page was made fresh: dicts with level, message, source, timestamp."""
        self._entries.extend(self.driver.get_log("browser"))
        return list(self._entries)

    def console_errors(self) -> list[dict[str, Any]]:
        """The SEVERE console entries: uncaught exceptions, console.error calls and failed loads."""
        return [entry for entry in self.console() if entry["level"] == "SEVERE"]

    def screenshot(self, folder: Path | str, name: str | None = None) -> Path:
        """Save a PNG of the visible page into ``folder`` (created if absent) and return its path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name) if name else f"page-{next(_shots)}"
        path = folder / f"{stem}.png"
        if not self.driver.save_screenshot(str(path)):
            raise RuntimeError(f"Chromium could not save a screenshot to {path}")
        return path
