"""The run-level switches of a config, read once: every stage asks this record, not the config."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig


@dataclass(frozen=True)
class RunFlags:
    force: bool  # cache.force: recompute every cached stage and the run itself
    read: bool  # read=false: retrieval and selection studies that need no answers (EM and F1 left empty)
    read_chunk: int  # questions read (and journaled) per step

    @classmethod
    def of(cls, cfg: DictConfig) -> RunFlags:
        return cls(
            force=bool((cfg.get("cache") or {}).get("force", False)),
            read=bool(cfg.get("read", True)),
            read_chunk=max(1, int(cfg.get("read_chunk", 64))),
        )
