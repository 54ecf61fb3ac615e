"""What the report says about how its answers were scored: each dataset's official rule, and where the
gold answers are known to be incomplete (2WikiMultihopQA run without its alias file)."""

from __future__ import annotations

import pandas as pd


def scoring_lines(rows: pd.DataFrame) -> list[str]:
    """One line naming each dataset's EM/F1 rule (the rows' ``answer_scorer``), and one per dataset whose
    scores are a lower bound (``answers_lower_bound``); none for rows from before these columns."""
    lines: list[str] = []
    if "answer_scorer" in rows and "dataset" in rows and rows["answer_scorer"].notna().any():
        pairs = rows.dropna(subset=["answer_scorer"]).groupby("dataset", sort=True)["answer_scorer"].unique()
        rules = "; ".join(f"{dataset}: {', '.join(sorted(map(str, rule)))}" for dataset, rule in pairs.items())
        lines.append(f"EM/F1 follow each dataset's official script (harness.metrics.answers): {rules}.")
    if "answers_lower_bound" in rows and "dataset" in rows:
        flagged = rows[rows["answers_lower_bound"].astype("boolean").fillna(False)]
        for dataset, group in flagged.groupby("dataset", sort=True):
            questions = group["qkey"].nunique() if "qkey" in group else len(group)
            lines.append(
                f"**{dataset}: EM/F1 are a lower bound** for {questions} "
                "questions: the run had no `dataset.aliases` (the official id_aliases.json), so an answer given "
                "as one of the gold answer's aliases or demonyms scores 0."
            )
    return lines
