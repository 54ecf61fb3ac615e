"""Weights & Biases logging: one W&B run per harness run, offline unless configured otherwise."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness.cache.postgres import redacted_config
from harness.core.checkout import code_identity
from harness.metrics.provenance import ANSWER_SPANS, PROVENANCE_COLUMNS, SNIPPETS
from harness.metrics.registry import metric_names
from harness.runlog.outputs import run_title

log = logging.getLogger(__name__)

# The per-question W&B table: what identifies the question and its answer, then the registry's W&B metrics.
TABLE_COLUMNS = ["question_id", "question", "gold_answers", "answer", *metric_names(wandb=True)]
# After them, where the rows have them: the context as an HTML cell with the evidence viewer's marks
# (harness.report.viewer.markup), then the provenance columns as their JSON strings
# (harness.metrics.provenance).
CONTEXT_COLUMN = "context"
CONTEXT_TABLE_COLUMNS = [CONTEXT_COLUMN, *PROVENANCE_COLUMNS]


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def question_table(rows: pd.DataFrame, context: bool = True):
    """The per-question ``wandb.Table``: ``TABLE_COLUMNS`` the rows hold, then (``context``) the context as
    ``wandb.Html`` and the provenance columns as strings."""
    import wandb

    # Here, not at the top: the viewer package imports the report loader, which a run does not need.
    from harness.report.viewer.markup import context_html

    frame = rows[[c for c in TABLE_COLUMNS if c in rows.columns]].copy()
    if context and CONTEXT_COLUMN in rows.columns:
        snippets = rows[SNIPPETS] if SNIPPETS in rows.columns else [None] * len(rows)
        spans = rows[ANSWER_SPANS] if ANSWER_SPANS in rows.columns else [None] * len(rows)
        frame[CONTEXT_COLUMN] = [
            # inject=False: the fragment carries its own inline styles and must not fetch W&B's stylesheet.
            wandb.Html(context_html(_text_or_none(text) or "", _text_or_none(sn), _text_or_none(sp)), inject=False)
            for text, sn, sp in zip(rows[CONTEXT_COLUMN], snippets, spans, strict=True)
        ]
        for column in PROVENANCE_COLUMNS:
            if column in rows.columns:
                frame[column] = [_text_or_none(v) for v in rows[column]]
    return wandb.Table(dataframe=frame.reset_index(drop=True))


def sweep_group() -> str | None:
    """Jobs of one Hydra multirun share a W&B group named after the sweep directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return str(HydraConfig.get().sweep.dir)


class WandbLogger:
    def __init__(
        self,
        project: str = "budgeted-rag",
        entity: str | None = None,
        mode: str = "offline",
        group: str | None = None,
        tags: list[str] | None = None,
        log_table: bool = True,
        log_context: bool = True,
    ) -> None:
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"logger.mode must be offline, online or disabled, got {mode!r}")
        self.project, self.entity, self.mode = project, entity, mode
        self.group, self.tags, self.log_table = group, list(tags or []), log_table
        self.log_context = log_context

    def log_run(self, cfg: DictConfig, rows: pd.DataFrame, summary: dict, output_dir: Path) -> None:
        if self.mode == "disabled":  # W&B would record nothing: skip its import, start-up and the question table
            return
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        group = self.group or sweep_group()
        run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=self.mode,
            group=group,
            job_type="sweep-job" if group else "run",
            tags=self.tags,
            dir=str(output_dir),
            name=run_title(summary),
            config={
                **redacted_config(OmegaConf.to_container(cfg, resolve=True)),  # type: ignore[arg-type]
                "code": summary.get("code") or code_identity(),  # which checkout and commit ran
                # the data read (files with their sha256, questions) and the machine (summary.json's blocks)
                **{key: summary[key] for key in ("data", "machine") if summary.get(key) is not None},
            },
            reinit="finish_previous",
        )
        try:
            run.summary.update({name: m["mean"] for name, m in summary["metrics"].items()})
            run.summary.update({f"{name}_ci_low": m["ci_low"] for name, m in summary["metrics"].items()})
            run.summary.update({f"{name}_ci_high": m["ci_high"] for name, m in summary["metrics"].items()})
            run.summary["n_questions"] = summary["n_questions"]
            if self.log_table:
                run.log({"questions": question_table(rows, context=self.log_context)})
        finally:
            run.finish()
        if self.mode == "offline":
            log.info(
                "W&B offline run in %s/wandb (upload with: wandb sync %s/wandb/offline-run-*)", output_dir, output_dir
            )
