"""LLMLingua compression on CPU: seconds per question in float32 and in bfloat16, side by side.

Compresses the first N HotpotQA distractor questions (their ten paragraphs, one context each) to a reader
budget with the harness's LLMLingua packer (LongLLMLingua's question-aware settings over SmolLM2-135M, the
offline default), once per dtype, without a compression cache, and prints per dtype: seconds per question,
the mean compressed length in reader tokens, how many fit the budget without truncation, and how many
compressions equal the first dtype's. The default ``--dtypes`` adds bfloat16 on any CPU with bf16
instructions (elsewhere bf16 is emulated and the packer refuses it), so that the speed-up line shows which is
faster there; ``torch_dtype: auto`` picks it only on a CPU with AMX (``compressor_dtype``, printed in the header).
Model loading and the first compression are timed apart from the rest. Then, in the first dtype, the same
questions at a second budget (``--second-budget``) twice: with the documents' question-conditioned perplexities
the compressor remembers from the first budget (LongLLMLingua's ranking, as a sweep over budgets runs it), and
with nothing remembered, side by side with the texts compared.

    .venv/bin/python benchmarks/bench_compression.py --questions 8 --budget 160
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from harness.backends.offline_models import default_folder, ensure_offline_model
from harness.backends.precision import cpu_dtype, cpu_flags, cpu_kind
from harness.core.threads import available_cpus
from harness.core.types import Example, Pool, Snippet
from harness.pack.base import PackingRequest
from harness.pack.llmlingua import LLMLinguaPacker, compressor_dtype
from harness.text.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_v1_100.json"
READER = "qwen2.5-coder-0.5b"  # the default reader: its tokenizer measures the budget


def requests(records: list[dict], tokens: TokenCounter, budget: int) -> list[PackingRequest]:
    """One request per question: its paragraphs as snippets, one candidate each, in the record's order."""
    built = []
    for rec in records:
        texts = [(title, f"{title}: {''.join(sents).strip()}") for title, sents in rec["context"]]
        snippets = [
            Snippet(text=text, cand_id=title, source_ids=(title,), tokens=tokens.count(text), rank=rank)
            for rank, (title, text) in enumerate(texts)
        ]
        gold = tuple(dict.fromkeys(title for title, _ in rec["supporting_facts"]))
        example = Example(rec["_id"], rec["question"], (rec["answer"],), gold, documents=())
        empty = np.zeros((0, 1), dtype=np.float32)
        pool = Pool(example=example, candidates=[], embeddings=empty, query_embedding=np.ones(1, np.float32))
        embeddings = np.zeros((len(snippets), 1), dtype=np.float32)
        built.append(PackingRequest(rec["question"], pool, snippets, embeddings, pool.query_embedding, budget, tokens))
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--questions", type=int, default=8, help="the first N questions (at least 2: the first warms the kernels)"
    )
    parser.add_argument("--budget", type=int, default=160, help="reader tokens")
    parser.add_argument("--second-budget", type=int, default=128, help="reader tokens of the ranking comparison")
    parser.add_argument(
        "--dtypes", nargs="+", default=None, help="default: float32, and bfloat16 where the CPU has bf16 instructions"
    )
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.questions < 2:
        parser.error(f"--questions {args.questions}: at least 2 (the first compression warms the kernels, untimed)")

    from transformers import AutoTokenizer

    flags = cpu_flags()
    dtypes = args.dtypes or list(dict.fromkeys(["float32", cpu_dtype(flags)]))
    threads = available_cpus()
    torch.set_num_threads(threads)
    folder = ensure_offline_model(READER, default_folder(READER, args.models_dir))
    tokens = TokenCounter(AutoTokenizer.from_pretrained(folder))
    records = json.loads(args.data.read_text(encoding="utf-8"))[: args.questions]
    batch = requests(records, tokens, args.budget)
    print(
        f"CPU kind {cpu_kind(flags)} ({threads} threads; dtype auto = {compressor_dtype(flags)}); "
        f"{len(batch)} questions of {args.data.name}, B = {args.budget} reader tokens ({READER} tokenizer), "
        "LongLLMLingua over SmolLM2-135M"
    )
    figures, first_texts = [], None
    for dtype in dtypes:
        packer = LLMLinguaPacker(models_dir=str(args.models_dir), model_config={"torch_dtype": dtype})
        start = time.perf_counter()
        packer.compressor()
        packer.pack(batch[0])  # the first compression warms the kernels: timed apart
        warmup = time.perf_counter() - start
        start = time.perf_counter()
        contexts = [packer.pack(request) for request in batch[1:]]
        seconds = time.perf_counter() - start
        texts = [" ".join(s.text for s in c.snippets) for c in contexts]
        first_texts = first_texts or texts
        figures.append(
            {
                "dtype": dtype,
                "numerics": packer.numerics,
                "load_and_first_s": round(warmup, 2),
                "s_per_question": round(seconds / max(len(contexts), 1), 2),
                "mean_tokens": round(float(np.mean([c.extra["compressed_tokens"] for c in contexts])), 1),
                "untruncated": sum(not c.extra["truncated"] for c in contexts),
                "same_as_first": sum(a == b for a, b in zip(texts, first_texts, strict=True)),
                "timed": len(contexts),
            }
        )
    header = (
        "| dtype | numerics | load + first (s) | s/question | mean tokens | fit untruncated | same text as first row |"
    )
    print(header + "\n|---|---|---|---|---|---|---|")
    for f in figures:
        numerics = f["numerics"].replace("|", "\\|")  # its own bar, escaped in the table
        print(
            f"| {f['dtype']} | {numerics} | {f['load_and_first_s']} | {f['s_per_question']} | {f['mean_tokens']} "
            f"| {f['untruncated']}/{f['timed']} | {f['same_as_first']}/{f['timed']} |"
        )
    if len(figures) > 1:
        print(
            f"speed-up of {figures[-1]['dtype']} over {figures[0]['dtype']}: "
            f"{figures[0]['s_per_question'] / figures[-1]['s_per_question']:.2f}x"
        )
    ranking = remembered_ranking(dtypes[0], batch[1:], args.second_budget, args.models_dir)
    speedup = ranking["afresh_s"] / ranking["remembered_s"]
    print(
        f"B = {args.second_budget} after B = {args.budget} ({dtypes[0]}): {ranking['remembered_s']} s/question with "
        f"the ranking remembered, {ranking['afresh_s']} s afresh ({speedup:.2f}x); "
        f"same text {ranking['same_text']}/{ranking['timed']}"
    )
    if args.json:
        args.json.write_text(json.dumps({"dtypes": figures, "ranking": ranking}, indent=2) + "\n", encoding="utf-8")


def remembered_ranking(dtype: str, batch: list[PackingRequest], budget: int, models_dir: Path) -> dict:
    """Seconds per question at ``budget`` with the perplexities remembered from the packings above, and with the
    compressor's memo bypassed; the texts must be the same."""
    packer = LLMLinguaPacker(models_dir=str(models_dir), model_config={"torch_dtype": dtype})
    compressor = packer.compressor()  # the one above: compressors are built once per process and settings
    remembered = compressor.get_condition_ppl
    again = [replace(request, budget=budget) for request in batch]
    figures: dict = {"budget": budget, "timed": len(again)}
    texts = {}
    for mode, ranking in (("remembered", remembered), ("afresh", remembered.__wrapped__)):
        compressor.get_condition_ppl = ranking
        start = time.perf_counter()
        texts[mode] = [" ".join(s.text for s in packer.pack(request).snippets) for request in again]
        figures[f"{mode}_s"] = round((time.perf_counter() - start) / max(len(again), 1), 2)
    compressor.get_condition_ppl = remembered
    figures["same_text"] = sum(a == b for a, b in zip(texts["remembered"], texts["afresh"], strict=True))
    return figures


if __name__ == "__main__":
    main()
