"""HotpotQA questions with their gold paragraphs as context: the prompts the reader tests read."""

from __future__ import annotations

import json

from harness.read.base import PromptRequest
from tests.conftest import SHARED_DATA

HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"


def hotpot_prompts(count: int = 20) -> list[PromptRequest]:
    """The first ``count`` questions with their gold paragraphs (first two sentences each) as context."""
    prompts = []
    for example in json.loads(HOTPOT.read_text())[:count]:
        gold = {title for title, _ in example["supporting_facts"]}
        context = "\n\n".join(f"{t}: {' '.join(s[:2])}" for t, s in example["context"] if t in gold)
        prompts.append(PromptRequest(example["question"], context))
    return prompts
