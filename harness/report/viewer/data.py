"""The viewer's data: result rows regrouped by question, one cell per (question, variant).

A *variant* is one policy (``harness.report.load.annotate``) at one setting (dataset, budget): the columns a
reader compares side by side. Each cell is the row of the variant's first seed for that question (seeds that
drew the same sample give the same row; ``seeds`` says how many there were). The heavy per-question parts
(snippet records, pool) stay the JSON strings the rows hold and are parsed in the browser only when a question
is opened, so a 29,100-row sweep loads as one compact payload.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.provenance import ANSWER_SPANS, POOL, SNIPPETS
from harness.metrics.registry import (
    ALL_GOLD_AT_K,
    ANSWER_IN_CONTEXT,
    ANSWER_IN_CONTEXT_GRADED,
    CONTEXT_TOKENS,
    EM,
    F1,
    GOLD_DOC_COVERAGE,
    RECALL_AT_K,
)
from harness.report.load import Layout, format_value, short_name

# The figures every index row and question page shows, where the rows have them.
METRICS = (F1, EM, ANSWER_IN_CONTEXT, ANSWER_IN_CONTEXT_GRADED, GOLD_DOC_COVERAGE, RECALL_AT_K, ALL_GOLD_AT_K)
# The tree stage's report columns a question page shows (the dtcrs and raptor builders of harness/tree/).
TREE_COLUMNS = (
    "tree.question_class",
    "tree.class_source",
    "tree.class_raw",
    "tree.annotated_class",
    "tree.built",
    "tree.toc",
    "tree.sub_questions",
    "tree.nodes_per_layer",
    "tree.summary_nodes",
    "tree.build_seconds",
)


@dataclass(frozen=True)
class Variant:
    label: str
    components: dict[str, str]
    dataset: str
    budget: int | None


def _clean(value: Any) -> Any:
    """A JSON-safe scalar: NaN and None become None, numpy scalars Python ones."""
    if value is None:
        return None
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def variant_label(policy: str, budget: Any = None, dataset: str | None = None) -> str:
    """A variant's name in the viewer: the policy, then the budget and dataset where those vary."""
    label = policy
    if budget is not None:
        label += f", B={format_value(budget)}"
    if dataset is not None:
        label += f" [{dataset}]"
    return label


def variants_of(rows: pd.DataFrame, layout: Layout) -> tuple[pd.Series, list[Variant]]:
    """Each row's variant index, and the variants in policy order then budget."""
    settings = [c for c in ("dataset", "budget") if c in rows.columns]
    keys = ["policy", *settings]
    grouped = rows.groupby(keys, sort=True, observed=True, dropna=False)
    codes = grouped.ngroup()
    budgets_vary = "budget" in rows.columns and rows["budget"].nunique() > 1
    datasets_vary = "dataset" in rows.columns and rows["dataset"].nunique() > 1
    variants: list[Variant] = []
    for values, group in grouped:
        values = values if isinstance(values, tuple) else (values,)
        named = dict(zip(keys, values, strict=True))
        first = group.iloc[0]
        components = {short_name(c): format_value(first[c]) for c in layout.policy if c in group}
        label = variant_label(
            str(named["policy"]),
            named.get("budget") if budgets_vary else None,
            str(named["dataset"]) if datasets_vary else None,
        )
        if budgets_vary:
            components["budget"] = format_value(named["budget"])
        budget = named.get("budget")
        variants.append(
            Variant(label, components, str(named.get("dataset", "")), None if budget is None else int(budget))
        )
    return codes, variants


def comparison_pairs(variants: Sequence[Variant]) -> list[list[Any]]:
    """(a, b, key) for every two variants of one dataset whose components differ in exactly one key: the
    contrasts a sweep offers."""
    pairs = []
    for a in range(len(variants)):
        for b in range(a + 1, len(variants)):
            va, vb = variants[a], variants[b]
            if va.dataset != vb.dataset or set(va.components) != set(vb.components):
                continue
            differ = [k for k in va.components if va.components[k] != vb.components[k]]
            if len(differ) == 1:
                pairs.append([a, b, differ[0]])
    return pairs


def _gold_answers(value: Any) -> list[str]:
    if not isinstance(value, str):
        return []
    try:
        answers = json.loads(value)
    except ValueError:
        return [value]
    return [str(a) for a in answers] if isinstance(answers, list) else [str(answers)]


def _tree_facts(row: dict[str, Any]) -> dict[str, Any] | None:
    facts = {c.removeprefix("tree."): _clean(row[c]) for c in TREE_COLUMNS if _clean(row.get(c)) is not None}
    for key in ("sub_questions", "nodes_per_layer"):
        if isinstance(facts.get(key), str):
            try:
                facts[key] = json.loads(facts[key])
            except ValueError:
                pass
    return facts or None


def build_payload(rows: pd.DataFrame, layout: Layout, sources: Sequence[str], title: str) -> dict[str, Any]:
    """Everything the page needs, JSON-ready."""
    codes, variants = variants_of(rows, layout)
    rows = rows.assign(_variant=codes.to_numpy())
    if "seed" in rows.columns:
        rows = rows.sort_values(["seed"], kind="stable")
    metrics = [m for m in METRICS if m in rows.columns and rows[m].notna().any()]
    provenance = SNIPPETS in rows.columns and rows[SNIPPETS].notna().any()
    seeds = rows.groupby(["qkey", "_variant"], observed=True).size().to_dict()
    first = rows.drop_duplicates(["qkey", "_variant"], keep="first").sort_values(["_variant"], kind="stable")
    wanted = ["qkey", "_variant", "question_id", "dataset", "question", "gold_answers", "context", "budget"]
    wanted += ["answer", "raw_answer", CONTEXT_TOKENS, SNIPPETS, POOL, ANSWER_SPANS, *metrics, *TREE_COLUMNS]
    # Plain dicts, not iterrows: a 29,100-row sweep is regrouped in a second or two.
    records = first[[c for c in dict.fromkeys(wanted) if c in first.columns]].to_dict("records")
    questions: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    cells: list[dict[str, Any]] = []
    for row in records:
        qkey = str(row["qkey"])
        question = by_key.get(qkey)
        if question is None:
            question = by_key[qkey] = {
                "id": str(row["question_id"]),
                "key": qkey,
                "ds": str(row.get("dataset", "")),
                "q": str(row.get("question", "")),
                "gold": _gold_answers(row.get("gold_answers")),
                "cells": {},
            }
            questions.append(question)
        variant = int(row["_variant"])
        cell = {
            "v": variant,
            "m": [_clean(row[m]) for m in metrics],
            "ctx": _clean(row.get("context")) or "",
            "tok": _clean(row.get(CONTEXT_TOKENS)),
            "B": _clean(row.get("budget")),
            "ans": _clean(row.get("answer")),
            "raw": _clean(row.get("raw_answer")),
            "seeds": int(seeds[(row["qkey"], variant)]),
        }
        for column, key in ((SNIPPETS, "sn"), (POOL, "pool"), (ANSWER_SPANS, "spans")):
            value = _clean(row.get(column))
            if value is not None:
                cell[key] = value  # a JSON string: parsed when the question is opened
        tree = _tree_facts(row)
        if tree is not None:
            cell["tree"] = tree
        question["cells"][variant] = len(cells)
        cells.append(cell)
    # Cells of one question sit together: gzip then finds the contexts and pools the variants share.
    order = [i for question in questions for i in question["cells"].values()]
    renumber = {old: new for new, old in enumerate(order)}
    for question in questions:
        question["cells"] = {v: renumber[i] for v, i in question["cells"].items()}
    cells = [cells[i] for i in order]
    return {
        "title": title,
        "sources": list(sources),
        "provenance": bool(provenance),
        "metrics": metrics,
        "variants": [
            {"label": v.label, "components": v.components, "dataset": v.dataset, "budget": v.budget} for v in variants
        ],
        "pairs": comparison_pairs(variants),
        "questions": questions,
        "cells": cells,
    }
