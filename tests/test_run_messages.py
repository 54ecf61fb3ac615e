"""What a run tells its user: a sample larger than the file says so in one line, and the time spent cutting and
embedding the packer's snippets is charged to a stage of its own, not to the selection."""

from __future__ import annotations

import logging
import re
import time

import pytest
from hydra.utils import instantiate

from harness.data import sampling
from harness.run.dataset_check import dataset_loader_config
from harness.run.pipeline import Pipeline
from tests.conftest import SHARED_DATA, compose_cfg

HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
SLOW_S = 2.0  # an embedding this slow shows where it is charged, whatever else a shared CPU is doing


@pytest.mark.skipif(not HOTPOT.exists(), reason="shared HotpotQA sample not present")
def test_a_sample_size_above_the_file_loads_it_all_with_one_warning(caplog, monkeypatch):
    monkeypatch.setattr(sampling, "_WARNED", set())
    cfg = compose_cfg(["dataset=hotpotqa", f"dataset.path={HOTPOT}", "dataset.sample_size=300"])
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = instantiate(dataset_loader_config(cfg.dataset))
        again = instantiate(dataset_loader_config(cfg.dataset))  # the pipeline reads it after the check
    assert len(examples) == len(again) == 103
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"dataset.sample_size=300 but {HOTPOT} holds 103 questions: all 103 are loaded"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        cfg.dataset.sample_size = 40
        fewer = instantiate(dataset_loader_config(cfg.dataset))
    assert len(fewer) == 40 and not caplog.records


def test_snippet_embedding_is_its_own_stage_not_the_selections(tmp_path, caplog):
    from harness.run import reuse

    reuse.clear()
    cfg = compose_cfg(
        ["dataset=demo", "diversifier=none", "packer=packed", "logger=none", f"paths.cache_dir={tmp_path}"]
    )
    pipeline = Pipeline(cfg)
    examples = pipeline.load()
    pipeline.pools(examples)  # retrieved first (kept for the process): only the snippets are embedded below
    encode = pipeline.encoder.encode_documents
    embedded: list[int] = []

    def slow(texts, *args, **kwargs):  # a cold encoder cache: embedding takes the time
        embedded.append(len(texts))
        time.sleep(SLOW_S)
        return encode(texts, *args, **kwargs)

    pipeline.encoder.encode_documents = slow  # this instance only
    try:
        with caplog.at_level(logging.INFO, logger="harness.run.pipeline"):
            pipeline.prepare(examples)
    finally:
        del pipeline.encoder.encode_documents
        reuse.clear()
    lines = {r.getMessage().split()[0]: r.getMessage() for r in caplog.records}
    select = re.fullmatch(r"select +tree=none diversifier=none \((\d+\.\d) s\)", lines["select"])
    snippets = re.fullmatch(
        r"snippets (\d+) sentence snippets of 12 questions cut and embedded for packer=packed \((\d+\.\d) s\)",
        lines["snippets"],
    )
    assert select and snippets, lines
    assert float(select.group(1)) < SLOW_S <= float(snippets.group(2))
    assert int(snippets.group(1)) == sum(embedded)
