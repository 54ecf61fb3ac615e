"""The default reader's candidates side by side on the same prompts: speed, share of the machine, invariance.

Reads the first N HotpotQA distractor questions with their gold paragraphs as context (as
``bench_readers.py``) with Qwen2.5-Coder-0.5B through

- llama.cpp, the Q4_K_M GGUF (the default reader before the choice by CPU; the default still where the CPU
  has no bf16 instructions),
- transformers with row decoding (``decoding: rows``, batch-invariant) in bfloat16 and in float32,
- transformers with the library's batched ``generate`` in bfloat16 (left padding; batch-dependent),

each with a fresh response cache, and prints questions/s, prompt tokens/s, and prompt tokens/s x 2 x
parameters as a share of the matmul throughput this process measures in the dtype used (bf16 for llama.cpp,
whose int8 dot products have no torch counterpart). Then the invariance check: the row-decoding reader's
answers read all at once, one prompt at a time, in reverse order and with half of them already cached, and
the batched ``generate``'s at batch 1 against batch ``--batch-size``.

    .venv/bin/python benchmarks/bench_default_reader.py --questions 20

Name the CPU kind (printed first) beside every figure: AMX, AVX-512 with bf16 and AVX2-only machines differ
several-fold, and a busy core changes bf16 figures several-fold too.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from bench_readers import DEFAULT_DATA, gold_rows  # a script beside this one

from harness.backends.offline_models import default_folder
from harness.backends.precision import cpu_dtype, cpu_flags, cpu_kind
from harness.core.threads import available_cpus
from harness.metrics import f1_score
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.llama_cpp import LlamaCppReader

ROOT = Path(__file__).resolve().parents[1]
RUNG = "qwen2.5-coder-0.5b"


def matmul_flops(dtype: torch.dtype, threads: int, size: int = 2048, repeats: int = 5) -> float:
    """Sustained FLOP/s of a square matmul in ``dtype`` on ``threads`` threads (best of ``repeats``)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def make_reader(kind: str, args, batch_size: int | None = None):
    common = {
        "name": f"{RUNG}-{kind}",
        "offline_model": RUNG,
        "models_dir": str(args.models_dir),
        "batch_size": batch_size or args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "cache_dir": tempfile.mkdtemp(prefix="bench-default-reader-"),
        "show_progress": False,
    }
    if kind == "llama.cpp Q4_K_M":
        return LlamaCppReader(**common, llama_cpp={"n_parallel": 1, "n_threads": args.threads, "n_ctx": 2048})
    decoding, dtype = kind.split()[1:3]
    folder = str(default_folder(RUNG, args.models_dir))
    return TransformersReader(**common, pretrained=folder, dtype=dtype, decoding=decoding, torch_threads=args.threads)


def timed_read(reader, requests: list[PromptRequest]) -> tuple[list[str], float]:
    start = time.perf_counter()
    raws = [r["raw"] for r in reader.responses(requests)]
    return raws, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=available_cpus())
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    flags = cpu_flags()
    kind, auto = cpu_kind(flags), cpu_dtype(flags)
    print(f"CPU kind: {kind} (dtype auto: {auto}), {args.threads} threads")
    peak = {
        name: matmul_flops(dtype, args.threads) for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32))
    }
    print(f"torch.matmul 2048^2: bf16 {peak['bf16'] / 1e12:.2f} TFLOP/s, fp32 {peak['fp32'] / 1e12:.2f} TFLOP/s")

    rows = gold_rows(json.loads(args.data.read_text())[: args.questions])
    requests = [PromptRequest(q, c) for q, c, _ in rows]
    golds = [g for _, _, g in rows]
    kinds = [
        "llama.cpp Q4_K_M",
        "transformers rows bfloat16",
        "transformers generate bfloat16",
        "transformers rows float32",
    ]
    results, readers = [], {}
    for label in kinds:
        reader = readers[label] = make_reader(label, args)
        reader.responses([PromptRequest("Say hello.", "")])  # weights load and first call, timed apart
        raws, seconds = timed_read(reader, requests)
        tokens = sum(reader.count_prompt_tokens(reader.render(r)) for r in requests)
        module = reader.module
        model = getattr(module, "generator", None) if getattr(module, "backend", None) is None else None
        params = sum(p.numel() for p in model.parameters()) if model is not None else 494_032_768
        dtype = "fp32" if label.endswith("float32") else "bf16"
        answers = [r["answer"] for r in reader.responses(requests)]
        results.append(
            {
                "reader": label,
                "s_per_q": seconds / len(requests),
                "qps": len(requests) / seconds,
                "prompt_tokens_per_s": tokens / seconds,
                "share": tokens / seconds * 2 * params / peak[dtype],
                "share_of": dtype,
                "f1": sum(f1_score(a, g) for a, g in zip(answers, golds, strict=True)) / len(golds),
                "raws": raws,
            }
        )
        print(f"  {label}: {seconds:.1f} s", flush=True)
        if label != "transformers rows bfloat16":
            reader.close()

    base = results[0]
    print(
        f"\n{len(requests)} HotpotQA questions, gold paragraphs, greedy, max_new_tokens {args.max_new_tokens}, "
        f"batch {args.batch_size}; CPU kind {kind}"
    )
    print("| reader | s/question | questions/s | x llama.cpp | prompt tokens/s | share of matmul peak | F1 |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['reader']} | {r['s_per_q']:.2f} | {r['qps']:.2f} | {r['qps'] / base['qps']:.2f}x | "
            f"{r['prompt_tokens_per_s']:.0f} | {r['share']:.0%} of {r['share_of']} | {r['f1']:.3f} |"
        )

    # Invariance: the row decoder's answers whatever the company; batched generate's at batch 1 vs batched.
    rows_reader = readers["transformers rows bfloat16"]
    together = next(r for r in results if r["reader"] == "transformers rows bfloat16")["raws"]
    fresh = make_reader("transformers rows bfloat16", args)
    fresh._module = rows_reader.module  # the loaded weights, a fresh response cache
    alone = [fresh.responses([q])[0]["raw"] for q in requests]
    fresh = make_reader("transformers rows bfloat16", args)
    fresh._module = rows_reader.module
    reverse = [r["raw"] for r in fresh.responses(requests[::-1])][::-1]
    fresh = make_reader("transformers rows bfloat16", args)
    fresh._module = rows_reader.module
    fresh.responses(requests[::2])
    half = [r["raw"] for r in fresh.responses(requests)]
    checks = {"one at a time": alone, "reversed": reverse, "half cached": half}
    for name, raws in checks.items():
        same = sum(a == b for a, b in zip(together, raws, strict=True))
        print(f"row decoding, bf16: {name}: {same}/{len(requests)} answers identical to reading all at once")
    batched = next(r for r in results if r["reader"] == "transformers generate bfloat16")["raws"]
    single = make_reader("transformers generate bfloat16", args, batch_size=1)
    one, _ = timed_read(single, requests)
    same = sum(a == b for a, b in zip(batched, one, strict=True))
    print(f"batched generate, bf16: batch 1 vs batch {args.batch_size}: {same}/{len(requests)} answers identical")
    if args.json:
        args.json.write_text(json.dumps({"cpu_kind": kind, "peak": peak, "results": results}, indent=2))


if __name__ == "__main__":
    main()
