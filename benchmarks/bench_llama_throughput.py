"""Where a llama.cpp reader spends its time: prompt processing vs decoding, in llama.cpp's own timings.

Reading a short-answer QA prompt is ~250 tokens in and at most 24 out, so prompt processing dominates.
Prompt processing is a batch of matrix products (compute-bound); decoding reads every weight once per
token (memory-bound). 4-bit weights cut the bytes read, not the multiply-adds, so they speed up decoding
only. This prints both rates for a GGUF reader and the arithmetic rate prompt processing reaches
(2 x the layers' parameters per token), to set against the core's float32 FMA peak.

    .venv/bin/python benchmarks/bench_llama_throughput.py --model qwen2.5-coder-0.5b --threads 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.backends.offline_models import OFFLINE_MODELS, gguf_path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_v1_100.json"


def layer_parameters(path: Path) -> int:
    """Weights every prompt token multiplies through: the token embedding is a lookup, and llama.cpp
    applies the output projection to the last prompt position only."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return sum(int(t.n_elements) for t in reader.tensors if t.name not in ("token_embd.weight", "output.weight"))


def prompts(count: int) -> list[str]:
    """The first HotpotQA questions with their gold paragraphs as context (about 250 tokens, as in
    bench_readers.py)."""
    records = json.loads(DATA.read_text())[:count]
    out = []
    for record in records:
        gold = {title for title, _ in record["supporting_facts"]}
        context = "\n".join(f"{title}: {''.join(sents)}" for title, sents in record["context"] if title in gold)
        out.append(f"{context}\n\nQuestion: {record['question']}\nAnswer:")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(OFFLINE_MODELS))
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    args = parser.parse_args()

    import xllamacpp

    path = gguf_path(args.model, args.models_dir)
    flops_per_token = 2 * layer_parameters(path)
    texts = prompts(args.questions)
    print(f"{args.model}: {flops_per_token / 2 / 1e6:.0f} M parameters in its layers, {len(texts)} HotpotQA prompts")
    print("| threads | prompt tokens/s | decode tokens/s | prompt GFLOP/s | prompt share of time | CPU s/question |")
    print("|---|---|---|---|---|---|")
    for threads in args.threads:
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = 4096
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.sampling.temp = 0
        params.sampling.top_k = 1
        params.verbosity = -1
        server = xllamacpp.Server(params)
        server.handle_completions({"prompt": "Hello", "max_tokens": 2, "temperature": 0})  # warm-up
        prompt_n = prompt_ms = decode_n = decode_ms = 0.0
        cpu_start = time.process_time()
        for text in texts:
            response = server.handle_completions(
                {"prompt": text, "max_tokens": args.max_new_tokens, "temperature": 0, "cache_prompt": False}
            )
            timings = response["timings"]
            prompt_n += timings["prompt_n"]
            prompt_ms += timings["prompt_ms"]
            decode_n += timings["predicted_n"]
            decode_ms += timings["predicted_ms"]
        cpu = (time.process_time() - cpu_start) / len(texts)
        prompt_rate, decode_rate = prompt_n / prompt_ms * 1e3, decode_n / decode_ms * 1e3
        print(
            f"| {threads} | {prompt_rate:.1f} | {decode_rate:.1f} | {prompt_rate * flops_per_token / 1e9:.1f} | "
            f"{prompt_ms / (prompt_ms + decode_ms):.0%} | {cpu:.2f} |"
        )
        del server


if __name__ == "__main__":
    main()
