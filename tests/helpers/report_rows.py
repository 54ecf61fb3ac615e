"""Synthetic result rows with a known structure, written as fake run and sweep directories (report tests)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def common_columns(qids, seed, budget, reader, packer="packed", diversifier="knn", perturb="none") -> dict:
    n = len(qids)
    return {
        "question_id": list(qids),
        "dataset": "synthetic",
        "split": "dev",
        "question": [f"What is fact {q}?" for q in qids],
        "gold_answers": [json.dumps([f"answer {q}"]) for q in qids],
        "hops": 2,
        "qtype": "bridge",
        "retriever": "minilm",
        "perturb": perturb,
        "tree": "none",
        "diversifier": diversifier,
        "packer": packer,
        "budget": budget,
        "k": 5,
        "seed": seed,
        "reader": reader,
        "answer": ["x"] * n,
        "context": ["..."] * n,
        "cfg.seed": seed,
        "cfg.budget": budget,
        "cfg.k": 5,
        "cfg.dataset.seed": seed,
        "cfg.packer.name": packer,
        "cfg.packer._target_": f"harness.pack.{packer}",
        "cfg.diversifier.name": diversifier,
        "cfg.reader.name": reader,
        "cfg.reader.pretrained": f".cache/models/{reader}",
        # differs between jobs but says nothing about the policy: must not split policies
        "cfg.paths.cache_dir": f"/scratch/job-{seed}-{budget}",
    }


def packing_rows(n_questions: int, packer: str, budget: int, seed: int, reader: str) -> pd.DataFrame:
    """Rows with a known structure: submod's F1 is packed's plus exactly 0.1 on every (question, seed)."""
    qids = [f"q{i:03d}" for i in range(n_questions)]
    u = np.random.default_rng(7).uniform(size=n_questions)  # per-question difficulty
    v = np.random.default_rng(seed).uniform(size=n_questions)  # per (question, seed)
    recall = np.where(u > 0.3, 1.0, 0.5)
    aic = ((recall == 1.0) & (v < budget / 160)).astype(float)
    f1 = 0.6 * aic + 0.2 * u + (0.05 if reader == "big-7b" else 0.0)
    if packer == "submod":
        f1 = f1 + 0.1
        aic = np.maximum(aic, ((recall == 1.0) & (v < budget / 100)).astype(float))
    frame = pd.DataFrame(
        {
            **common_columns(qids, seed, budget, reader, packer=packer),
            "em": (f1 > 0.7).astype(float),
            "f1": f1,
            "answer_in_context": aic,
            "answer_in_context_graded": aic,
            "gold_doc_coverage": recall * (0.5 + 0.5 * (v < budget / 160)),
            "all_gold_in_reader": aic,
            "gold_token_density": 0.3 * aic + 0.1,
            "n_snippets": 7 if packer == "submod" else 5,
            "recall_at_k": recall,
            "all_gold_at_k": (recall == 1.0).astype(float),
            "context_tokens": budget - (v * 10).round(),
            "prompt_tokens": budget + 40,
        }
    )
    return frame


def diversity_rows(n_questions: int, diversifier: str, lam: float | None, rho: float, seed: int) -> pd.DataFrame:
    """S-Recall = a (question, seed) base + a known offset per (method, point, level)."""
    qids = [f"q{i:03d}" for i in range(n_questions)]
    base = np.random.default_rng(seed).uniform(0.3, 0.9, size=n_questions)
    offset = diversity_offset(diversifier, lam, rho)
    frame = pd.DataFrame(
        {
            **common_columns(
                qids, seed, 128, "tiny-135m", diversifier=diversifier, perturb="none" if rho == 0 else "inject"
            ),
            "s_recall": base + offset,
            "pool_redundancy": 0.05 + 0.8 * rho,
            "f1": base,
            "em": 0.0,
            "recall_at_k": 1.0,
            "all_gold_at_k": 1.0,
        }
    )
    if rho > 0:
        frame["cfg.perturb.rho"] = rho
    if diversifier == "mmr":
        frame["cfg.diversifier.lambda_"] = lam
    if diversifier == "rule":
        frame["cfg.diversifier.inner.lambda_"] = lam
        frame["diversify.rule_triggered"] = rho > 0
    return frame


def diversity_offset(diversifier: str, lam: float | None, rho: float) -> float:
    if diversifier == "knn":
        return -0.5 * rho
    mmr = (-0.02 - 0.1 * rho) if lam == 0.3 else (-0.01 - 0.3 * rho)
    if diversifier == "mmr":
        return mmr
    return 0.0 if rho == 0 else mmr  # rule: kNN when clean, its inner mmr when redundant


def write_sweep(root: Path, frames: list[pd.DataFrame], failed: int = 0) -> Path:
    for i, frame in enumerate(frames):
        job = root / str(i)
        job.mkdir(parents=True)
        frame.to_parquet(job / "rows.parquet", index=False)
        (job / "summary.json").write_text(json.dumps({"n_questions": len(frame)}))
    for j in range(failed):
        job = root / str(len(frames) + j)
        job.mkdir(parents=True)
        (job / "error.txt").write_text("Traceback: boom")
    return root
