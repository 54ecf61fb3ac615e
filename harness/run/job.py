"""One job: a configuration run end to end into its output folder, resumable and never recomputed once done."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig
from tqdm.auto import tqdm

from harness import cache
from harness.cache.postgres import CONNECT_TIMEOUT_S
from harness.run.dataset_check import cache_folder
from harness.run.flags import RunFlags
from harness.run.keys import run_key
from harness.run.packing import PROGRESS_DELAY
from harness.run.pipeline import Pipeline
from harness.run.rows import RowBuilder, config_columns

log = logging.getLogger("harness.run.pipeline")


def finished_summary(output_dir: Path, key: str) -> dict | None:
    path = output_dir / "summary.json"
    if not path.exists():
        return None
    from harness.runlog.outputs import read_summary

    summary = read_summary(path)
    if summary is None:
        return None
    return summary if summary.get("run_key") == key and (output_dir / "rows.parquet").exists() else None


def run(
    cfg: DictConfig, output_dir: str | Path, choices: dict[str, str] | None = None, *, validated: bool = False
) -> pd.DataFrame:
    """Run one configuration end to end and write rows, summary and config into ``output_dir``.

    Rows are journaled as each reading chunk finishes; a killed run started again in the same directory
    reads only what is missing. A finished run is not recomputed unless ``cache.force=true``. ``validated``: the
    caller has checked ``cfg`` already (the command line does, before the pipeline's imports).
    """
    from harness.core.checkout import describe_code
    from harness.run.config_check import validate
    from harness.run.job_times import finished_job_entry, record
    from harness.run.run_name import current_run_name
    from harness.run.run_record import data_record, machine_record, sample_note
    from harness.runlog.journal import RowJournal, normalise_row
    from harness.runlog.outputs import clean_temporaries, ensure_writable, print_summary_payload, write_outputs

    started = time.perf_counter()
    if not validated:
        validate(cfg)  # before any model loads
    print(describe_code(), flush=True)  # which checkout's code this is: one venv may serve several
    flags = RunFlags.of(cfg)
    cache_cfg = cfg.get("cache", {})
    cache.configure(
        cache_cfg.get("url"),
        cfg.paths.cache_dir,
        str(cache_cfg.get("network_fs", "fallback")),
        float(cache_cfg.get("connect_timeout_s", CONNECT_TIMEOUT_S)),
    )
    output_dir = Path(output_dir)
    ensure_writable(output_dir)
    clean_temporaries(output_dir)
    choices = choices or {}
    key = run_key(cfg)
    finished = None if flags.force else finished_summary(output_dir, key)
    if finished is not None:
        log.info("run in %s already finished with this config; skipping (cache.force=true recomputes)", output_dir)
        print_summary_payload(finished)
        return pd.read_parquet(output_dir / "rows.parquet")

    rows_of = RowBuilder(cfg)  # checks the dataset's scoring rules before any model loads
    pipeline = Pipeline(cfg)
    rows_of.components = pipeline.components()
    examples = pipeline.load()
    note = sample_note(cfg.dataset, len(examples))  # a sample larger than the file: all of it read, said here
    pipeline.clock.line(
        "load", f"{len(examples)} questions from {cfg.dataset.get('name')}" + (f" ({note})" if note else "")
    )
    prepared = pipeline.prepare(examples)

    # What a killed run must not redo is reading: its rows are journaled as each reading chunk finishes. A run that
    # does not read builds every row in one step from what it prepared (from the caches on a relaunch), so it keeps
    # no journal: for the selection factorial that was 3.8 MB of JSON and an fsync per job, beside 0.5 MB of Parquet.
    journal = RowJournal(output_dir, key) if flags.read else None
    if journal is not None and flags.force:
        journal.path.unlink(missing_ok=True)
    done = {} if journal is None else journal.load()
    if done:
        log.info("resuming: %d of %d questions already have rows", len(done), len(prepared))
    todo = [p for p in prepared if p.pool.example.question_id not in done]
    # The cfg.* columns (most of a row) are the same in every row of the job and come last in each: their JSON
    # round trip is done once, and each row's own columns are normalised before they are joined.
    config = normalise_row(config_columns(pipeline.resolved))
    chunk = flags.read_chunk
    for start in tqdm(range(0, len(todo), chunk), desc="read", disable=len(todo) <= chunk, delay=PROGRESS_DELAY):
        items = todo[start : start + chunk]
        responses = pipeline.read(items) if flags.read else [{"answer": None, "raw": None}] * len(items)
        fresh = [
            {**normalise_row(rows_of.row(item, r["answer"], r["raw"], choices, {})), **config}
            for item, r in zip(items, responses, strict=False)
        ]
        if journal is not None:
            journal.append(fresh)
        done.update((r["question_id"], r) for r in fresh)
    if flags.read:
        generated = pipeline.counters()["reader_prompts_generated"]
        fresh_note = "" if generated is None else f", {generated} generated (the rest cached)"
        pipeline.clock.line("read", f"{len(todo)} prompts by {pipeline.reader.name}{fresh_note}")
    rows = pd.DataFrame.from_records([done[p.pool.example.question_id] for p in prepared])
    write_outputs(
        cfg,
        rows,
        output_dir,
        pipeline.timings,
        key,
        counters={**pipeline.counters(), **{f"{kind}_reused": n for kind, n in pipeline.reused.items()}},
        name=current_run_name(flags.read),
        resolved=pipeline.resolved,
        data=data_record(cfg.dataset, examples, cache_folder(cfg)),
        machine=machine_record(),
    )
    if len(todo) == len(prepared):  # a whole job (not a resumed rest): what it cost prices the next sweep
        reader = pipeline.reader.name if flags.read else None
        entry = finished_job_entry(cfg, len(prepared), pipeline.timings, reader)
        record(cfg.paths.cache_dir, entry, time.perf_counter() - started)
    return rows
