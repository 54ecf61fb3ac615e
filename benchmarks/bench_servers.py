"""Data parallel over servers: questions/s of the server reader over one llama.cpp server, then over two.

Starts two llama.cpp servers on loopback (``python -m harness.backends.llama_server``, one thread and one
decoding slot each, prefix reuse off), reads the first N HotpotQA distractor questions with their gold
paragraphs as context through ``reader=openai_compat`` at the first server alone, then through
``base_urls`` over both, each with a fresh response cache, and prints both rates, their ratio and whether
the answers are identical (greedy decoding; each server decodes one request at a time, so they should be).
Server start-up and a first request to each are not timed.

    .venv/bin/python benchmarks/bench_servers.py --questions 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from harness.backends.offline_models import OFFLINE_MODELS, gguf_path
from harness.backends.precision import BF16_CPU_FLAGS, cpu_flags
from harness.core.threads import available_cpus
from harness.read.base import PromptRequest
from harness.read.server import ServerReader

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_v1_100.json"


def gold_rows(records: list[dict]) -> list[tuple[str, str]]:
    """(question, context): the gold paragraphs, titled, in supporting-fact order (as bench_readers.py)."""
    rows = []
    for rec in records:
        paragraphs = {title: "".join(sents).strip() for title, sents in rec["context"]}
        titles = list(dict.fromkeys(title for title, _ in rec["supporting_facts"]))
        rows.append((rec["question"], "\n\n".join(f"{t}: {paragraphs[t]}" for t in titles)))
    return rows


def start_server(model: str, models_dir: Path) -> tuple[subprocess.Popen, str]:
    """A llama.cpp server on a free loopback port, healthy; its process and OpenAI-style base URL."""
    command = [sys.executable, "-m", "harness.backends.llama_server", "--model", str(gguf_path(model, models_dir))]
    command += ["--port", "0"]
    command += ["--parallel", "1", "--threads", "1", "--ctx-per-slot", "2048"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(180)
    if not lines or not lines[0].startswith("listening on http://"):
        proc.kill()
        raise SystemExit(f"llama.cpp server did not start: {lines[:1]!r}")
    url = lines[0].split()[-1]
    deadline = time.monotonic() + 60
    while httpx.get(f"{url}/health").status_code != 200:
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"llama.cpp server at {url} never became healthy")
        time.sleep(0.2)
    return proc, f"{url}/v1"


def read(urls: list[str], requests: list[PromptRequest], args) -> tuple[float, list[str]]:
    """Seconds to answer ``requests`` through ``urls`` with a fresh cache, and the answers."""
    where = {"base_url": urls[0]} if len(urls) == 1 else {"base_urls": urls}
    reader = ServerReader(
        name=f"servers-{len(urls)}",
        model=args.model,
        offline_model=args.model,
        models_dir=args.models_dir,
        max_new_tokens=args.max_new_tokens,
        concurrency=args.concurrency,
        extra_body={"cache_prompt": False},
        cache_dir=tempfile.mkdtemp(prefix="bench-servers-"),
        **where,
    )
    for request in requests:
        reader.count_prompt_tokens(reader.render(request))  # the tokenizer's first load, untimed
    start = time.perf_counter()
    answers = reader.answer(requests)
    seconds = time.perf_counter() - start
    assert reader.generated == len(set(map(reader.render, requests))), "a fresh cache must generate every prompt"
    reader.close()
    return seconds, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=16, help="the first N questions")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(OFFLINE_MODELS))
    parser.add_argument("--models-dir", type=Path, default=ROOT / ".cache/models")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight on each server")
    args = parser.parse_args()

    requests = [PromptRequest(q, c) for q, c in gold_rows(json.loads(args.data.read_text())[: args.questions])]
    flags = cpu_flags()
    vector = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
    amx = [f for f in sorted(flags) if f.startswith("amx")]
    bf16 = [f for f in BF16_CPU_FLAGS if f in flags]
    print(
        f"{len(requests)} HotpotQA distractor questions, gold paragraphs as context, {args.model}, greedy, "
        f"max_new_tokens {args.max_new_tokens}; llama.cpp servers of 1 thread and 1 slot each, "
        f"{args.concurrency} request(s) in flight per server"
    )
    print(
        f"CPU: {vector}, AMX: {', '.join(amx) or 'none'}, bf16 instructions: {', '.join(bf16) or 'none'}; "
        f"{available_cpus()} CPUs available"
    )
    servers = [start_server(args.model, args.models_dir) for _ in range(2)]
    try:
        urls = [url for _, url in servers]
        warm = [PromptRequest("Say hello.", "")]
        for url in urls:
            read([url], warm, args)  # weights paged in, first-call costs, untimed
        one_s, one = read(urls[:1], requests, args)
        two_s, two = read(urls, requests, args)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)
    n = len(requests)
    print()
    print("| servers | seconds | questions/s |")
    print("|---|---|---|")
    print(f"| 1 | {one_s:.1f} | {n / one_s:.2f} |")
    print(f"| 2 | {two_s:.1f} | {n / two_s:.2f} |")
    same = sum(a == b for a, b in zip(one, two, strict=True))
    print(f"two servers / one: {one_s / two_s:.2f}x the questions/s; {same}/{n} answers identical")


if __name__ == "__main__":
    main()
