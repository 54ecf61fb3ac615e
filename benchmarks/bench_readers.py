"""Reader ladder on CPU: questions/s and SQuAD F1 of each rung and backend on the same prompts.

Reads the first N HotpotQA distractor questions with their gold paragraphs (whole, in supporting-fact
order) as the context, so every rung reads the same question and context text (each through its own
chat template) and the figures measure the reader alone, not retrieval or packing. For each rung
(SmolLM2-135M Q4_1, Qwen2.5-Coder-0.5B Q4_K_M, Qwen2.5-Coder-1.5B Q4_K_M) it runs the llama.cpp
backend on the GGUF, and the transformers and vLLM backends on the same GGUF dequantised, in float32 and in
bfloat16 side by side (``--dtypes``; which one ``dtype: auto`` picks depends on the CPU's bf16 instructions,
printed in the header), each with a fresh response cache, and prints one table with questions/s, prompt
tokens/s and, for vLLM, the share of prompt tokens served from its prefix cache. CPU seconds include the
vLLM worker's processes. vLLM runs when its venv exists (``make vllm-venv``). Load time (weights,
first call) is timed apart from reading; a missing one-time GGUF -> HF conversion runs first, untimed.
Wall time depends on what else the machine runs; CPU seconds (all threads of this process) much less.

    .venv/bin/python benchmarks/bench_readers.py --questions 20 --rungs smollm2 qwen2.5-coder-0.5b

Each backend runs at 1 thread and at every CPU available (``--threads``), side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import psutil

from harness.backends.offline_models import OFFLINE_MODELS, default_folder, ensure_offline_model, gguf_path
from harness.backends.precision import BF16_CPU_FLAGS, cpu_dtype, cpu_flags
from harness.backends.vllm_engine import VllmUnavailableError, vllm_python
from harness.core.threads import available_cpus
from harness.metrics import exact_match, f1_score
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.llama_cpp import LlamaCppReader
from harness.read.local import LocalReader
from harness.read.vllm import VllmReader

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_v1_100.json"
RUNGS = ("smollm2", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")


def gold_rows(records: list[dict]) -> list[tuple[str, str, str]]:
    """(question, context, answer): the gold paragraphs, titled, in supporting-fact order."""
    rows = []
    for rec in records:
        paragraphs = {title: "".join(sents).strip() for title, sents in rec["context"]}
        titles = list(dict.fromkeys(title for title, _ in rec["supporting_facts"]))
        rows.append((rec["question"], "\n\n".join(f"{t}: {paragraphs[t]}" for t in titles), rec["answer"]))
    return rows


def installed(rung: str, models_dir: Path) -> bool:
    try:
        gguf_path(rung, models_dir)
        return True
    except (FileNotFoundError, ModuleNotFoundError):
        return False


def make_reader(
    rung: str, backend: str, args, cache_dir: str, slots: int = 1, threads: int = 1, dtype: str = "float32"
) -> LocalReader:
    common = {
        "name": f"{rung}-{backend}",
        "offline_model": rung,
        "models_dir": str(args.models_dir),
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "cache_dir": cache_dir,
        "show_progress": False,
    }
    if backend == "llama_cpp":
        settings = {"n_parallel": slots, "n_threads": threads, "n_ctx": 2048, "cache_prompt": args.cache_prompt}
        return LlamaCppReader(**common, llama_cpp=settings)
    folder = str(default_folder(rung, args.models_dir))
    if backend == "vllm":
        settings = {"cpu_threads": threads, "max_model_len": 2048, "enforce_eager": True, "enable_prefix_caching": True}
        return VllmReader(**common, pretrained=folder, dtype=dtype, vllm=settings)
    return TransformersReader(**common, pretrained=folder, dtype=dtype, torch_threads=threads)


def cpu_seconds() -> float:
    """CPU seconds of this process and every live descendant (vLLM's worker and engine core)."""
    me = psutil.Process(os.getpid())
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def backend_label(backend: str, slots: int, threads: int, dtype: str) -> str:
    kind = f"llama_cpp x{slots}" if backend == "llama_cpp" else f"{backend} {dtype}"
    return f"{kind}, {threads} thr"


def run_one(rung: str, backend: str, slots: int, threads: int, rows, args, dtype: str = "float32") -> dict:
    reader = make_reader(rung, backend, args, tempfile.mkdtemp(prefix="bench-readers-"), slots, threads, dtype)
    requests = [PromptRequest(q, c) for q, c, _ in rows]
    prompts = [reader.render(r) for r in requests]
    tokens = [reader.count_prompt_tokens(p) for p in prompts]
    start = time.perf_counter()
    reader.answer([PromptRequest("Say hello.", "")])  # weights load and first-call costs, timed apart
    load = time.perf_counter() - start
    generator = reader.module.backend
    before = (getattr(generator, "prompt_tokens", 0), getattr(generator, "cached_tokens", 0))
    start, cpu_start = time.perf_counter(), cpu_seconds()
    answers = reader.answer(requests)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    assert reader.generated == len(set(prompts)) + 1, "a fresh cache must generate every prompt"
    golds = [gold for _, _, gold in rows]
    hit_rate = None
    if backend == "vllm":
        read, cached = generator.prompt_tokens - before[0], generator.cached_tokens - before[1]
        hit_rate = cached / read if read else 0.0
        generator.close()
    return {
        "rung": rung,
        "backend": backend_label(backend, slots, threads, dtype),
        "threads": threads,
        "load_s": load,
        "seconds": seconds,
        "s_per_q": seconds / len(rows),
        "cpu_s_per_q": cpu / len(rows),
        "qps": len(rows) / seconds,
        "f1": sum(f1_score(a, g) for a, g in zip(answers, golds, strict=False)) / len(rows),
        "em": sum(exact_match(a, g) for a, g in zip(answers, golds, strict=False)) / len(rows),
        "prompt_tokens": sum(tokens) / len(tokens),
        "prompt_tokens_per_s": sum(tokens) / seconds,
        "prefix_hit_rate": hit_rate,
        "answers": answers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=50, help="the first N questions")
    parser.add_argument("--rungs", nargs="+", default=None, choices=RUNGS, help="default: every installed rung")
    parser.add_argument(
        "--backends",
        nargs="+",
        default=None,
        choices=["llama_cpp", "transformers", "vllm"],
        help="default: all three, vLLM when its venv exists (make vllm-venv)",
    )
    parser.add_argument(
        "--slots", type=int, nargs="+", default=[1], help="llama.cpp parallel slots to compare (each a row)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, available_cpus()],
        help="compute threads for either backend, each a row (default: 1 and every CPU available)",
    )
    parser.add_argument(
        "--cache-prompt",
        action="store_true",
        help="llama.cpp reuses the KV cache of the prefix a prompt shares with the slot's last one",
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "bfloat16"],
        help="transformers and vLLM dtypes, side by side",
    )
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    rungs = args.rungs or [r for r in RUNGS if installed(r, args.models_dir)]
    missing = [r for r in rungs if not installed(r, args.models_dir)]
    if missing:
        raise SystemExit(f"not installed: {missing} (make models / make models-1.5b)")
    if args.backends is None:
        args.backends = ["llama_cpp", "transformers"]
        try:
            vllm_python()
            args.backends.append("vllm")
        except VllmUnavailableError as error:
            print(f"(no vLLM row: {error})")
    rows = gold_rows(json.loads(args.data.read_text())[: args.questions])
    print(
        f"{len(rows)} HotpotQA distractor questions, gold paragraphs as context, greedy, "
        f"max_new_tokens {args.max_new_tokens}, batch {args.batch_size}, threads {args.threads}, "
        f"llama.cpp prefix reuse {'on' if args.cache_prompt else 'off'}, transformers in {', '.join(args.dtypes)}"
    )
    flags = cpu_flags()
    bf16_flags = [f for f in BF16_CPU_FLAGS if f in flags]
    print(
        f"CPU: {'avx512f' if 'avx512f' in flags else 'avx2' if 'avx2' in flags else 'no avx2'}, "
        f"bf16 instructions: {', '.join(bf16_flags) or 'none'}; dtype auto picks {cpu_dtype(flags)} here"
    )

    results = []
    for rung in rungs:
        if "transformers" in args.backends or "vllm" in args.backends:
            started = time.perf_counter()
            ensure_offline_model(rung, default_folder(rung, args.models_dir), args.models_dir)
            spent = time.perf_counter() - started
            if spent > 1:
                print(f"(one-time GGUF -> HF conversion of {rung}: {spent:.0f} s, not counted below)")
        for backend in args.backends:
            for slots in args.slots if backend == "llama_cpp" else [1]:
                for threads in args.threads:
                    for dtype in args.dtypes if backend != "llama_cpp" else ["-"]:
                        result = run_one(rung, backend, slots, threads, rows, args, dtype)
                        results.append(result)
                        print(
                            f"  {rung} {result['backend']}: {result['seconds']:.1f} s, F1 {result['f1']:.3f}",
                            flush=True,
                        )

    print()
    print(
        "| rung | backend | prompt tokens | load s | s/question | CPU s/question | questions/s | prompt tokens/s "
        "| prefix-cache hits | F1 | EM | same answers as row 1 of rung |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        first = next(r for r in results if r["rung"] == result["rung"])
        same = sum(a == b for a, b in zip(result["answers"], first["answers"], strict=False))
        print(
            f"| {result['rung']} ({OFFLINE_MODELS[result['rung']].quantization}) | {result['backend']} | "
            f"{result['prompt_tokens']:.0f} | {result['load_s']:.1f} | {result['s_per_q']:.2f} | "
            f"{result['cpu_s_per_q']:.2f} | {result['qps']:.2f} | {result['prompt_tokens_per_s']:.0f} | "
            + ("–" if result["prefix_hit_rate"] is None else f"{result['prefix_hit_rate']:.0%}")
            + f" | {result['f1']:.3f} | {result['em']:.3f} | {same}/{len(rows)} |"
        )
    for rung in rungs:
        by = {r["backend"]: r for r in results if r["rung"] == rung}
        for label, result in by.items():
            one = by.get(label.rsplit(", ", 1)[0] + ", 1 thr")
            if one is not None and result is not one:
                print(
                    f"{rung} {label}: {one['seconds'] / result['seconds']:.2f}x the questions/s of 1 thread "
                    f"({result['qps']:.3f} vs {one['qps']:.3f})"
                )
        for threads in args.threads:
            fp32, bf16 = by.get(f"transformers float32, {threads} thr"), by.get(f"transformers bfloat16, {threads} thr")
            if fp32 is not None and bf16 is not None:
                print(
                    f"{rung} transformers, {threads} thr: bfloat16 / float32 time per question "
                    f"{bf16['seconds'] / fp32['seconds']:.2f}x (above 1: float32 is faster on this CPU)"
                )
            hf, engine = by.get(f"transformers float32, {threads} thr"), by.get(f"vllm float32, {threads} thr")
            if hf is not None and engine is not None:
                same = sum(a == b for a, b in zip(hf["answers"], engine["answers"], strict=True))
                print(
                    f"{rung}, float32, {threads} thr: vLLM {engine['qps'] / hf['qps']:.2f}x the questions/s of "
                    f"transformers; {same}/{len(rows)} answers identical"
                )
        hf, cpp = by.get("transformers float32, 1 thr"), by.get("llama_cpp x1, 1 thr")
        if hf is not None and cpp is not None:
            print(
                f"{rung}: transformers / llama.cpp (1 slot, 1 thread) time per question: "
                f"{hf['seconds'] / cpp['seconds']:.2f}x wall, {hf['cpu_s_per_q'] / cpp['cpu_s_per_q']:.2f}x CPU "
                "(above 1: llama.cpp is faster)"
            )
    if args.json:
        args.json.write_text(json.dumps([{k: v for k, v in r.items()} for r in results], indent=2))


if __name__ == "__main__":
    main()
