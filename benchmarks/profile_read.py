"""Where the demo's `read` time goes: weights load, first call, steady generation, padding, dtype, threads.

Takes the exact prompts a run read (its rows.parquet: question and packed context, re-rendered with the
reader's template) and, for each reader setting, times in one process: loading the weights, a first
one-prompt call, and then the whole read through ``Reader.answer`` (Lightning predict, no cache) — the
same path as the pipeline's read stage. Wall and CPU seconds (all threads of this process) are printed:
on a shared machine wall time depends on the neighbours, CPU time much less.

    .venv/bin/python -m harness logger=none hydra.run.dir=/tmp/demo   # the default demo job
    .venv/bin/python benchmarks/profile_read.py /tmp/demo/rows.parquet
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.llama_cpp import LlamaCppReader
from harness.read.local import LocalReader

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "bf16 b8 t1": {"dtype": "bfloat16", "batch_size": 8, "torch_threads": 1},
    "fp32 b8 t1": {"dtype": "float32", "batch_size": 8, "torch_threads": 1},
    "fp32 b8 t2": {"dtype": "float32", "batch_size": 8, "torch_threads": 2},
    "fp32 b1 t1": {"dtype": "float32", "batch_size": 1, "torch_threads": 1},
    "llama.cpp t1": {"batch_size": 8, "llama_cpp": {"n_threads": 1}},
    "llama.cpp t2": {"batch_size": 8, "llama_cpp": {"n_threads": 2}},
}


class Clock:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def padding_share(reader: LocalReader, prompts: list[str]) -> float:
    """Share of the token slots in length-sorted batches that are padding."""
    lengths = sorted((reader.count_prompt_tokens(p) for p in prompts), reverse=True)
    padded = sum(
        max(lengths[i : i + reader.batch_size]) * len(lengths[i : i + reader.batch_size])
        for i in range(0, len(lengths), reader.batch_size)
    )
    return 1 - sum(lengths) / padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="rows.parquet of a finished run")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    args = parser.parse_args()
    rows = pd.read_parquet(args.rows)
    print(f"{len(rows)} prompts from {args.rows}")
    print("| setting | load wall s | first call wall s | read wall s | read CPU s | CPU s/question | padding |")
    print("|---|---|---|---|---|---|---|")
    for label in args.settings:
        extra = dict(SETTINGS[label])
        backend = LlamaCppReader if "llama_cpp" in extra else TransformersReader
        if backend is TransformersReader:
            extra["pretrained"] = str(args.models_dir / "SmolLM2-135M-Instruct")
        reader = backend(
            name=label,
            offline_model="smollm2",
            models_dir=str(args.models_dir),
            max_new_tokens=24,
            cache_dir=None,
            show_progress=False,
            **extra,
        )
        requests = [PromptRequest(q, c) for q, c in zip(rows["question"], rows["context"], strict=False)]
        prompts = [reader.render(r) for r in requests]
        with Clock() as load:
            reader.module  # noqa: B018 - loads the weights
        with Clock() as first:
            reader.answer([PromptRequest("Say hello.", "")])
        with Clock() as read:
            reader.answer(requests)
        print(
            f"| {label} | {load.wall:.1f} | {first.wall:.1f} | {read.wall:.1f} | {read.cpu:.1f} | "
            f"{read.cpu / len(prompts):.2f} | {padding_share(reader, prompts):.1%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
