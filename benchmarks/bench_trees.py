"""RAPTOR vs the dynamic tree (DTCRS) on the shared QASPER sample: nodes per layer, evidence coverage
per layer and construction time.

RAPTOR builds one tree per paper (all papers); DTCRS builds one tree per abstractive question (the
first annotator's answer type), after classifying it with the LM itself: a question the LM does not
call abstractive gets no tree. Chunks are RAPTOR's 100 reader tokens (SmolLM2's tokenizer), shared
by both methods. Construction time excludes preprocessing (chunking, leaf embedding) and includes,
for DTCRS, classification, table of contents and decomposition. Every run starts from an empty
LM-response and tree cache, so every summary is really generated; each dynamic tree is built as if
alone (no LM response reused from another question, not even the paper's table of contents, which
a per-document cache would save: ``toc_seconds`` is reported apart).

Evidence coverage per layer, for each abstractive question: ``share`` is the fraction of the layer's
nodes whose leaves include a gold evidence chunk; ``top1`` is the fraction of the gold chunks under
the layer's single node most similar to the question.

    python benchmarks/bench_trees.py [--papers 10] [--max-questions 14] [--classifier gold] [--out results.json]

``--trees dtcrs --raptor-json earlier.json`` rebuilds only the dynamic trees and compares them with
RAPTOR figures from an earlier run of the same settings.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from harness.backends.offline_models import default_folder
from harness.data.qasper import load_qasper
from harness.lm.local import LocalChatLM
from harness.retrieve.dense import DenseRetriever
from harness.retrieve.encoder import Encoder
from harness.text.tokens import resolve_token_counter
from harness.tree.base import TreeServices
from harness.tree.dtcrs import DynamicTree
from harness.tree.questions import classify_question
from harness.tree.raptor import RaptorTree
from harness.tree.summary_tree import SummaryTree


def layer_coverage(tree: SummaryTree, embeddings: list[np.ndarray], query: np.ndarray, gold: set[str]):
    """[(share, top1)] per layer (see the module docstring)."""
    out = []
    for layer, vectors in zip(tree.layers, embeddings, strict=False):
        if not layer:
            continue
        share = float(np.mean([bool(gold & set(n.source_ids)) for n in layer]))
        best = layer[int(np.argmax(vectors @ query))]
        top1 = len(gold & set(best.source_ids)) / len(gold) if gold else float("nan")
        out.append((round(share, 3), round(top1, 3)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/qasper/qasper-original-sample.json")
    parser.add_argument("--papers", type=int, default=10, help="first N papers of the file")
    parser.add_argument("--max-questions", type=int, default=None, help="cap on abstractive questions")
    parser.add_argument("--chunk-tokens", type=int, default=100)
    parser.add_argument("--reducer", default="auto")
    parser.add_argument(
        "--classifier",
        default="lm",
        choices=["lm", "rules", "gold"],
        help="gold: build for every abstractive question (isolates construction cost)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary folder (no cache hits)")
    parser.add_argument("--out", default=None, help="write every figure as JSON here")
    parser.add_argument("--trees", default="raptor,dtcrs", help="which trees to build: raptor,dtcrs")
    parser.add_argument("--raptor-json", default=None, help="RAPTOR figures from an earlier --out file")
    args = parser.parse_args()

    cache_dir = Path(args.cache_dir or tempfile.mkdtemp(prefix="bench_trees_"))
    examples = load_qasper(args.data, chunk_tokens=args.chunk_tokens, tokenizer="offline:smollm2")
    papers = list(dict.fromkeys(e.metadata["paper_id"] for e in examples))[: args.papers]
    examples = [e for e in examples if e.metadata["paper_id"] in papers]
    encoder = Encoder("offline:all-MiniLM-L6-v2", cache_dir=str(cache_dir), show_progress=False)
    lm = LocalChatLM(
        pretrained=str(default_folder("smollm2")),
        offline_model="smollm2",
        cache_dir=cache_dir,
        torch_threads=args.torch_threads,
        batch_size=8,
    )
    # The dynamic trees get an LM with no persistent cache, emptied before each question: questions on
    # one paper share prompts (the table of contents, a one-sub-question cluster of every chunk), and
    # a cache hit would hide a cost every question really pays when built on its own.
    dtcrs_lm = LocalChatLM(
        pretrained=str(default_folder("smollm2")),
        offline_model="smollm2",
        torch_threads=args.torch_threads,
        batch_size=8,
    )
    services = TreeServices(encoder=encoder, tokens=resolve_token_counter("offline:smollm2"), seed=args.seed)
    common = {"reducer": args.reducer}
    raptor = RaptorTree(lm=lm, **common)
    dtcrs = DynamicTree(lm=dtcrs_lm, classifier=args.classifier, **common)
    pools = {p.example.question_id: p for p in DenseRetriever(encoder).retrieve(examples)}
    abstractive = [e for e in examples if e.qtype == "abstractive"][: args.max_questions]
    print(
        f"{len(papers)} papers, {len(examples)} questions, {len(abstractive)} abstractive; "
        f"chunks of {args.chunk_tokens} SmolLM2 tokens; reducer={args.reducer}; cache {cache_dir}",
        flush=True,
    )

    build = set(args.trees.split(","))
    results: dict = {"args": vars(args), "raptor": {}, "dtcrs": {}}
    if args.raptor_json:
        earlier = json.loads(Path(args.raptor_json).read_text())
        results["raptor"] = {p: r for p, r in earlier["raptor"].items() if p in papers}
    by_paper = defaultdict(list)
    for e in examples:
        by_paper[e.metadata["paper_id"]].append(e)
    with threadpool_limits(1):
        for pid in papers if "raptor" in build else []:
            pool = pools[by_paper[pid][0].question_id]
            start = time.perf_counter()
            tree, embeddings, _, _ = raptor.build(pool, services)
            results["raptor"][pid] = {
                "chunks": len(pool.example.documents),
                "nodes_per_layer": tree.nodes_per_layer(),
                "summary_nodes": len(tree.summary_nodes()),
                "build_seconds": round(tree.build_seconds, 1),
                "timings": {k: round(v, 1) for k, v in tree.timings.items()},
                "wall_seconds": round(time.perf_counter() - start, 1),
                "coverage": {
                    e.question_id: layer_coverage(
                        tree, embeddings, pools[e.question_id].query_embedding, set(e.gold_doc_ids)
                    )
                    for e in by_paper[pid]
                    if e.qtype == "abstractive"
                },
            }
            r = results["raptor"][pid]
            print(
                f"raptor {pid}: chunks {r['chunks']}, nodes/layer {r['nodes_per_layer']}, {r['build_seconds']} s",
                flush=True,
            )
            _dump(args.out, results)
        for e in abstractive if "dtcrs" in build else []:
            pool = pools[e.question_id]
            dtcrs_lm.response_cache.memory.clear()
            _, info = dtcrs.expand(pool, services)
            coverage = []
            if info.get("built"):
                record = dtcrs.cached(info["cache_key"])
                tree = SummaryTree.from_json(record["tree"])
                _, leaf_emb = dtcrs.leaves(pool, services)
                coverage = layer_coverage(
                    tree,
                    [leaf_emb] + dtcrs.summary_embeddings(info["cache_key"], tree, services),
                    pool.query_embedding,
                    set(e.gold_doc_ids),
                )
            results["dtcrs"][e.question_id] = {
                "paper": e.metadata["paper_id"],
                "question": e.question,
                "class": info["question_class"],
                "class_source": info["class_source"],
                "subquestions": info["sub_questions"],
                "nodes_per_layer": info["nodes_per_layer"],
                "summary_nodes": info["summary_nodes"],
                "build_seconds": round(info["build_seconds"], 1),
                "timings": {k: round(v, 1) for k, v in info["timings"].items()},
                "coverage": coverage,
            }
            if args.classifier != "lm":  # what the LM itself would have decided (rules when unparseable)
                verdict = classify_question(e.question, lm, "lm", max_new_tokens=dtcrs.classify_max_tokens)
                results["dtcrs"][e.question_id]["lm_class"] = f"{verdict.label} ({verdict.source})"
            d = results["dtcrs"][e.question_id]
            print(
                f"dtcrs {e.question_id[:8]} ({d['class']}/{d['class_source']}): "
                f"{len(d['subquestions'])} sub-questions, "
                f"nodes/layer {d['nodes_per_layer']}, {d['build_seconds']} s",
                flush=True,
            )
            _dump(args.out, results)
    report(results)
    _dump(args.out, results)


def _dump(path: str | None, results: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(results, indent=1))


def report(results: dict) -> None:
    raptor, dtcrs = results["raptor"], results["dtcrs"]
    print("\nRAPTOR, one tree per paper")
    print(f"{'paper':<12} {'chunks':>6} {'nodes per layer':<22} {'summaries':>9} {'build s':>8}")
    for pid, r in raptor.items():
        print(
            f"{pid:<12} {r['chunks']:>6} {r['nodes_per_layer']!s:<22} "
            f"{r['summary_nodes']:>9} {r['build_seconds']:>8.1f}"
        )
    print("\nDTCRS, one tree per abstractive question")
    print(
        f"{'question':<10} {'paper':<12} {'class':<22} {'subq':>4} "
        f"{'nodes per layer':<16} {'summaries':>9} {'build s':>8}"
    )
    for qid, d in dtcrs.items():
        label = f"{d['class']} ({d['class_source']})"
        if "lm_class" in d:
            label += f"; LM: {d['lm_class']}"
        print(
            f"{qid[:8]:<10} {d['paper']:<12} {label:<22} {len(d['subquestions']):>4} "
            f"{d['nodes_per_layer']!s:<16} {d['summary_nodes']:>9} {d['build_seconds']:>8.1f}"
        )

    paired = [(raptor[d["paper"]], d) for d in dtcrs.values() if d["paper"] in raptor]
    if paired:
        r_nodes = np.mean([r["summary_nodes"] for r, _ in paired])
        d_nodes = np.mean([d["summary_nodes"] for _, d in paired])
        r_secs = np.mean([r["build_seconds"] for r, _ in paired])
        d_secs = np.mean([d["build_seconds"] for _, d in paired])
        print(f"\nPer abstractive question (the tree that answers it; {len(paired)} questions):")
        print(f"  summary nodes: RAPTOR {r_nodes:.1f}  DTCRS {d_nodes:.1f}  reduction {1 - d_nodes / r_nodes:.1%}")
        print(f"  build seconds: RAPTOR {r_secs:.1f}  DTCRS {d_secs:.1f}  reduction {1 - d_secs / r_secs:.1%}")
        papers = sorted({d["paper"] for _, d in paired})
        r_total = sum(raptor[p]["build_seconds"] for p in papers)
        d_total = sum(d["build_seconds"] for _, d in paired)
        print(
            f"  per paper, all its abstractive questions ({len(papers)} papers): RAPTOR {r_total:.0f} s once per "
            f"paper vs DTCRS {d_total:.0f} s over the questions ({1 - d_total / r_total:.1%} less)"
        )
        built = [d for _, d in paired if d["coverage"]]
        for name, rows in (
            (
                "RAPTOR",
                [
                    r["coverage"][qid]
                    for qid, d in dtcrs.items()
                    if d["paper"] in raptor
                    for r in [raptor[d["paper"]]]
                    if qid in r["coverage"]
                ],
            ),
            ("DTCRS", [d["coverage"] for d in built]),
        ):
            if not rows:
                continue
            depth = max(len(c) for c in rows)
            parts = []
            for layer in range(depth):
                vals = [c[layer] for c in rows if len(c) > layer]
                share = np.nanmean([v[0] for v in vals])
                top1 = np.nanmean([v[1] for v in vals])
                parts.append(f"L{layer}: share {share:.2f} top1 {top1:.2f} (n={len(vals)})")
            print(f"  evidence coverage {name}: " + "; ".join(parts))
    all_raptor = list(raptor.values())
    if all_raptor:
        print(
            f"\nRAPTOR over {len(all_raptor)} papers: {sum(r['summary_nodes'] for r in all_raptor)} summaries, "
            f"{sum(r['build_seconds'] for r in all_raptor):.0f} s"
        )


if __name__ == "__main__":
    main()
