"""The evidence viewer (python -m harness.report view) on a real sweep, checked in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from harness.report.load import annotate, load_runs
from harness.report.viewer.data import build_payload, comparison_pairs, variants_of
from tests.conftest import REPO
from tests.helpers.built_once import built_once
from tests.test_pipeline import run_cli

pytestmark = pytest.mark.slow
SCREENSHOTS = REPO / "outputs" / "test-screenshots"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """Three packers on the demo set at a budget tight enough that they pack different contexts, read with short
    answers (the viewer shows them; what is checked is the contexts). Run once for both test workers."""

    def build(root: Path) -> None:
        sweep = ["-m", "packer=packed,submod,focused", "budget=64", "reader.max_new_tokens=8", "logger=none"]
        result = run_cli([*sweep, f"hydra.sweep.dir={root / 'sweep'}"], cache_dir=root / "cache")
        assert result.returncode == 0, result.stderr[-3000:]

    return built_once(tmp_path_factory, "viewer-sweep", build) / "sweep"


def view(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.report", "view", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.fixture(scope="module")
def viewer(sweep, tmp_path_factory) -> Path:
    def build(folder: Path) -> None:
        result = view(str(sweep), "--out", str(folder / "viewer.html"))
        assert result.returncode == 0, result.stderr
        assert "3 policies" in result.stdout and "12 questions" in result.stdout

    return built_once(tmp_path_factory, "viewer-html", build) / "viewer.html"


def rows_of(sweep: Path) -> pd.DataFrame:
    rows, layout = annotate(load_runs([sweep])[0])
    return rows


def wait_ready(page) -> None:
    WebDriverWait(page.driver, 30).until(
        lambda d: d.execute_script("return document.body.dataset.ready || document.body.dataset.error")
    )
    assert page.driver.execute_script("return document.body.dataset.error") is None


def test_the_file_is_self_contained(viewer):
    text = viewer.read_text()
    # Nothing is fetched: no external script, stylesheet, image or font.
    for needle in ("<link", "src=", "@import", "url("):
        assert needle not in text, needle
    assert "http://" not in text.split('<script id="payload"')[0]


def test_the_disagreement_filter_shows_exactly_the_questions_the_rows_say(viewer, sweep, chromium):
    rows = rows_of(sweep)
    expected = {key for key, group in rows.groupby("qkey") if group["answer_in_context"].nunique() > 1}
    assert expected, "the sweep's packers should disagree on some question"
    chromium.open(viewer)
    wait_ready(chromium)
    driver = chromium.driver

    def listed() -> set[str]:
        return {tr.get_attribute("data-key") for tr in driver.find_elements(By.CSS_SELECTOR, "#index tr[data-key]")}

    assert listed() == set(rows["qkey"])
    driver.find_element(By.ID, "filter-disagree-aic").click()
    assert listed() == expected
    assert driver.find_element(By.ID, "count").text == f"{len(expected)} of 12 questions"
    chromium.screenshot(SCREENSHOTS, "viewer-index")
    assert chromium.console_errors() == []


def test_a_question_page_marks_every_answer_span_and_fills_the_budget_bar(viewer, sweep, chromium):
    rows = rows_of(sweep)
    chromium.open(viewer)
    wait_ready(chromium)
    driver = chromium.driver
    labels = [v.label for v in variants_of(rows, annotate(load_runs([sweep])[0])[1])[1]]
    checked = 0
    for qkey, group in rows.groupby("qkey"):
        driver.execute_script("location.hash = arguments[0]", urlencode({"q": qkey}))
        WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#question .cell"))
        for _, row in group.iterrows():
            cell = driver.find_element(By.CSS_SELECTOR, f'.cell[data-variant="{labels.index(row["policy"])}"]')
            marks = {m.get_attribute("data-span") for m in cell.find_elements(By.CSS_SELECTOR, "mark.answer")}
            spans = json.loads(row["answer_spans"])
            assert len(marks) == len(spans)
            assert (len(spans) > 0) == (row["answer_in_context"] == 1.0)
            bar = cell.find_element(By.CSS_SELECTOR, ".budget-bar")
            fill = bar.find_element(By.CSS_SELECTOR, ".fill")
            ratio = fill.size["width"] / bar.size["width"]
            assert ratio == pytest.approx(row["context_tokens"] / row["budget"], abs=0.01)
            checked += 1
    assert checked == len(rows) == 36
    chromium.screenshot(SCREENSHOTS, "viewer-question")
    assert chromium.console_errors() == []


def test_a_comparison_address_opens_the_two_policies(viewer, sweep, chromium):
    rows = rows_of(sweep)
    question = rows["qkey"].iloc[0]
    chromium.driver.get(
        viewer.resolve().as_uri() + "#" + urlencode({"compare": "packer=packed|packer=submod", "q": question})
    )
    wait_ready(chromium)
    cells = chromium.driver.find_elements(By.CSS_SELECTOR, "#question .cell h3")
    assert [c.text for c in cells] == ["packer=packed", "packer=submod"]
    assert chromium.console_errors() == []


def test_rows_from_before_provenance_still_open(sweep, tmp_path, chromium):
    old = tmp_path / "old"
    old.mkdir()
    rows = pd.read_parquet(next(sweep.glob("*/rows.parquet")))
    rows.drop(columns=["snippets", "answer_spans", "pool"]).to_parquet(old / "rows.parquet")
    out = tmp_path / "old.html"
    result = view(str(old), "--out", str(out))
    assert result.returncode == 0 and "before provenance" in result.stderr
    chromium.open(out)
    wait_ready(chromium)
    assert chromium.driver.find_element(By.ID, "provenance-notice").is_displayed()
    chromium.driver.find_element(By.CSS_SELECTOR, "#index tbody tr[data-key]").click()
    WebDriverWait(chromium.driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".context.plain"))
    assert chromium.console_errors() == []


def test_bad_input_is_named(sweep, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = view(str(empty))
    assert result.returncode == 2 and f"no rows.parquet under {str(empty)!r}" in result.stderr
    result = view(str(sweep), "--out", str(tmp_path / "v.html"), "--question", "no-such-question")
    assert result.returncode == 2 and "no row has question id 'no-such-question'" in result.stderr
    result = view(str(sweep), "--out", str(tmp_path / "v.html"), "--question", "demo-01")
    assert result.returncode == 0 and result.stdout.strip().endswith("#q=demo-01")


def test_policy_pairs_that_differ_in_one_key_are_offered():
    from harness.report.viewer.data import Variant

    variants = [
        Variant("a", {"packer": "packed", "budget": "96"}, "d", 96),
        Variant("b", {"packer": "submod", "budget": "96"}, "d", 96),
        Variant("c", {"packer": "submod", "budget": "128"}, "d", 128),
        Variant("e", {"packer": "packed", "budget": "128"}, "other", 128),
    ]
    # a-b differ in packer, b-c in budget; a-c in two keys; e is another dataset.
    assert comparison_pairs(variants) == [[0, 1, "packer"], [1, 2, "budget"]]


def test_tree_facts_reach_the_payload():
    rows = pd.DataFrame(
        {
            "question_id": ["q1"],
            "qkey": ["q1"],
            "dataset": ["qasper"],
            "question": ["Why?"],
            "gold_answers": ['["because"]'],
            "context": ["A summary."],
            "tree": ["dtcrs"],
            "packer": ["packed"],
            "budget": [512],
            "tree.question_class": ["abstractive"],
            "tree.class_source": ["lm"],
            "tree.sub_questions": ['["What?", "How?"]'],
            "tree.nodes_per_layer": ["[12, 3]"],
            "answer_in_context": [0.0],
        }
    )
    rows, layout = annotate(rows)
    payload = build_payload(rows, layout, ["x"], "t")
    (cell,) = payload["cells"]
    assert cell["tree"] == {
        "question_class": "abstractive",
        "class_source": "lm",
        "sub_questions": ["What?", "How?"],
        "nodes_per_layer": [12, 3],
    }
    assert payload["provenance"] is False and payload["metrics"] == ["answer_in_context"]


def test_the_report_links_each_contrast_to_its_two_policies_in_the_viewer(sweep, tmp_path, chromium):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "harness.report", str(sweep), "--out", str(out), "--no-plots", "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    markdown = (out / "report.md").read_text()
    assert "[viewer.html](viewer.html)" in markdown
    links = [line.rsplit("[view](", 1)[1].rstrip(" |)") for line in markdown.splitlines() if "[view](" in line]
    assert len(links) == 2  # focused and submod against the packed baseline
    # contrasts.csv carries the same addresses, one per contrast (docs/comparing.md)
    assert sorted(pd.read_csv(out / "contrasts.csv")["viewer"]) == sorted(links)
    chromium.driver.get(f"{(out / links[0].split('#')[0]).resolve().as_uri()}#{links[0].split('#', 1)[1]}")
    wait_ready(chromium)
    shown = chromium.driver.execute_script(
        "return [...document.querySelectorAll('#variants input:checked')].map(e => e.parentElement.textContent.trim())"
    )
    assert sorted(shown) == ["packer=focused", "packer=packed"]
    assert chromium.console_errors() == []
