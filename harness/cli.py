"""Command line: ``python -m harness <overrides>`` (``-m`` for a multirun sweep, ``--help`` for groups).

Exit status: 0 when every job finished; 2 for an invalid config value (reported before any model loads);
1 when a job (or, in a sweep, any job) failed; 128 + the signal number when SIGTERM or SIGINT stopped it.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, ClassVar

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.cache.postgres import redacted
from harness.core import signals, threads
from harness.run.config_check import ConfigError, launcher_problems, validate
from harness.run.sweep_compose import compose_once

log = logging.getLogger("harness")

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = str(REPO_ROOT / "conf")
ERROR_FILE = "error.txt"

# Offline by default: a model id that is not a local path must never trigger a download attempt that hangs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Installed on import, not only in main(): a launcher's worker processes (joblib's) import this module to
# run their jobs, and compose each job's config there from config files read once per worker.
compose_once()

# Libraries whose INFO lines (faiss's search for AVX builds, model-loading notes) say nothing about the run.
CHATTY_LOGGERS = ("faiss", "faiss.loader", "sentence_transformers", "transformers", "httpx", "urllib3", "filelock")


def quiet_libraries() -> None:
    """Library chatter below WARNING and no loading bars: a run prints its own stage lines, progress bars for
    long stages, the summary and where the outputs are. ``hydra.verbose=true`` leaves everything as is."""
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "warning")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("WANDB_SILENT", "true")
    transformers = sys.modules.get("transformers")
    if transformers is not None:  # already imported: its own switches
        transformers.logging.set_verbosity_warning()
        transformers.logging.disable_progress_bar()


class MaskedSecrets(Callback):
    """Keeps a connection string's password (``cache.url``, ``HARNESS_CACHE_URL``) out of the files and lines
    Hydra writes on its own: the job's ``.hydra/*.yaml`` (saved before the job starts) are rewritten with it
    masked, and the overrides of a failed job, which Hydra prints as "Error executing job with overrides",
    are masked before Hydra reads them."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        subdir = config.hydra.get("output_subdir")
        if subdir is None:
            return
        folder = Path(str(config.hydra.runtime.output_dir)) / str(subdir)
        for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
            mask_file(folder / name)
        if config.hydra.get("mode") == RunMode.MULTIRUN:  # the sweeper saved it before the first job
            mask_file(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if job_return is not None and job_return.overrides is not None:
            job_return.overrides = [redacted(str(o)) for o in job_return.overrides]


def mask_file(path: Path) -> None:
    """Rewrite ``path`` with its passwords masked, if it holds any (renamed into place: parallel jobs of a
    sweep may rewrite the sweep's multirun.yaml at once)."""
    try:
        text = path.read_text()
    except OSError:
        return
    if redacted(text) != text:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(redacted(text))
        os.replace(tmp, path)


class FailedJobs(MaskedSecrets):
    """After a sweep, lists the jobs that wrote an error file, so the launching process can fail (and, as
    :class:`MaskedSecrets`, masks passwords in what Hydra writes; conf/config.yaml installs this one)."""

    failed: ClassVar[list[dict[str, Any]]] = []

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        FailedJobs.failed = []
        # Before the launcher starts: its own checks fail with a traceback (joblib's n_jobs=0) or not at all.
        found = launcher_problems(config)
        if found:
            for line in found:
                print(f"config error: {line}", file=sys.stderr)
            sys.exit(2)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        mask_file(Path(config.hydra.sweep.dir) / "multirun.yaml")
        FailedJobs.failed = failed_jobs(Path(config.hydra.sweep.dir))
        if FailedJobs.failed:
            print(failure_summary(FailedJobs.failed), file=sys.stderr)


def failed_jobs(sweep_dir: Path) -> list[dict[str, Any]]:
    """Each job directory under ``sweep_dir`` holding an error file: its number, overrides and error path."""
    found = []
    for error in sorted(sweep_dir.rglob(ERROR_FILE)):
        job_dir = error.parent
        num, overrides = job_dir.name, []
        hydra_file = job_dir / ".hydra" / "hydra.yaml"
        if hydra_file.exists():
            try:
                job = OmegaConf.load(hydra_file).hydra
                num = str(job.job.num)
                overrides = [str(o) for o in job.overrides.task]
            except (OSError, ValueError, OmegaConfBaseException) as problem:  # must not hide the failure itself
                log.warning("cannot read %s: %s", hydra_file, problem)
        found.append({"num": num, "overrides": overrides, "error": str(error)})
    return sorted(found, key=lambda j: (int(j["num"]) if j["num"].isdigit() else 1 << 30, j["num"]))


def failure_summary(jobs: list[dict[str, Any]]) -> str:
    lines = [f"{len(jobs)} sweep job(s) failed:"]
    for job in jobs:
        lines.append(f"  job {job['num']}: {' '.join(job['overrides']) or '(no overrides)'}  -> {job['error']}")
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def hydra_main(cfg: DictConfig) -> None:
    run_job(cfg)


def run_job(cfg: DictConfig, *, exit_on_config_error: bool = True) -> None:
    """One Hydra job (the command line's and :mod:`harness.api`'s): the config checked, then the run into the
    job's output folder. A sweep job records its failure in the folder and returns; a single run's invalid
    config prints one line per problem and exits 2, or, with ``exit_on_config_error`` false, raises
    :class:`ConfigError`."""
    # Again here: a launcher may run jobs in worker processes that never went through main().
    signals.install()
    # Hydra has parsed the command line; loggers that record it (W&B's run metadata) get it masked.
    sys.argv[:] = [redacted(arg) for arg in sys.argv]
    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    # A relaunched sweep job starts clean: an error file from an earlier attempt must not count as failure.
    (output_dir / ERROR_FILE).unlink(missing_ok=True)
    choices = dict(hydra_cfg.runtime.choices)
    if not hydra_cfg.verbose:
        quiet_libraries()
    # A parallel launcher (joblib's n_jobs) runs several jobs on this machine at once: readers left to
    # choose their thread count take their share of the CPUs (harness.core.threads).
    threads.set_parallel_jobs(hydra_cfg.launcher.get("n_jobs") if multirun else None)
    try:
        validate(cfg)  # before the pipeline's imports (pandas, scipy, torch: seconds) and any model load
        from harness.run.job import run

        run(cfg, output_dir, choices=choices, validated=True)
    except ConfigError as error:
        if multirun:
            (output_dir / ERROR_FILE).write_text(f"invalid config:\n{error}\n")
            log.error("job %s: invalid config (%s)", hydra_cfg.job.num, output_dir / ERROR_FILE)
            return
        if not exit_on_config_error:
            raise
        for line in error.problems:
            print(f"config error: {line}", file=sys.stderr)
        sys.exit(2)
    except Exception as error:
        # A library's clean-up can fail while a stop unwinds through it (Lightning stopping a rich progress bar
        # whose thread the signal kept from starting raises RuntimeError): the stop is what happened.
        signals.raise_if_stopping(error)
        # In a sweep one failed job must not kill the others: record the error and go on.
        if multirun:
            (output_dir / ERROR_FILE).write_text(redacted(traceback.format_exc()))
            log.error("job %s failed; traceback in %s", hydra_cfg.job.num, output_dir / ERROR_FILE)
            return
        masked = _masked(error)
        if masked is not error:
            raise masked from None
        raise
    finally:
        # A run still open here was cut short (error or signal); close it so its files are complete.
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            wandb.finish(exit_code=1)


class SecretInErrorMasked(RuntimeError):
    """An error whose message (or a message of its causes) held a password, with the password masked."""


def _masked(error: BaseException) -> BaseException:
    """``error`` itself, or, when its text or its causes' text holds a password, an error with the same text
    masked (Hydra prints the message and the causes as they are)."""
    text = "".join(traceback.format_exception(error))
    if redacted(text) == text:
        return error
    return SecretInErrorMasked(redacted("".join(traceback.format_exception_only(error)).strip()))


def mask_log_records() -> None:
    """Every log record's message with passwords masked (:func:`harness.cache.postgres.redacted`), whoever
    logs it: Hydra's launchers log each job's overrides ("#0 : cache.url=..."), to the console and the log
    files. A record factory, unlike a handler's filter, survives Hydra's logging configuration of each job."""
    make = logging.getLogRecordFactory()
    if getattr(make, "masks_secrets", False):
        return

    def masked_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is the logging module's to report
            return record
        if redacted(message) != message:
            record.msg, record.args = redacted(message), ()
        return record

    masked_record.masks_secrets = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(masked_record)


def multirun_cfg_problem(arguments: list[str]) -> str | None:
    """Hydra refuses ``--cfg`` with ``-m`` (a ValueError from deep inside); say what to do instead."""
    multirun = any(a in ("-m", "--multirun") for a in arguments)
    cfg = any(a in ("-c", "--cfg") or a.startswith("--cfg=") for a in arguments)
    if not (multirun and cfg):
        return None
    overrides = " ".join(a for a in arguments if not a.startswith("-") and a not in ("job", "hydra", "all"))
    return (
        "--cfg shows one job's config and cannot be combined with -m (Hydra's rule). Drop -m to print the config "
        "of one job (--cfg hydra --resolve shows its launcher), or preview every job of the sweep, with its "
        f"launcher, resources and cost: python -m harness.preview {overrides}".rstrip()
    )


def main() -> None:
    signals.install()
    mask_log_records()
    problem = multirun_cfg_problem(sys.argv[1:])
    if problem:
        print(f"harness: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        hydra_main()
    except signals.Interrupted as stop:
        print(f"harness: {stop}; relaunch with the same hydra.run.dir / hydra.sweep.dir to resume", file=sys.stderr)
        if signals.native_work_abandoned():
            # A generation left running in native code would be torn down under interpreter shutdown
            # (models freed while it computes): everything durable is written, so leave at once.
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(stop.exit_code)
        sys.exit(stop.exit_code)
    if FailedJobs.failed:
        sys.exit(1)


# On import too, like compose_once(): a launcher's worker processes log through this module's jobs.
mask_log_records()

if __name__ == "__main__":
    main()
