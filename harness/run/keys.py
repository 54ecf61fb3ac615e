"""The keys under which jobs of one process share results (``harness.run.reuse``) and the run key.

Each key names everything its result depends on besides the code of this process, so two jobs share a
result only when it would come out the same."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from harness.cache import stable_hash
from harness.cache.fingerprint import code_fingerprint, identity_config, input_files_digest
from harness.read.prompt import GENERATION_ONLY_KEYS
from harness.run.dataset_check import cache_folder


def prompt_settings(reader: dict[str, Any] | None) -> dict[str, Any]:
    """The reader's settings bar the generation-only ones, at every depth: what renders and counts its prompts.
    A machine-chosen reader nests each backend's settings (``with_bf16``, ``without_bf16``), and a generation
    setting there (llama.cpp's ``seed: ${seed}``) must not make seeds with equal pools pack again."""
    return {
        k: prompt_settings(v) if isinstance(v, dict) else v
        for k, v in (reader or {}).items()
        if k not in GENERATION_ONLY_KEYS
    }


def selection_key(resolved: dict[str, Any], pools_id: str, tree: Any, packer: Any, seed: int) -> str:
    """Everything the tree, the diversifier and the snippets depend on: the pools' content (``pools_id``),
    the tree, diversifier, k, snippet settings, the reader's prompt settings (its tokenizer costs snippets and
    tree nodes; a tree's LM is its own, in the tree's config), the encoder and, for a tree that draws random
    numbers, the seed."""
    return stable_hash(
        pools_id,
        *(resolved.get(group) for group in ("tree", "diversifier", "snippets")),
        prompt_settings(resolved["reader"]),
        resolved["retriever"]["encoder"],
        resolved["k"],
        bool(packer.uses_snippets),
        int(seed) if tree.seeded else None,
    )


def packing_key(resolved: dict[str, Any], selection: str, packer: Any, budget: int, seed: int) -> str:
    """Everything packing depends on: the selection, the packer, the budget, the reader's prompt settings
    and, for a packer that draws random numbers, the seed."""
    return stable_hash(
        selection,
        resolved["packer"],
        prompt_settings(resolved["reader"]),
        int(budget),
        int(seed) if packer.seeded else None,
    )


def run_key(cfg: DictConfig) -> str:
    """Identity of a run's results: the resolved config without runtime-only keys (logger, paths, cache,
    read chunking, progress), the bytes of the dataset files it names and the fingerprint of all stage
    code (``harness.cache.fingerprint``)."""
    files = input_files_digest(cfg.get("dataset"), cache_folder(cfg))
    return stable_hash("run", identity_config(cfg), files, code_fingerprint("run"))
