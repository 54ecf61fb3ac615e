"""``python -m harness.report diff``: the questions on which two policies of a sweep disagree, in the terminal.

``--a`` and ``--b`` pick the two policies by ``key=value`` filters on the rows (``packer=submod``; a config
key such as ``packer.alpha=0.5`` is looked up as ``cfg.packer.alpha``; several filters joined by commas must
all hold). Their rows are paired on question and on the settings that vary (dataset, budget), a question's
seeds averaged, and the pairs whose metric differs are listed, largest difference first. ``--question ID``
prints that question's two contexts side by side instead (rich columns: the policy, its figures, its answer
and the context the reader saw), one pair per setting. The evidence viewer (``python -m harness.report view``)
stays the place for browsing; this is the look-up from a shell.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.metrics.registry import ANSWER_IN_CONTEXT, F1
from harness.report.common import has_values
from harness.report.load import annotate, format_value, load_runs

log = logging.getLogger("harness.report.diff")

SETTINGS = ("dataset", "budget")
SHOWN = (F1, "em", ANSWER_IN_CONTEXT, "gold_doc_coverage", "context_tokens")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report diff",
        description="List the questions on which two policies of the runs disagree on a metric, or print one "
        "question's two contexts side by side.",
        epilog="example: python -m harness.report diff outputs/first-study --a packer=submod --b packer=packed "
        "--metric answer_in_context",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run or sweep directories (searched for rows.parquet)")
    parser.add_argument("--a", required=True, metavar="KEY=VALUE[,KEY=VALUE]", help="the first policy's rows")
    parser.add_argument("--b", required=True, metavar="KEY=VALUE[,KEY=VALUE]", help="the second policy's rows")
    parser.add_argument(
        "--metric", default=None, help=f"the figure compared (default: {F1}, else {ANSWER_IN_CONTEXT} without answers)"
    )
    parser.add_argument("--budget", type=int, default=None, help="only this budget (default: every budget)")
    parser.add_argument("--question", default=None, metavar="ID", help="print this question's two contexts")
    parser.add_argument("--limit", type=int, default=20, help="questions listed (default: 20; 0: all)")
    return parser


def _column(rows: pd.DataFrame, key: str, where: str) -> str:
    for column in (key, f"cfg.{key}"):
        if column in rows.columns:
            return column
    raise ValueError(f"{where}: {key!r} is neither a row column nor a config key of these runs")


def select(rows: pd.DataFrame, filters: str, option: str) -> pd.DataFrame:
    """The rows matching every ``key=value`` of ``filters`` (values compared as the report prints them)."""
    mask = pd.Series(True, index=rows.index)
    for item in filters.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise ValueError(f"{option} {filters!r}: give KEY=VALUE filters, e.g. packer=submod")
        column = _column(rows, key, f"{option} {filters!r}")
        shown = rows[column].map(format_value)
        if not (shown == value).any():
            values = ", ".join(sorted(set(shown)))
            raise ValueError(f"{option} {filters!r}: no row has {key}={value} ({key}: {values})")
        mask &= shown == value
    picked = rows[mask]
    if picked.empty:
        raise ValueError(f"{option} {filters!r}: no row matches all of these")
    policies = sorted(picked["policy"].astype(str).unique())
    if len(policies) > 1:  # several policies averaged together would compare nothing in particular
        raise ValueError(f"{option} {filters!r} matches {len(policies)} policies ({'; '.join(policies)}): add filters")
    return picked


def paired(a: pd.DataFrame, b: pd.DataFrame, metric: str, settings: Sequence[str]) -> pd.DataFrame:
    """One row per (setting, question) both policies answered: their metric (seeds averaged) and a − b."""
    keys = [*settings, "qkey"]
    means = [
        frame.groupby(keys, dropna=False).agg(question_id=("question_id", "first"), **{side: (metric, "mean")})
        for frame, side in ((a, "a"), (b, "b"))
    ]
    pairs = means[0].join(means[1][["b"]], how="inner").reset_index()
    pairs = pairs.dropna(subset=["a", "b"])
    return pairs.assign(diff=pairs["a"] - pairs["b"])


def list_disagreements(pairs: pd.DataFrame, names: tuple[str, str], metric: str, limit: int, console: Console) -> None:
    differ = pairs[pairs["diff"] != 0].sort_values("diff", key=lambda d: -d.abs(), kind="stable")
    better_a, better_b = int((differ["diff"] > 0).sum()), int((differ["diff"] < 0).sum())
    console.print(
        f"{len(differ)} of {len(pairs)} (question, setting) pairs differ on {metric}: {names[0]} higher on "
        f"{better_a}, {names[1]} higher on {better_b}",
        highlight=False,
    )
    if differ.empty:
        return
    settings = [c for c in SETTINGS if c in differ.columns]
    table = Table()
    for column in ("question", *settings, names[0], names[1], "a − b"):
        table.add_column(column, justify="left" if column == "question" else "right", overflow="fold")
    shown = differ if limit <= 0 else differ.head(limit)
    for row in shown.itertuples(index=False):
        table.add_row(
            str(row.question_id),
            *(format_value(getattr(row, c)) for c in settings),
            f"{row.a:.3g}",
            f"{row.b:.3g}",
            f"{row.diff:+.3g}",
        )
    console.print(table)
    if len(shown) < len(differ):
        console.print(f"... and {len(differ) - len(shown)} more (--limit 0 lists all)", highlight=False)


def _answers(value) -> str:
    try:
        answers = json.loads(value)
    except (TypeError, ValueError):
        return str(value)
    return " | ".join(map(str, answers)) if isinstance(answers, list) else str(answers)


def _cell(rows: pd.DataFrame) -> Text:
    """A policy's column under its name: its figures and answer, then the context, as plain text (a context's
    brackets are not markup)."""
    row = rows.iloc[0]  # the first seed's row: seeds that drew the same sample hold the same context
    figures = ", ".join(f"{m} {row[m]:.3g}" for m in SHOWN if m in rows.columns and pd.notna(row[m]))
    answer = row.get("answer")
    head = [figures] + ([f"answer: {answer}"] if isinstance(answer, str) else [])
    context = str(row.get("context") or "(empty context)")
    return Text.assemble("\n".join(head), "\n\n", context)


def side_by_side(
    a: pd.DataFrame, b: pd.DataFrame, question: str, names: tuple[str, str], settings: Sequence[str], console: Console
) -> None:
    a, b = (pd.DataFrame(frame[frame["question_id"].astype(str) == question]) for frame in (a, b))
    if a.empty or b.empty:
        raise ValueError(f"question {question!r} has no row under {names[0] if a.empty else names[1]}")
    first = a.iloc[0]
    console.print(Text.assemble((question, "bold"), f": {first.get('question', '')}"))
    if "gold_answers" in a.columns:
        console.print(f"gold: {_answers(first['gold_answers'])}", highlight=False, markup=False)
    groups = a.groupby(list(settings), dropna=False) if settings else [((), a)]
    for values, at_a in groups:
        values = values if isinstance(values, tuple) else (values,)
        where = dict(zip(settings, values, strict=True))
        at_b = b
        for column, value in where.items():
            at_b = at_b[at_b[column] == value]
        if at_b.empty:
            continue
        title = ", ".join(f"{k}={format_value(v)}" for k, v in where.items())
        table = Table(title=title or None, show_lines=False, expand=True)
        table.add_column(names[0], ratio=1, overflow="fold")
        table.add_column(names[1], ratio=1, overflow="fold")
        table.add_row(*(_cell(f.sort_values("seed") if "seed" in f else f) for f in (at_a, at_b)))
        console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Piped output has no terminal width to follow; a wide page keeps the two contexts readable.
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        rows, _ = load_runs(args.dirs)
        # The settings the runs vary, before --budget keeps one: a pair is still shown with its budget.
        settings = [c for c in SETTINGS if c in rows.columns and rows[c].nunique(dropna=False) > 1]
        if args.budget is not None:
            rows = rows[rows["budget"] == args.budget]
            if rows.empty:
                raise ValueError(f"--budget {args.budget}: no rows at that budget")
        rows, _ = annotate(rows)
        a, b = select(rows, args.a, "--a"), select(rows, args.b, "--b")
        metric = args.metric or (F1 if has_values(rows, F1) else ANSWER_IN_CONTEXT)
        if not has_values(rows, metric):
            raise ValueError(f"--metric {metric!r} has no values in these rows")
        names = (args.a, args.b)
        if args.question is not None:
            side_by_side(a, b, args.question, names, settings, console)
        else:
            list_disagreements(paired(a, b, metric, settings), names, metric, args.limit, console)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
