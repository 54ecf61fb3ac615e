"""Reader throughput: batch size 1 against larger batches, and the response cache's saving.

Reads the first N HotpotQA distractor questions with their two gold paragraphs as context (each
truncated so the context is about 160 reader tokens), and times the default reader (offline
SmolLM2-135M-Instruct, bf16, CPU) with a fresh, empty response cache at each batch size. Then reruns
the largest batch size against its now-warm cache.

    .venv/bin/python benchmarks/bench_reader_batching.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from harness.read.base import PromptRequest, Reader
from harness.read.hf import TransformersReader

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_v1_100.json"
DEFAULT_MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct"


def gold_contexts(records: list[dict], reader: Reader, context_tokens: int) -> list[tuple[str, str, str]]:
    """(question, context, answer) with the gold paragraphs, each cut to an equal share of the tokens."""
    rows = []
    for rec in records:
        paragraphs = {title: "".join(sents).strip() for title, sents in rec["context"]}
        gold_titles = list(dict.fromkeys(title for title, _ in rec["supporting_facts"]))
        share = context_tokens // max(1, len(gold_titles))
        parts = [f"{t}: {reader.token_counter.truncate(paragraphs[t], share)}" for t in gold_titles]
        rows.append((rec["question"], "\n\n".join(parts), rec["answer"]))
    return rows


def make_reader(
    batch_size: int,
    cache_dir: str,
    model_folder: Path,
    max_new_tokens: int,
    torch_threads: int | None = None,
    dtype: str = "bfloat16",
) -> Reader:
    return TransformersReader(
        name="smollm2-135m",
        pretrained=str(model_folder),
        offline_model="smollm2",
        dtype=dtype,
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
        cache_dir=cache_dir,
        trainer={"accelerator": "cpu", "devices": 1, "strategy": "auto"},
        show_progress=False,
        torch_threads=torch_threads,
    )


def timed_answers(reader: Reader, requests: list[PromptRequest]) -> tuple[list[str], float]:
    start = time.perf_counter()
    answers = reader.answer(requests)
    return answers, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--n", type=int, default=50, help="number of questions (first N)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--context-tokens", type=int, default=160)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--model-folder", type=Path, default=DEFAULT_MODEL)
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        help="bfloat16 (the README table) or float32 (the default reader since it is batch-invariant)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="threads while generating (0: torch's default); one is fastest on a shared CPU",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    threads = args.torch_threads or None

    records = json.loads(args.data.read_text())[: args.n]
    probe = make_reader(1, tempfile.mkdtemp(prefix="bench-reader-"), args.model_folder, args.max_new_tokens)
    rows = gold_contexts(records, probe, args.context_tokens)
    requests = [PromptRequest(q, c) for q, c, _ in rows]
    prompts = [probe.render(r) for r in requests]
    prompt_tokens = [probe.count_prompt_tokens(p) for p in prompts]
    print(
        f"{len(prompts)} questions, prompt tokens mean {sum(prompt_tokens) / len(prompts):.0f} "
        f"(min {min(prompt_tokens)}, max {max(prompt_tokens)}), max_new_tokens {args.max_new_tokens}, "
        f"{args.dtype}, generation threads {threads or torch.get_num_threads()}"
    )

    figures: dict[str, object] = {"questions": len(prompts)}
    results: dict[int, tuple[list[str], float, Reader]] = {}
    for batch_size in [1, *args.batch_sizes]:
        reader = make_reader(
            batch_size,
            tempfile.mkdtemp(prefix="bench-reader-"),
            args.model_folder,
            args.max_new_tokens,
            threads,
            args.dtype,
        )
        reader.answer([PromptRequest("Warm-up prompt: say hello.", "")])  # weights load and first-call costs, untimed
        answers, seconds = timed_answers(reader, requests)
        assert reader.generated == len(set(prompts)) + 1, "a fresh cache must generate every prompt"
        results[batch_size] = (answers, seconds, reader)
        correct = sum(gold.lower() in a.lower() for a, (_, _, gold) in zip(answers, rows, strict=False))
        print(
            f"batch size {batch_size:>2}: {seconds:6.1f} s, {len(prompts) / seconds:5.2f} questions/s, "
            f"gold answer in output {correct}/{len(prompts)}"
        )
        figures[f"bs{batch_size}_seconds"] = round(seconds, 2)
        figures[f"bs{batch_size}_qps"] = round(len(prompts) / seconds, 3)

    base = results[1][1]
    for batch_size in args.batch_sizes:
        answers, seconds, _ = results[batch_size]
        same = sum(a == b for a, b in zip(answers, results[1][0], strict=False))
        print(
            f"speed-up batch {batch_size} vs 1: {base / seconds:.2f}x; answers identical to batch size 1: "
            f"{same}/{len(prompts)}"
        )
        figures[f"speedup_bs{batch_size}"] = round(base / seconds, 2)
        figures[f"identical_bs{batch_size}"] = same

    largest = max(args.batch_sizes)
    _, first_seconds, reader = results[largest]
    before = reader.generated
    warm_answers, warm_seconds = timed_answers(reader, requests)
    assert reader.generated == before, "a warm cache must answer every prompt"
    assert warm_answers == results[largest][0]
    print(
        f"warm cache (batch size {largest}): {warm_seconds:.4f} s = {warm_seconds / first_seconds:.2e} "
        f"of the cold run, 0 generations"
    )
    figures["warm_seconds"] = round(warm_seconds, 4)
    figures["warm_fraction"] = round(warm_seconds / first_seconds, 5)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
