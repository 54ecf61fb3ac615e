"""``python -m harness.report view``: a per-question evidence viewer of runs and sweeps, one offline HTML file.

For each question it shows the contexts of the chosen policies side by side, with every snippet's source, the
gold documents, the supporting sentences, the answer spans, the fragment the budget cut, summary nodes and
injected copies marked; the budget used; the reader's raw and extracted answer; the pool and what the
diversifier kept; for tree runs the classifier's decision, the table of contents and the sub-questions.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.load import REPORT_DIR, Layout, annotate, display_path, load_runs
from harness.report.viewer.data import build_payload, variant_label
from harness.report.viewer.page import render_page

log = logging.getLogger("harness.report.viewer")

VIEWER_FILE = "viewer.html"


def write_viewer(
    rows: pd.DataFrame, layout: Layout, sources: Sequence[str], out: Path, title: str | None = None
) -> dict:
    """Write the viewer of annotated ``rows`` (``harness.report.load.annotate``) to ``out``; returns the payload."""
    # The page may travel: its sources are named relative to where the command ran, never by absolute path.
    shown = [display_path(s) for s in sources]
    payload = build_payload(rows, layout, shown, title or f"Evidence viewer: {', '.join(shown)}")
    if not payload["provenance"]:
        log.warning("these rows were written before provenance was recorded: the viewer shows plain contexts")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(payload), encoding="utf-8")
    return payload


def question_hash(key: str) -> str:
    """The viewer's address of one question (``viewer.html#q=...``)."""
    from urllib.parse import urlencode

    return urlencode({"q": key})


def compare_hash(label_a: str, label_b: str) -> str:
    """The viewer's address of a comparison of two variants (their labels, as the viewer names them)."""
    from urllib.parse import urlencode

    return urlencode({"compare": f"{label_a}|{label_b}"})


def contrast_addresses(contrasts: pd.DataFrame, rows: pd.DataFrame, viewer: str = VIEWER_FILE) -> list[str]:
    """The viewer's address of each contrast (the report's ``contrasts`` table data): its two policies side by
    side."""
    budgets_vary = "budget" in rows.columns and rows["budget"].nunique() > 1
    datasets_vary = "dataset" in rows.columns and rows["dataset"].nunique() > 1

    def label(policy: str, record: Any) -> str:
        budget = getattr(record, "budget", None) if budgets_vary else None
        dataset = str(getattr(record, "dataset", "")) if datasets_vary else None
        return variant_label(policy, budget, dataset)

    return [
        f"{viewer}#{compare_hash(label(r.policy, r), label(r.baseline, r))}" for r in contrasts.itertuples(index=False)
    ]


def attach_viewer(
    report: Any, rows: pd.DataFrame, layout: Layout, out_dir: Path, sources: Sequence[str]
) -> Path | None:
    """Beside a report of rows with provenance: the viewer in ``out_dir``, a link to it in the preamble and a
    ``viewer`` column in the contrasts table (each contrast opens its two policies side by side): a link in
    report.md, the address in contrasts.csv."""
    if "snippets" not in rows.columns:
        return None
    path = out_dir / VIEWER_FILE
    write_viewer(rows, layout, sources, path)
    report.scoring.append(f"Per-question evidence of these runs: [{VIEWER_FILE}]({VIEWER_FILE}) (offline HTML).")
    for table in report.tables:
        if table.name == "contrasts" and len(table.data):
            addresses = contrast_addresses(table.data, rows)
            table.data = table.data.assign(viewer=addresses)
            table.display = table.display.assign(viewer=[f"[view]({a})" for a in addresses])
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report view",
        description="Write a self-contained HTML evidence viewer (inline CSS and JS, nothing fetched) of the result "
        "rows under the given run or sweep directories.",
    )
    parser.add_argument("dirs", nargs="+", help="run or sweep directories")
    parser.add_argument(
        "--out", type=Path, default=None, help=f"the HTML file (default: <first dir>/{REPORT_DIR}/{VIEWER_FILE})"
    )
    parser.add_argument("--title", default=None, help="page title")
    parser.add_argument("--question", default=None, help="print the address of this question id's page")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = args.out or Path(args.dirs[0]) / REPORT_DIR / VIEWER_FILE
    start = time.perf_counter()
    try:
        rows, _ = load_runs(args.dirs)
        rows, layout = annotate(rows)
        if args.question is not None:
            match = rows.loc[rows["question_id"].astype(str) == args.question, "qkey"]
            if match.empty:
                raise ValueError(f"no row has question id {args.question!r} (under {', '.join(args.dirs)})")
        payload = write_viewer(rows, layout, args.dirs, out, args.title)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(
        f"wrote {out} ({size / 1e6:.1f} MB; {len(payload['questions'])} questions, {len(payload['variants'])} "
        f"policies, {len(payload['cells'])} cells) in {time.perf_counter() - start:.1f} s"
    )
    if args.question is not None:
        print(f"{out.resolve().as_uri()}#{question_hash(str(match.iloc[0]))}")
    return 0
