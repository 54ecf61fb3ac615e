"""One row per question: the question, the run's components, the answer and its scores, every stage's
figures, the packed context and the flattened config."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.cache.postgres import redacted
from harness.core.types import Context, Example, Pool
from harness.data.aliases import LOWER_BOUND
from harness.metrics import exact_match, f1_score
from harness.metrics.answers import DEFAULT_ANSWER_SCORER, answer_precision_recall, check_answer_scorer
from harness.metrics.longform import check_scorers, dataset_scores
from harness.metrics.registry import EM, F1
from harness.metrics.support import joint_scores


@dataclass
class Prepared:
    """One question after packing: everything the reader needs and every reader-independent figure."""

    pool: Pool
    selected: Pool
    context: Context
    context_text: str
    prompt: str
    figures: dict[str, Any]


def flatten_config(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """Dotted config keys -> scalar values (lists as JSON), for one-row-per-question tables; ``cfg`` a config or
    its resolved container."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, list):
            flat[prefix[:-1]] = json.dumps(node)
        else:
            flat[prefix[:-1]] = node

    walk(OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg, "")
    return flat


def config_columns(resolved: dict[str, Any]) -> dict[str, Any]:
    """The ``cfg.*`` columns: the flattened resolved config, the cache password masked (rows travel)."""
    columns = {f"cfg.{k}": v for k, v in flatten_config(resolved).items()}
    if columns.get("cfg.cache.url"):
        columns["cfg.cache.url"] = redacted(columns["cfg.cache.url"])
    return columns


@dataclass
class RowBuilder:
    """Builds a run's rows; the dataset's scoring rules are checked when it is made (before any model loads)."""

    cfg: DictConfig
    components: dict[str, str] = field(default_factory=dict)  # tree, diversifier, packer and reader names
    scorers: tuple = field(init=False)
    answer_scorer: str = field(init=False)
    # run_columns by the choices they were built from: the same for every row of a job, and reading the
    # config's values through OmegaConf for each of tens of thousands of rows was a sweep's largest row cost.
    _run_columns: dict[tuple, dict[str, Any]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.scorers = check_scorers(self.cfg.dataset.get("scorers"))
        self.answer_scorer = check_answer_scorer(str(self.cfg.dataset.get("answer_scorer") or DEFAULT_ANSWER_SCORER))

    def row(
        self,
        item: Prepared,
        answer: str | None,
        raw_answer: str | None,
        choices: dict[str, str],
        config: dict[str, Any],
    ) -> dict:
        """One question's row: the figures of ``Pipeline.prepare`` (among them each stage's own report as
        ``tree.*``, ``diversify.*`` and ``pack.*`` columns) between the question, run and answer columns
        and the context and config."""
        return {
            **self.question_columns(item.pool.example),
            **self.run_columns(choices),
            **self.answer_columns(item.pool.example, answer, raw_answer, item.figures),
            **item.figures,
            "context": item.context_text,
            **config,
        }

    def question_columns(self, ex: Example) -> dict[str, Any]:
        return {
            "question_id": ex.question_id,
            "dataset": ex.dataset or self.cfg.dataset.get("name", ""),
            "split": ex.split,
            "question": ex.question,
            "gold_answers": json.dumps(list(ex.answers)),
            "hops": ex.hops,
            "qtype": ex.qtype,
        }

    def run_columns(self, choices: dict[str, str]) -> dict[str, Any]:
        key = (tuple(choices.items()), tuple(self.components.items()))
        if key not in self._run_columns:
            self._run_columns[key] = self._build_run_columns(choices)
        return self._run_columns[key]

    def _build_run_columns(self, choices: dict[str, str]) -> dict[str, Any]:
        cfg, names = self.cfg, self.components
        return {
            "retriever": choices.get("retriever", ""),
            "reranker": choices.get("reranker", "none"),
            "perturb": choices.get("perturb", "none"),
            "tree": names["tree"],
            "diversifier": names["diversifier"],
            "packer": names["packer"],
            "budget": int(cfg.budget),
            "k": int(cfg.k),
            "seed": int(cfg.seed),
            "reader": names["reader"],
            "reader_numerics": names.get("reader_numerics", ""),
        }

    def answer_columns(
        self, ex: Example, answer: str | None, raw_answer: str | None, figures: dict[str, Any]
    ) -> dict[str, Any]:
        """The answer, the whole generation and their scores under the dataset's official rule
        (``answer_scorer``), the joint answer x supporting-fact scores where the row has sp figures and,
        for 2Wiki, whether the gold answers lack the official aliases (scores a lower bound)."""
        rule = self.answer_scorer
        columns: dict[str, Any] = {
            "answer": answer,
            "raw_answer": None if answer is None else (answer if raw_answer is None else raw_answer),
            "answer_scorer": rule,
        }
        if LOWER_BOUND in ex.metadata:
            columns[LOWER_BOUND] = bool(ex.metadata[LOWER_BOUND])
        if answer is None:
            return {**columns, EM: float("nan"), F1: float("nan")}
        em = exact_match(answer, ex.answers)
        precision, recall = answer_precision_recall(answer, ex.answers, rule)
        return {
            **columns,
            EM: em,
            F1: f1_score(answer, ex.answers, rule),
            **joint_scores(em, precision, recall, figures),
            **dataset_scores(answer, ex, self.scorers),
        }
