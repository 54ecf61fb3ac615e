"""Prompts in length-sorted batches, so each batch pads its rows to similar lengths."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader, Dataset


class _BatchList(Dataset):
    """Each item is a whole batch: the batching is decided up front, not by the loader."""

    def __init__(self, batches: list[dict[str, list[str]]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict[str, list[str]]:
        return self.batches[index]


def _as_is(item):
    return item


def length_sorted_batches(
    prompts: Sequence[str],
    keys: Sequence[str],
    batch_size: int,
    lengths: Sequence[int] | None = None,
    sort_by_length: bool = True,
    replicas: int = 1,
) -> list[dict[str, list[str]]]:
    """Batches of ``{"keys", "prompts"}``; longest prompts first, so memory trouble shows at once.

    With ``replicas`` processes sharing the batches (Lightning hands batch ``i`` to rank
    ``i % replicas`` and asserts every rank gets at least one), a read too small to give each
    process a full batch is split into smaller batches, and the list is padded with empty batches
    to a multiple of ``replicas``. Empty batches generate nothing, so no prompt is ever answered
    twice or written to the cache by two processes.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if len(prompts) != len(keys):
        raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
    if lengths is None:
        lengths = [len(p) for p in prompts]
    if len(lengths) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(lengths)} lengths")
    order = np.arange(len(prompts))
    if sort_by_length:
        order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    if replicas > 1 and len(prompts):
        batch_size = min(batch_size, -(-len(prompts) // replicas))
    batches = []
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        batches.append({"keys": [keys[i] for i in chosen], "prompts": [prompts[i] for i in chosen]})
    while replicas > 1 and len(batches) % replicas:
        batches.append({"keys": [], "prompts": []})
    return batches


class PromptDataModule(pl.LightningDataModule):
    """Emits the prompts to generate as ready-made batches of strings with their cache keys."""

    def __init__(
        self,
        prompts: Sequence[str],
        keys: Sequence[str],
        batch_size: int = 8,
        lengths: Sequence[int] | None = None,
        sort_by_length: bool = True,
        replicas: int = 1,
    ) -> None:
        super().__init__()
        self.prompts = list(prompts)
        self.keys = list(keys)
        self.batch_size = batch_size
        self.lengths = None if lengths is None else list(lengths)
        self.sort_by_length = sort_by_length
        self.replicas = replicas
        self.batches: list[dict[str, list[str]]] = []

    def setup(self, stage: str | None = None) -> None:
        self.batches = length_sorted_batches(
            self.prompts, self.keys, self.batch_size, self.lengths, self.sort_by_length, self.replicas
        )

    def predict_dataloader(self) -> DataLoader:
        # batch_size=None: the loader hands each pre-built batch over unchanged.
        return DataLoader(_BatchList(self.batches), batch_size=None, shuffle=False, collate_fn=_as_is)
