"""The benchmark samples beside the repository, laid out as `python -m harness.data fetch` lays out the official
files, so every dataset config finds its sample at its default path (``HARNESS_DATA_DIR``, set by conftest).

``SAMPLES`` maps each path a fetch writes under the data folder to the sample that stands in for it (the first
questions of the official file, or all of it).
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

SAMPLES = {
    "hotpotqa/hotpot_dev_distractor_v1.json": "hotpotqa/hotpot_dev_distractor_v1_100.json",
    "hotpotqa/hotpot_dev_fullwiki_v1.json": "hotpotqa_fullwiki/hotpot_fullwiki_dev_sample.jsonl",
    # 485 of the fork's 500 lines, unmodified (the replication studies keep exactly these 485)
    "anlp-project-multihop/processed_data/hotpotqa/dev_subsampled.jsonl": (
        "hotpotqa_ircot/hotpotqa_dev_subsampled_485.jsonl"
    ),
    "musique/musique_ans_v1.0_dev.jsonl": "musique/musique_ans_dev_sample.jsonl",
    "2wikimultihopqa/dev.json": "2wikimultihopqa/2wiki_dev_sample.jsonl",
    "qasper/qasper-train-v0.3.json": "qasper/qasper-original-sample.json",  # its first 10 papers
    "quality/quality_example.jsonl": "quality/quality_example.jsonl",
    "covidqa/200423_covidQA.json": "covidqa/200423_covidQA.json",
    # the first lines of third parties' copies, under their registered paths
    "migres/data/musique.json": "musique/musique_ans_dev_sample.jsonl",
    "migres/data/wikihop.json": "2wikimultihopqa/2wiki_dev_sample.jsonl",
    "amor/data/hotpotqa/test.json": "hotpotqa_fullwiki/hotpot_fullwiki_dev_sample.jsonl",
    "expertqa/rand_test.jsonl": "expertqa/expertqa_rand_test_sample.jsonl",  # its first 100 lines
}


def samples_data_dir(root: Path) -> Path:
    """``root`` filled with links to the samples under their fetched names (idempotent, safe for parallel
    workers: each link is made under a temporary name and renamed into place)."""
    for fetched, sample in SAMPLES.items():
        link, target = root / fetched, SHARED_DATA / sample
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        temporary = link.with_name(f".{link.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(target)
        os.replace(temporary, link)
    return root
