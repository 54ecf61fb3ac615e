"""The headless Chromium fixture itself (tests/helpers/browser.py): a page's script runs and reacts to a click,
JavaScript errors reach ``console_errors``, screenshots are PNG files, and a missing browser names `make browser`."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.helpers import browser

LIST_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>list</title>
<style>body { font-family: sans-serif; } li { color: #225; }</style></head>
<body>
<ul id="items"></ul>
<button id="add" type="button">Add</button>
<script>
  const list = document.getElementById("items");
  function addItem(text) {
    const li = document.createElement("li");
    li.textContent = text;
    list.appendChild(li);
  }
  ["alpha", "beta", "gamma"].forEach(addItem);
  document.getElementById("add").addEventListener("click", () => addItem("item " + (list.children.length + 1)));
</script>
</body></html>
"""

THROWING_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>boom</title></head>
<body><p>before</p>
<script>throw new Error("boom");</script>
</body></html>
"""


@pytest.mark.process
def test_page_script_runs_clicks_and_reports_errors(chromium, tmp_path: Path):
    page = tmp_path / "list.html"
    page.write_text(LIST_PAGE, encoding="utf-8")
    chromium.open(page)
    items = chromium.driver.find_elements(By.CSS_SELECTOR, "#items li")
    assert [li.text for li in items] == ["alpha", "beta", "gamma"]

    chromium.driver.find_element(By.ID, "add").click()
    items = chromium.driver.find_elements(By.CSS_SELECTOR, "#items li")
    assert len(items) == 4
    assert items[-1].text == "item 4"
    assert chromium.console_errors() == []

    shot = chromium.screenshot(tmp_path / "shots", "list page")
    assert shot.parent == tmp_path / "shots"
    assert shot.stat().st_size > 0
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    throwing = tmp_path / "boom.html"
    throwing.write_text(THROWING_PAGE, encoding="utf-8")
    chromium.open(throwing)
    errors = chromium.console_errors()
    assert len(errors) == 1
    assert "Uncaught Error: boom" in errors[0]["message"]
    assert errors[0]["source"] == "javascript"


def test_each_test_gets_a_fresh_page(chromium, tmp_path: Path):
    """The previous test's page and its error are gone: one blank tab, an empty console."""
    assert len(chromium.driver.window_handles) == 1
    assert chromium.driver.current_url in ("about:blank", "chrome://newtab/", "chrome://new-tab-page/")
    assert chromium.console() == []

    chromium.driver.execute_script("console.error('logged by hand')")
    errors = chromium.console_errors()
    assert len(errors) == 1 and "logged by hand" in errors[0]["message"]
    chromium.new_page()
    assert chromium.console_errors() == []


def test_missing_browser_names_make_browser(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(browser, "CHROMEDRIVER", tmp_path / "no-chromedriver")
    reason = browser.missing_browser()
    assert reason is not None
    assert "make browser" in reason
    assert "no-chromedriver" in reason
