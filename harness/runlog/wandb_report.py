"""A sweep's report as one W&B run: ``job_type: report`` in the sweep's W&B group, beside its jobs' runs.

After a Hydra multirun whose logger is W&B, the ``WandbReport`` callback (conf/hydra/callbacks/wandb_report.yaml,
pulled in by conf/logger/wandb.yaml, so ``logger=none`` sweeps have none) builds the report of the sweep
directory as ``python -m harness.report SWEEP_DIR`` does (``SWEEP_DIR/report``: one CSV per table, PNG
plots, report.md and the evidence viewer ``viewer.html``, here written for rows without provenance too),
then logs one run holding each CSV as a ``wandb.Table`` (``report/<table>``), each plot as a ``wandb.Image``
(``plots/<name>``), the viewer as an artifact of type ``viewer`` and the report directory as an artifact of
type ``report``. Offline by default, like the jobs' runs: the run folder is ``SWEEP_DIR/wandb/offline-run-*``.

The callback never fails the sweep: a report that cannot be built or logged is a warning naming the
command that retries it, ``python -m harness.runlog.wandb_report SWEEP_DIR`` (also the way to log the
report of a sweep that ran with ``logger=none``, or again with other options).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.metrics.registry import F1

log = logging.getLogger(__name__)

REPORT_JOB_TYPE = "report"
VIEWER_ARTIFACT_TYPE = "viewer"
REPORT_ARTIFACT_TYPE = "report"
WANDB_LOGGER_TARGET = "harness.runlog.wandb_logger.WandbLogger"
RETRY = "python -m harness.runlog.wandb_report"


def artifact_slug(sweep_dir: Path) -> str:
    """A W&B artifact name part for a sweep directory: its last two path parts (``2026-12-02-05-13-00``)."""
    parts = sweep_dir.resolve().parts[-2:]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(parts)).strip("-.") or "sweep"


def recorded_group(sweep_dir: Path) -> str:
    """The W&B group of the sweep's job runs: the ``hydra.sweep.dir`` a job recorded, else ``sweep_dir``."""
    for hydra_file in sorted(sweep_dir.glob("*/.hydra/hydra.yaml")):
        try:
            return str(OmegaConf.load(hydra_file).hydra.sweep.dir)
        except (OSError, ValueError, OmegaConfBaseException):
            continue
    return str(sweep_dir)


def build_report_dir(sweep_dir: Path, options: Any, plots: bool = True) -> tuple[Path, dict[str, Any]]:
    """``sweep_dir/report`` written as ``python -m harness.report SWEEP_DIR`` writes it, plus the viewer;
    returns the directory and figures of the sweep for the run's summary."""
    from harness.report.cli import build_report, default_out_dir, resolve_metric, write_report
    from harness.report.load import annotate, load_runs
    from harness.report.viewer import VIEWER_FILE, attach_viewer, write_viewer

    dirs = [str(sweep_dir)]
    rows, infos = load_runs(dirs)
    rows, layout = annotate(rows)
    options = resolve_metric(rows, options)
    report = build_report(rows, layout, infos, options)
    out_dir = default_out_dir(dirs)
    # As the report command writes it: the viewer beside report.md, linked from it and from each contrast.
    if attach_viewer(report, rows, layout, out_dir, dirs) is None:
        write_viewer(rows, layout, dirs, out_dir / VIEWER_FILE)  # rows from before provenance: plain contexts
    write_report(report, out_dir, dirs, options, plots=plots)
    facts = {
        "n_jobs": len(infos),
        "n_rows": len(rows),
        "n_questions": int(rows["question_id"].nunique()) if "question_id" in rows.columns else len(rows),
        "metric": options.metric,
        "policy_columns": list(layout.policy),
    }
    return out_dir, facts


def log_report(
    sweep_dir: Path,
    project: str = "budgeted-rag",
    entity: str | None = None,
    mode: str = "offline",
    group: str | None = None,
    tags: Sequence[str] = (),
    options: Any = None,
    plots: bool = True,
) -> Path:
    """Build the sweep's report and viewer and log them as one ``job_type: report`` run (see the module doc);
    returns the report directory."""
    import pandas as pd  # here, not at the top: the callback loads with every W&B run's config check
    import wandb

    from harness.report.tables import Options
    from harness.report.viewer import VIEWER_FILE

    if mode not in ("offline", "online", "disabled"):
        raise ValueError(f"logger.mode must be offline, online or disabled, got {mode!r}")
    sweep_dir = Path(sweep_dir)
    options = options or Options()
    out_dir, facts = build_report_dir(sweep_dir, options, plots=plots)
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(
        project=project,
        entity=entity,
        mode=mode,
        group=group or recorded_group(sweep_dir),
        job_type=REPORT_JOB_TYPE,
        tags=list(tags),
        dir=str(sweep_dir),
        name=f"report {sweep_dir.name}",
        config={"sweep_dir": str(sweep_dir), "resamples": options.n_resamples, "seed": options.seed, **facts},
        reinit="finish_previous",
    )
    try:
        media: dict[str, Any] = {}
        for path in sorted(out_dir.glob("*.csv")):
            try:
                media[f"report/{path.stem}"] = wandb.Table(dataframe=pd.read_csv(path))
            except (pd.errors.EmptyDataError, ValueError) as problem:
                log.warning("report table %s not logged: %s", path.name, problem)
        for path in sorted(out_dir.glob("*.png")):
            media[f"plots/{path.stem}"] = wandb.Image(str(path))
        run.log(media)
        run.summary.update({k: v for k, v in facts.items() if not isinstance(v, list)})
        slug = artifact_slug(sweep_dir)
        viewer = out_dir / VIEWER_FILE
        if viewer.exists():
            artifact = wandb.Artifact(f"viewer-{slug}", type=VIEWER_ARTIFACT_TYPE, description=f"{sweep_dir}")
            artifact.add_file(str(viewer), name=VIEWER_FILE)
            run.log_artifact(artifact)
        artifact = wandb.Artifact(f"report-{slug}", type=REPORT_ARTIFACT_TYPE, description=f"{sweep_dir}")
        for path in sorted(out_dir.iterdir()):
            if path.is_file() and path.name != VIEWER_FILE:
                artifact.add_file(str(path), name=path.name)
        run.log_artifact(artifact)
    finally:
        run.finish()
    if mode == "offline":
        log.info("W&B report run in %s/wandb (upload with: wandb sync %s/wandb/offline-run-*)", sweep_dir, sweep_dir)
    return out_dir


class WandbReport(Callback):
    """After a sweep whose logger is W&B: its report run (``log_report``). Never fails the sweep."""

    def __init__(self, resamples: int = 10000, plots: bool = True, metric: str = F1, baseline: str | None = None):
        self.resamples, self.plots, self.metric, self.baseline = int(resamples), bool(plots), metric, baseline

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = "the sweep directory"
        try:
            sweep_dir = str(config.hydra.sweep.dir)
            logger = config.get("logger")
            if not logger or logger.get("_target_") != WANDB_LOGGER_TARGET or logger.get("mode") == "disabled":
                return
            from harness.report.tables import Options

            options = Options(metric=self.metric, baseline=self.baseline, n_resamples=self.resamples)
            log_report(
                Path(sweep_dir),
                project=str(logger.get("project") or "budgeted-rag"),
                entity=logger.get("entity"),
                mode=str(logger.get("mode") or "offline"),
                group=logger.get("group"),
                tags=[str(t) for t in logger.get("tags") or []],
                options=options,
                plots=self.plots,
            )
        except (FileNotFoundError, ValueError) as problem:
            log.warning("no W&B report run for %s: %s (retry with: %s %s)", sweep_dir, problem, RETRY, sweep_dir)
        except Exception:  # the sweep's results are written: a report failure must not fail it
            log.exception("the W&B report run of %s failed (retry with: %s %s)", sweep_dir, RETRY, sweep_dir)
        finally:
            wandb = sys.modules.get("wandb")
            if wandb is not None and getattr(wandb, "run", None) is not None:
                wandb.finish(exit_code=1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=RETRY,
        description="Build a sweep's report and evidence viewer (SWEEP_DIR/report) and log them as one W&B run "
        "(job_type report): each CSV as a table, each plot as an image, the viewer as an artifact.",
    )
    parser.add_argument("sweep_dir", type=Path, help="the sweep directory (Hydra multirun)")
    parser.add_argument("--project", default="budgeted-rag")
    parser.add_argument("--entity", default=None)
    parser.add_argument(
        "--mode", default=os.environ.get("WANDB_MODE", "offline"), choices=("offline", "online", "disabled")
    )
    parser.add_argument("--group", default=None, help="W&B group (default: the sweep dir its jobs recorded)")
    parser.add_argument("--metric", default=F1)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--no-plots", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from harness.report.tables import Options

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    options = Options(metric=args.metric, baseline=args.baseline, n_resamples=args.resamples)
    try:
        out_dir = log_report(
            args.sweep_dir,
            project=args.project,
            entity=args.entity,
            mode=args.mode,
            group=args.group,
            options=options,
            plots=not args.no_plots,
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"report in {out_dir}; W&B run in {args.sweep_dir}/wandb")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
