"""``python -m harness.report``: tables, CSVs and plots over the result rows of one or many runs."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.metrics.registry import ANSWER_IN_CONTEXT, F1, S_RECALL
from harness.report.contrasts import resolve_baseline
from harness.report.formatting import print_tables, render_markdown
from harness.report.load import (
    REPORT_DIR,
    Layout,
    RunInfo,
    annotate,
    display_path,
    load_runs,
    short_name,
    varies,
)
from harness.report.numerics import numerics_note, numerics_splits
from harness.report.plots import plot_budget_curves, plot_diversity, plot_reader_ladder
from harness.report.scoring import scoring_lines
from harness.report.sections import SectionInputs, build_sections
from harness.report.tables import Options, Report, has_values, mmr_footnote
from harness.report.tracked import refuse_tracked
from harness.report.viewer import attach_viewer

log = logging.getLogger("harness.report")

DESCRIPTION = """\
Analyse the result rows (rows.parquet) of one run directory, a sweep directory (Hydra multirun: numbered
job directories; failed jobs are skipped with a warning) or several of either. Writes report.md, one CSV
per table and PNG plots, and prints the tables.

Sections appear when the rows hold what they need: the policy table; diagnostic validity; incremental
validity of answer-in-context over recall@k; the retrieval-perfect subset; paired contrasts against a
baseline (Holm-adjusted) and their per-question decomposition; oracle headroom; the diversity study
(operating points tuned on a validation split, S-Recall on test, per perturbation level).
"""

EPILOG = """\
examples:
  python -m harness.report outputs/multirun/2026-11-29/14-00-00
  python -m harness.report outputs/runs/2026-11-29/09-12-00 outputs/runs/2026-11-29/10-40-13 --out report/
  python -m harness.report SWEEP --metric em --baseline packer=packed --resamples 2000
  python -m harness.report diff SWEEP --a packer=submod --b packer=packed   # the questions they disagree on
  python -m harness.report replicate        # outputs/studies/replication.md from the studies there
                                            # (python -m harness.report replicate --help)
"""


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run or sweep directories (searched for rows.parquet)")
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="where to write the report (default: DIR/report for one directory, else "
        "report/ in the directories' common parent)",
    )
    parser.add_argument(
        "--metric",
        default=F1,
        help="reader score for contrasts, oracle headroom, incremental validity (default: f1; rows without "
        "answers: answer_in_context when packers vary, else s_recall)",
    )
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help="baseline policy of the paired contrasts: a component value (packed, knn, ...) or "
        "COLUMN=VALUE (default: packed, else knn, when present)",
    )
    parser.add_argument(
        "--reference", default="knn", metavar="NAME", help="the diversity study's reference diversifier (default: knn)"
    )
    parser.add_argument(
        "--resamples",
        dest="n_resamples",
        type=_positive_int,
        default=10000,
        metavar="N",
        help="bootstrap resamples for intervals and contrasts (default: 10000)",
    )
    parser.add_argument(
        "--study-resamples",
        type=_positive_int,
        default=1999,
        metavar="N",
        help="bootstrap resamples of the diversity study's contrasts (default: 1999)",
    )
    parser.add_argument("--confidence", type=_fraction, default=0.95, help="interval level (default: 0.95)")
    parser.add_argument(
        "--val-fraction",
        type=_fraction,
        default=0.2,
        help="share of questions used to tune the diversity study's operating points (default: 0.2)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every resampling and of the split (default: 0)")
    parser.add_argument("--no-plots", action="store_true", help="write tables only")
    parser.add_argument(
        "--no-viewer", action="store_true", help="do not write viewer.html (python -m harness.report view) beside it"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the tables")
    parser.add_argument(
        "--force", action="store_true", help="write into an --out folder holding files git tracks (refused otherwise)"
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so the sections it registers (register_section) join the report; repeatable",
    )
    return parser


def import_section_modules(modules: Sequence[str]) -> None:
    """Import the modules named by --import: a module outside the package registers its sections on import."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"--import {module}: {error}") from error


def selection_metric(rows: pd.DataFrame) -> str:
    """The metric of a study without reader answers: answer-in-context when packers are compared (what a
    packer puts before the reader), S-Recall when only the selection before packing varies."""
    packer_columns = [c for c in rows.columns if c == "packer" or c.startswith("cfg.packer.")]
    return ANSWER_IN_CONTEXT if any(varies(rows[c]) for c in packer_columns) else S_RECALL


def resolve_metric(rows: pd.DataFrame, options: Options) -> Options:
    """The options with the metric the rows can support: selection-only sweeps (read=false) have no
    answers, so the default F1 becomes their selection metric. An explicit --metric is kept as given."""
    if options.metric != F1 or has_values(rows, F1):
        return options
    preferred = selection_metric(rows)
    metric = next((m for m in (preferred, ANSWER_IN_CONTEXT, S_RECALL) if has_values(rows, m)), None)
    if metric is None:
        return options
    log.info("no F1 in these rows (read=false runs): reporting %s", metric)
    return dataclasses.replace(options, metric=metric)


def build_report(rows: pd.DataFrame, layout: Layout, infos: Sequence[RunInfo], options: Options) -> Report:
    """Every registered section (``harness.report.sections``) the rows support, in section order."""
    options = resolve_metric(rows, options)
    if not has_values(rows, options.metric):
        numeric = sorted(c for c in rows.columns if pd.api.types.is_numeric_dtype(rows[c]) and not c.startswith("cfg."))
        raise ValueError(f"--metric {options.metric!r} is not a numeric column of the rows (numeric: {numeric})")
    # An explicit baseline that names nothing is an input error: report it before any work is done.
    baseline = resolve_baseline(rows, layout, options.baseline) if options.baseline and layout.policy else None
    note = numerics_note(numerics_splits(rows))
    report = Report(layout=layout, scoring=scoring_lines(rows), notes=[note] if note else [])
    report.tables = build_sections(SectionInputs(rows, layout, options, infos, baseline, report))
    footnote = mmr_footnote(rows)
    for table in report.tables:
        table.footnote = footnote
    return report


def default_out_dir(dirs: Sequence[str]) -> Path:
    if len(dirs) == 1:
        return Path(dirs[0]) / REPORT_DIR
    common = Path(os.path.commonpath([str(Path(d).resolve()) for d in dirs]))
    if common == Path(common.anchor):
        raise SystemExit("the directories share no parent below the filesystem root; give --out")
    return common / REPORT_DIR


def write_report(report: Report, out_dir: Path, dirs: Sequence[str], options: Options, plots: bool) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for table in report.tables:
        path = out_dir / f"{table.name}.csv"
        table.data.to_csv(path, index=False)
        written.append(path)
    images: list[Path] = []
    if plots:
        layout = report.layout
        images += plot_budget_curves(report.policy_data, layout, out_dir)
        images += plot_reader_ladder(report.contrast_data, layout, options.metric, out_dir)
        for i, result in enumerate(report.studies):
            images += plot_diversity(result, out_dir, index=i)
    written += images
    preamble = [
        *(line for note in report.notes for line in (f"**{note}**", "")),
        f"Inputs: {', '.join(f'`{display_path(d)}`' for d in dirs)}.",
        (
            f"Policy columns: {', '.join(short_name(c) for c in report.layout.policy) or 'none vary'}; "
            f"settings: {', '.join(report.layout.settings) or 'none'}. Metric: {options.metric}; "
            f"{options.n_resamples} bootstrap resamples; seed {options.seed}."
        ),
        *report.scoring,
    ]
    markdown = render_markdown(report.tables, "Evaluation report", preamble, [p.name for p in images])
    path = out_dir / "report.md"
    path.write_text(markdown, encoding="utf-8")
    written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Every option of the report is a command-line argument of the same name.
    options = Options(**{option.name: getattr(args, option.name) for option in dataclasses.fields(Options)})
    try:
        import_section_modules(args.imports)
        rows, infos = load_runs(args.dirs)
        rows, layout = annotate(rows)
        options = resolve_metric(rows, options)
        report = build_report(rows, layout, infos, options)
        out_dir = args.out or default_out_dir(args.dirs)
        refuse_tracked([out_dir], args.force)
    except (FileNotFoundError, FileExistsError, ValueError) as error:  # FileExistsError: a tracked --out
        print(f"error: {error}", file=sys.stderr)
        return 2
    viewer = None if args.no_viewer else attach_viewer(report, rows, layout, out_dir, args.dirs)
    written = write_report(report, out_dir, args.dirs, options, plots=not args.no_plots)
    written += [viewer] if viewer is not None else []
    if not args.quiet:
        from rich.console import Console

        # Piped output has no terminal width to follow; a wide page keeps the tables unwrapped.
        console = Console(width=None if sys.stdout.isatty() else 200)
        for note in report.notes:
            console.print(note, markup=False, style="bold")
        print_tables(report.tables, console)
    log.info("%d files written to %s", len(written), out_dir)
    return 0
