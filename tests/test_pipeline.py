"""The spine end to end: budgets hold on real data, runs write complete rows, sweeps and resume work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from harness.read.answers import extract_answer
from harness.run.pipeline import Pipeline
from tests.conftest import CONF, REPO, SHARED_DATA, compose_cfg, with_tiny_reader

HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
ROW_COLUMNS = [
    "question_id",
    "tree",
    "diversifier",
    "packer",
    "budget",
    "seed",
    "reader",
    "answer",
    "raw_answer",
    "answer_scorer",
    "em",
    "f1",
    "sp_f1",
    "joint_f1",
    "support_f1",
    "answer_in_context",
    "answer_in_context_graded",
    "gold_doc_coverage",
    "all_gold_in_reader",
    "gold_token_density",
    "recall_at_k",
    "all_gold_at_k",
    "context_tokens",
    "prompt_tokens",
]


@pytest.mark.slow  # embeds 778 passages and sentences with the real MiniLM encoder
@pytest.mark.skipif(not HOTPOT.exists(), reason="shared HotpotQA sample not present")
def test_no_packed_context_exceeds_its_budget_on_shared_hotpotqa(tmp_path):
    overrides = ["dataset=hotpotqa", f"dataset.path={HOTPOT}", "logger=none", f"paths.cache_dir={tmp_path}"]
    cfg = compose_cfg(overrides)
    pipeline = Pipeline(cfg)
    loaded = pipeline.load()
    assert len(loaded) == 103
    examples = loaded[::4]  # every fourth question, spread over the file: the budgets hold for each
    tokens = pipeline.reader.token_counter
    for budget in (96, 128, 160, 224):
        cfg.budget = budget
        prepared = pipeline.prepare(examples)
        assert len(prepared) == len(examples) == 26
        for item in prepared:
            assert item.figures["context_tokens"] <= budget
            assert tokens.count(item.context_text) <= budget  # recounted on the rendered text
            assert item.figures["context_tokens"] > 0.8 * budget  # top-k-and-truncate fills the budget

    # Provenance: the snippet records rebuild the context, mark the answer exactly where answer-in-context
    # finds it, and the pool records what the diversifier kept.
    for item in prepared:
        records = json.loads(item.figures["snippets"])
        assert [item.context_text[r["start"] : r["end"]] for r in records] == [s.text for s in item.context.snippets]
        assert bool(json.loads(item.figures["answer_spans"])) == (item.figures["answer_in_context"] == 1.0)
        assert any(r["ans"] for r in records) == (item.figures["answer_in_context"] == 1.0)
        gold = {r["doc"] for r in records if r["gold"] and not r["cut"]}
        assert len(gold) / len(item.pool.example.gold_doc_ids) == item.figures["gold_doc_coverage"]
        pool = json.loads(item.figures["pool"])
        assert len(pool) == item.figures["n_candidates"] and sum(r["kept"] for r in pool) == item.figures["n_selected"]

    # A budget that holds all ten paragraphs whole: the sp figures then follow from the file alone. Every
    # non-empty sentence is predicted; gold is the record's supporting_facts as given.
    whole = Pipeline(compose_cfg([*overrides, "k=10", "budget=4000"]))
    prepared = {item.pool.example.question_id: item for item in whole.prepare(whole.load()[::4])}
    for record in (r for r in json.loads(HOTPOT.read_text()) if r["_id"] in prepared):
        predicted = {(title, i) for title, sentences in record["context"] for i, s in enumerate(sentences) if s.strip()}
        gold = {(title, i) for title, i in record["supporting_facts"]}
        tp = len(predicted & gold)
        figures = prepared[record["_id"]].figures
        assert figures["trimmed_snippets"] == 0 and figures["gold_doc_coverage"] == 1.0
        assert figures["sp_precision"] == pytest.approx(tp / len(predicted))
        assert figures["sp_recall"] == pytest.approx(tp / len(gold))
        assert figures["sp_em"] == float(predicted == gold)
        # Every paragraph is in the context: MuSiQue's support precision is |gold| / 10.
        gold_titles = {title for title, _ in gold}
        precision = len(gold_titles) / len(record["context"])
        assert figures["support_f1"] == pytest.approx(2 * precision / (precision + 1))


def run_cli(args: list[str], cwd: Path = REPO, env_extra: dict | None = None, **kwargs):
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "HARNESS_CACHE_DIR": str(kwargs.pop("cache_dir")),
        **(env_extra or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "harness", *with_tiny_reader(args)],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        **kwargs,
    )


@pytest.mark.slow
def test_cli_run_writes_every_row_field_and_skips_a_finished_run(tmp_path):
    out = tmp_path / "run"
    args = ["dataset.sample_size=4", "budget=96", f"hydra.run.dir={out}"]
    first = run_cli(args, cache_dir=tmp_path / "cache")
    assert first.returncode == 0, first.stderr[-3000:]
    rows = pd.read_parquet(out / "rows.parquet")
    assert len(rows) == 4 and rows["question_id"].is_unique
    assert set(ROW_COLUMNS) <= set(rows.columns)
    assert (rows["context_tokens"] <= 96).all()
    assert rows["answer"].str.len().gt(0).all()
    assert [extract_answer(raw) for raw in rows["raw_answer"]] == rows["answer"].tolist()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_questions"] == 4 and "f1" in summary["metrics"]
    assert summary["counters"]["reader_prompts_generated"] == 4
    assert list((out / "wandb").glob("offline-run-*")), "W&B offline run folder missing"
    assert (out / "config.yaml").exists()

    again = run_cli(args, cache_dir=tmp_path / "cache")
    assert again.returncode == 0
    assert "already finished" in again.stdout + again.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out / "rows.parquet"), rows)


@pytest.mark.slow
def test_cli_help_and_cfg():
    # A bounded wait: Hydra lists every folder of every search-path root as a config group, so a root at
    # the repository (with .venv inside) once made --help take minutes.
    helped = subprocess.run(
        [sys.executable, "-m", "harness", "--help"], check=False, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "packer:" in helped.stdout and "python -m harness" in helped.stdout
    assert "sweeps: " in helped.stdout and "reader_ladder_cpu" in helped.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "harness", "--cfg", "job"], check=False, cwd=REPO, capture_output=True, text=True
    )
    assert shown.returncode == 0 and "budget: 160" in shown.stdout


def test_seeds_that_draw_the_same_pools_pack_once_unless_the_packer_draws_random_numbers(tmp_path, monkeypatch):
    """Every seed draws the whole demo set, so seed 13's pools equal seed 42's: its selection and packing
    are seed 42's, not a recomputation. Pools a seed changed (injected near-duplicates), and a packer that
    declares ``seeded`` (it draws from the seed), are packed again."""
    from harness.pack.submod import SubmodularPacker
    from harness.run import reuse

    reuse.clear()
    calls: list[int] = []
    original = SubmodularPacker.pack

    def counted(self, request):
        calls.append(request.seed)
        return original(self, request)

    monkeypatch.setattr(SubmodularPacker, "pack", counted)

    def prepared(seed: int, budget: int = 96, *extra: str):
        cfg = compose_cfg(
            ["dataset=demo", "packer=submod", f"budget={budget}", f"seed={seed}", "logger=none"]
            + [f"paths.cache_dir={tmp_path}", *extra]
        )
        pipeline = Pipeline(cfg)
        pipelines.append(pipeline)
        return pipeline.prepare(pipeline.load())

    pipelines: list[Pipeline] = []
    first = prepared(42)
    n = len(first)
    assert len(calls) == n
    again = prepared(13)
    assert len(calls) == n  # reused
    assert [p.reused for p in pipelines] == [{"selections": 0, "packings": 0}, {"selections": 1, "packings": 1}]
    assert [p.context_text for p in again] == [p.context_text for p in first]
    assert [p.figures for p in again] == [p.figures for p in first]
    prepared(13, budget=128)  # another budget is another packing
    assert len(calls) == 2 * n
    # Near-duplicates injected with each seed's draw make other pools: selected and packed again.
    prepared(42, 96, "perturb=inject", "perturb.rho=0.5")
    prepared(13, 96, "perturb=inject", "perturb.rho=0.5")
    assert calls[-2 * n :] == [42] * n + [13] * n
    monkeypatch.setattr(SubmodularPacker, "seeded", True)
    prepared(7)
    assert calls[-n:] == [7] * n  # keyed by its seed: packed afresh
    reuse.clear()


def test_a_packer_failing_on_one_question_names_it(tmp_path, monkeypatch):
    pipeline = Pipeline(compose_cfg(["logger=none", f"paths.cache_dir={tmp_path}", "budget=96"]))
    examples = pipeline.load()
    pack = pipeline.packer.pack

    def fails_on_the_third(request):
        if request.question == examples[2].question:
            raise IndexError("the library's own failure")
        return pack(request)

    monkeypatch.setattr(pipeline.packer, "pack", fails_on_the_third)
    with pytest.raises(IndexError, match="the library's own failure") as raised:
        pipeline.prepare(examples)
    note = f"packing question {examples[2].question_id!r} with {pipeline.packer.name!r} at B = 96"
    assert raised.value.__notes__ == [note]


@pytest.mark.parametrize("reader", sorted(p.stem for p in (CONF / "reader").glob("*.yaml")))
def test_no_reader_config_makes_the_seed_part_of_a_packing_key(reader):
    """Seeds with equal pools pack once whatever the reader: no setting that follows the seed (llama.cpp's
    sampling seed, nested in the machine-chosen reader's branches too) reaches the prompt settings the selection
    and packing keys hold. The default reader once packed every seed again this way."""
    from harness.run.keys import prompt_settings

    settings = [
        prompt_settings(OmegaConf.to_container(compose_cfg([f"reader={reader}", f"seed={seed}"]).reader, resolve=True))
        for seed in (42, 13)
    ]
    assert settings[0] == settings[1]
    assert "seed" not in str(settings[0]), settings[0]
