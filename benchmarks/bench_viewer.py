"""The evidence viewer at study scale: what provenance costs the rows, how long the viewer takes to write, how
large it is, and how fast it opens in headless Chromium.

Reads the rows of a finished sweep (default: the selection factorial, 60 jobs x 485 questions, made by
``python -m harness -m +sweeps=replication_packing hydra.sweep.dir=outputs/studies/replication_packing``) and
prints, side by side in one run:

1. rows.parquet bytes of every job with and without the provenance columns (snippets, answer_spans, pool),
   re-written with the same writer, and their ratio;
2. the seconds ``python -m harness.report view`` spends (load, regroup, compress, write) and the file's size;
3. in headless Chromium (``make browser``): seconds from navigation to a usable index (decompress, parse, first
   render), and the seconds to open a question page, for ``--questions`` questions (median and worst).

    .venv/bin/python benchmarks/bench_viewer.py
    .venv/bin/python benchmarks/bench_viewer.py outputs/multirun/DATE/TIME --questions 50
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.metrics.provenance import PROVENANCE_COLUMNS  # noqa: E402
from harness.report.load import annotate, discover_runs, load_runs  # noqa: E402
from harness.report.viewer import write_viewer  # noqa: E402


def parquet_bytes(frame: pd.DataFrame) -> int:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)  # the writer of harness.runlog.outputs.atomic_write_parquet
    return buffer.tell()


def provenance_cost(sweep: Path) -> tuple[int, int, int]:
    """(rows, bytes with provenance, bytes without) over every job's rows.parquet."""
    rows = with_columns = without = 0
    for run in discover_runs([sweep]):
        frame = pd.read_parquet(run / "rows.parquet")
        rows += len(frame)
        with_columns += parquet_bytes(frame)
        without += parquet_bytes(frame.drop(columns=[c for c in PROVENANCE_COLUMNS if c in frame.columns]))
    return rows, with_columns, without


def browser_times(viewer: Path, keys: list[str]) -> tuple[float, list[float]]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.helpers.browser import chromium_driver, missing_browser

    if (reason := missing_browser()) is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory() as profile, chromium_driver(Path(profile)) as driver:
        start = time.perf_counter()
        driver.get(viewer.resolve().as_uri())
        WebDriverWait(driver, 120).until(lambda d: d.execute_script("return document.body.dataset.ready"))
        ready = time.perf_counter() - start
        opens = []
        for key in keys:
            start = time.perf_counter()
            driver.execute_script("location.hash = arguments[0]", urlencode({"q": key}))
            WebDriverWait(driver, 30).until(
                lambda d: (
                    d.find_elements(By.CSS_SELECTOR, "#question .cell")
                    and d.execute_script("return !document.getElementById('question-view').hidden")
                )
            )
            opens.append(time.perf_counter() - start)
            driver.execute_script("location.hash = ''")
            WebDriverWait(driver, 30).until(lambda d: d.execute_script("return !!document.querySelector('#index tr')"))
    return ready, opens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", nargs="?", type=Path, default=REPO / "outputs/studies/replication_packing")
    parser.add_argument("--questions", type=int, default=20, help="question pages to open (default 20)")
    parser.add_argument("--out", type=Path, default=None, help="viewer file (default: a temporary one)")
    args = parser.parse_args()

    rows, with_columns, without = provenance_cost(args.sweep)
    print(f"rows: {rows} in {len(discover_runs([args.sweep]))} jobs under {args.sweep}")
    print(
        f"rows.parquet with provenance {with_columns / 1e6:.2f} MB, without {without / 1e6:.2f} MB: "
        f"{with_columns / without:.2f}x"
    )

    out = args.out or Path(tempfile.mkdtemp()) / "viewer.html"
    start = time.perf_counter()
    frame, _ = load_runs([args.sweep])
    frame, layout = annotate(frame)
    payload = write_viewer(frame, layout, [str(args.sweep)], out)
    seconds = time.perf_counter() - start
    print(
        f"viewer: {len(payload['questions'])} questions x {len(payload['variants'])} policies = "
        f"{len(payload['cells'])} cells; written in {seconds:.1f} s; {out.stat().st_size / 1e6:.1f} MB ({out})"
    )

    keys = [q["key"] for q in payload["questions"][: args.questions]]
    ready, opens = browser_times(out, keys)
    print(f"browser: index usable {ready:.2f} s after navigation")
    print(
        f"browser: question page opens in {statistics.median(opens):.3f} s median, {max(opens):.3f} s worst "
        f"({len(opens)} questions, {len(payload['variants'])} policies side by side)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
