"""Command line: ``python -m harness <overrides>`` (``-m`` for a multirun sweep, ``--help`` for groups)."""

from __future__ import annotations

import logging
import os
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

log = logging.getLogger("harness")

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")

# Offline by default: a model id that is not a local path must never trigger a download attempt that hangs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    from harness.pipeline import run

    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    choices = dict(hydra_cfg.runtime.choices)
    try:
        run(cfg, output_dir, choices=choices)
    except Exception:
        # In a sweep one failed job must not kill the others: record the error and go on.
        if hydra_cfg.mode == RunMode.MULTIRUN:
            (output_dir / "error.txt").write_text(traceback.format_exc())
            log.error("job %s failed; traceback in %s", hydra_cfg.job.num, output_dir / "error.txt")
            return
        raise
    finally:
        try:
            import wandb

            if wandb.run is not None:
                wandb.finish(exit_code=1)
        except ImportError:
            pass


if __name__ == "__main__":
    main()
