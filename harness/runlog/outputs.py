"""What a run leaves behind: rows.parquet, summary.json (means with bootstrap CIs), the composed config."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.table import Table

from harness.cache.postgres import redacted_config
from harness.core.checkout import code_identity
from harness.metrics.registry import METEOR, ROUGE_L, metric_names
from harness.stats import summarize_columns

log = logging.getLogger(__name__)

# Means with bootstrap CIs in summary.json (and the W&B run summary): the registry's summarised metrics.
SUMMARY_METRICS = metric_names(summary=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary sibling, then rename: a reader never sees a half-written file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class RunDirectoryError(OSError):
    """The run directory cannot hold the run's outputs (read-only, not a folder, ...)."""


def ensure_writable(directory: Path) -> None:
    """Fail at once, naming the folder, when the run directory cannot be written: otherwise the run would
    compute for minutes and fail on its first journal write."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise RunDirectoryError(
            f"run directory {directory} is not writable ({error.strerror or error}); "
            "give a writable hydra.run.dir (hydra.sweep.dir for a sweep)"
        ) from error


def clean_temporaries(directory: Path) -> list[Path]:
    """Remove temporary files left by a writer killed between writing and renaming (``.NAME.tmp-PID``).
    A file whose writer process is still alive is left alone."""
    removed = []
    for path in directory.glob(".*.tmp-*"):
        pid = path.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    if removed:
        log.warning(
            "removed %d leftover temporary file(s) in %s: %s",
            len(removed),
            directory,
            ", ".join(p.name for p in removed),
        )
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_summary(path: Path) -> dict | None:
    """A run's summary.json, or None when it is missing or damaged (logged with its path): a damaged
    summary marks an unfinished run, which is completed and its summary rewritten."""
    if not path.exists():
        return None
    try:
        summary = json.loads(path.read_bytes().decode("utf-8"))
        if not isinstance(summary, dict):
            raise ValueError(f"expected a JSON object, found {type(summary).__name__}")
    except (OSError, ValueError) as error:
        log.warning("damaged %s (%s): treating the run as unfinished", path, error)
        return None
    return summary


def atomic_write_parquet(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def summarize(rows: pd.DataFrame, seed: int = 0, n_resamples: int = 2000) -> pd.DataFrame:
    """Mean, interval and n of each summary metric the run computed: a metric with no value in any row (the
    reader's scores of a read=false run) is left out, not shown as a NaN row."""
    columns = [
        c
        for c in SUMMARY_METRICS
        if c in rows.columns and pd.api.types.is_numeric_dtype(rows[c]) and rows[c].notna().any()
    ]
    return summarize_columns(rows, columns, n_resamples=n_resamples, seed=seed)


def corpus_metrics(cfg: DictConfig, rows: pd.DataFrame) -> dict:
    """Run-level figures that are no mean of per-question scores, by the dataset config's scorers:
    ``bleu_rouge_meteor`` gives NarrativeQA's corpus BLEU-1 / BLEU-4 (n-grams pooled over the answered
    questions, from the rows' ``answer`` and ``gold_answers``) beside mean ROUGE-L and METEOR."""
    from harness.metrics.longform import check_scorers, narrativeqa_scores

    dataset = cfg.get("dataset") or {}
    scorers = check_scorers(dataset.get("scorers"))
    if "bleu_rouge_meteor" not in scorers or "answer" not in rows.columns or "gold_answers" not in rows.columns:
        return {}
    answered = rows[rows["answer"].notna()]
    if answered.empty:
        return {}
    scores = narrativeqa_scores(
        answered["answer"].astype(str).tolist(),
        [json.loads(gold) for gold in answered["gold_answers"]],
        rouge=answered[ROUGE_L].astype(float).tolist() if ROUGE_L in answered else None,
        meteors=answered[METEOR].astype(float).tolist() if METEOR in answered else None,
    )
    return {"narrativeqa": scores}


def print_corpus_metrics(corpus: dict) -> None:
    scores = corpus.get("narrativeqa")
    if not scores:
        return
    meteor = f"{scores['meteor_mean']:.3g}" if scores["meteor_available"] else "n/a"
    line = (
        f"NarrativeQA over {scores['n']} answers: corpus BLEU-1 {scores['bleu1_corpus']:.3g}, "
        f"BLEU-4 {scores['bleu4_corpus']:.3g}; mean ROUGE-L {scores['rougeL_mean']:.3g}, METEOR {meteor}"
    )
    if not scores["meteor_available"]:
        line += f" ({scores['meteor_unavailable_reason']})"
    Console().print(line, highlight=False)


def print_summary(summary: pd.DataFrame, title: str) -> None:
    table = Table(title=title)
    for column in ("metric", "mean", "95% CI", "n"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for rec in summary.itertuples():
        if not rec.n:  # not computed (a summary.json written before such metrics were left out)
            continue
        # Three significant digits: a bootstrap interval over a few hundred questions carries no more
        # (summary.json keeps full precision).
        table.add_row(rec.metric, f"{rec.mean:.3g}", f"[{rec.ci_low:.3g}, {rec.ci_high:.3g}]", str(rec.n))
    Console().print(table)


def run_title(payload: dict) -> str:
    """The run's name (what its sweep varies, or its overrides), or for a summary written before runs had
    names, its main keys."""
    return payload.get("name") or " ".join(f"{k}={v}" for k, v in payload["run"].items())


def print_summary_payload(payload: dict) -> None:
    frame = pd.DataFrame([{"metric": name, **m} for name, m in payload["metrics"].items()])
    print_summary(frame, title=f"{run_title(payload)}  ({payload['n_questions']} questions)")
    print_corpus_metrics(payload.get("corpus_metrics") or {})


def write_outputs(
    cfg: DictConfig,
    rows: pd.DataFrame,
    output_dir: Path,
    timings: dict[str, float],
    run_key: str,
    counters: dict,
    name: str | None = None,
    resolved: dict | None = None,
    data: dict | None = None,
    machine: dict | None = None,
) -> dict:
    """Rows, summary.json and config.yaml of a finished run; ``resolved``: ``cfg`` resolved already (the
    pipeline resolves it once per job); ``data`` and ``machine``: the data the run read and the machine it ran
    on (``harness.run.run_record``)."""
    atomic_write_parquet(rows, output_dir / "rows.parquet")
    summary = summarize(rows, seed=int(cfg.seed))
    first = rows.iloc[0] if len(rows) else {}
    payload = {
        # What sets the run apart (harness.run.run_name): W&B's run name and the summary's header.
        "name": name,
        "run": {
            key: (first[key].item() if hasattr(first[key], "item") else first[key])
            for key in ("dataset", "retriever", "tree", "diversifier", "packer", "budget", "k", "seed", "reader")
            if key in rows.columns
        },
        # Backend, weights' format, dtype and device of the answers (harness.read.base.Reader.numerics).
        "reader_numerics": str(first["reader_numerics"]) if "reader_numerics" in rows.columns else None,
        "run_key": run_key,
        "code": code_identity(),  # version, checkout path, commit, uncommitted changes
        "data": data,  # each file read with its sha256 and size, the questions read, the sampling settings
        "machine": machine,  # CPU model and kind, cores, memory, GPUs
        "n_questions": len(rows),
        "metrics": {
            rec.metric: {"mean": rec.mean, "ci_low": rec.ci_low, "ci_high": rec.ci_high, "n": int(rec.n)}
            for rec in summary.itertuples()
        },
        # Run-level figures beside the means (NarrativeQA's corpus BLEU): no bootstrap interval.
        "corpus_metrics": corpus_metrics(cfg, rows),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "counters": counters,
    }
    # Resolved (HARNESS_CACHE_URL and the other variables as this run saw them), with any password masked.
    if resolved is None:
        resolved = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    shown = redacted_config(resolved)  # type: ignore[arg-type]
    atomic_write_bytes(output_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(shown)).encode())
    # summary.json is written last: its presence (with this run_key) marks the run as finished.
    atomic_write_bytes(output_dir / "summary.json", json.dumps(payload, indent=2, default=float).encode())
    print_summary_payload(payload)
    log.info("rows, summary.json and config.yaml written to %s", output_dir)

    if cfg.get("logger"):
        logger = instantiate(cfg.logger)
        logger.log_run(cfg, rows, payload, output_dir)
    return payload
