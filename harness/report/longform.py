"""The NarrativeQA table: corpus BLEU-1 / BLEU-4 beside mean ROUGE-L and METEOR, as the papers report them."""

from __future__ import annotations

import json
import math

import pandas as pd

from harness.metrics.longform import corpus_bleu_score
from harness.metrics.registry import METEOR, ROUGE_L
from harness.report.common import Options
from harness.report.formatting import ReportTable, fmt
from harness.report.load import Layout

SCORER = "bleu_rouge_meteor"
SCORERS_COLUMN = "cfg.dataset.scorers"


def _scored_by_bleu_rouge_meteor(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        names = json.loads(value)
    except ValueError:
        return False
    return isinstance(names, list) and SCORER in names


def narrativeqa_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The answered rows of runs whose dataset config names the ``bleu_rouge_meteor`` scorer."""
    if SCORERS_COLUMN not in rows or "answer" not in rows or "gold_answers" not in rows:
        return rows.iloc[0:0]
    chosen = rows[SCORERS_COLUMN].map(_scored_by_bleu_rouge_meteor).astype(bool)
    return rows[chosen & rows["answer"].notna()]


def narrativeqa_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    """Per setting and policy: corpus BLEU-1 and BLEU-4 (n-grams pooled over the policy's answered rows,
    every seed included), mean ROUGE-L and mean METEOR (NaN where WordNet was missing)."""
    scored = narrativeqa_rows(rows)
    if scored.empty:
        return None
    keys = [k for k in (*layout.settings, "policy") if k in scored]
    records = []
    for values, group in scored.groupby(keys, sort=True, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        predictions = group["answer"].astype(str).tolist()
        references = [json.loads(gold) for gold in group["gold_answers"]]
        meteor = group[METEOR].astype(float) if METEOR in group else pd.Series([math.nan])
        records.append(
            {
                **dict(zip(keys, values, strict=True)),
                "n_rows": len(group),
                "bleu1_corpus": corpus_bleu_score(predictions, references, 1),
                "bleu4_corpus": corpus_bleu_score(predictions, references, 4),
                "rougeL_mean": float(group[ROUGE_L].astype(float).mean()) if ROUGE_L in group else math.nan,
                "meteor_mean": float(meteor.mean()) if meteor.notna().any() else math.nan,
            }
        )
    data = pd.DataFrame(records)
    display = data.copy()
    for column in ("bleu1_corpus", "bleu4_corpus", "rougeL_mean", "meteor_mean"):
        display[column] = display[column].map(fmt)
    display = display.rename(
        columns={
            "bleu1_corpus": "BLEU-1 (corpus)",
            "bleu4_corpus": "BLEU-4 (corpus)",
            "rougeL_mean": "ROUGE-L",
            "meteor_mean": "METEOR",
        }
    )
    note = (
        "Corpus BLEU (unsmoothed; n-grams and lengths pooled over the rows) as RAPTOR and DTCRS report it, "
        "not the mean of the rows' sentence BLEU; ROUGE-L and METEOR are means over the rows. METEOR is "
        "missing where the runs had no WordNet."
    )
    return ReportTable("narrativeqa", "NarrativeQA: corpus BLEU, ROUGE-L, METEOR", data, display, note=note)


def longform_tables(rows: pd.DataFrame, layout: Layout, options: Options) -> list[ReportTable]:
    table = narrativeqa_table(rows, layout, options)
    return [table] if table is not None else []
