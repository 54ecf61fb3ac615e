"""Weights & Biases logging: one W&B run per harness run, offline unless configured otherwise."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness.metrics.registry import metric_names

log = logging.getLogger(__name__)

# The per-question W&B table: what identifies the question and its answer, then the registry's W&B metrics.
TABLE_COLUMNS = ["question_id", "question", "gold_answers", "answer", *metric_names(wandb=True)]


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
    ) -> None:
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"logger.mode must be offline, online or disabled, got {mode!r}")
        self.project, self.entity, self.mode = project, entity, mode
        self.group, self.tags, self.log_table = group, list(tags or []), log_table

    def log_run(self, cfg: DictConfig, rows: pd.DataFrame, summary: dict, output_dir: Path) -> None:
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
            name=" ".join(f"{k}={v}" for k, v in summary["run"].items()),
            config=OmegaConf.to_container(cfg, resolve=True),
            reinit="finish_previous",
        )
        try:
            run.summary.update({name: m["mean"] for name, m in summary["metrics"].items()})
            run.summary.update({f"{name}_ci_low": m["ci_low"] for name, m in summary["metrics"].items()})
            run.summary.update({f"{name}_ci_high": m["ci_high"] for name, m in summary["metrics"].items()})
            run.summary["n_questions"] = summary["n_questions"]
            if self.log_table:
                columns = [c for c in TABLE_COLUMNS if c in rows.columns]
                run.log({"questions": wandb.Table(dataframe=rows[columns])})
        finally:
            run.finish()
        if self.mode == "offline":
            log.info(
                "W&B offline run in %s/wandb (upload with: wandb sync %s/wandb/offline-run-*)", output_dir, output_dir
            )
