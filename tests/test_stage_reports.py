"""Every stage's report reaches the row: ``tree.*``, ``diversify.*`` and ``pack.*`` columns and
``trimmed_snippets``, through one contract (``harness.core.stage``), from real pipeline runs."""

from __future__ import annotations

import enum
import json
import math

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from harness.core.stage import scalar, stage_columns
from harness.core.types import Context, Snippet
from harness.pack.budget import packed_cost
from harness.run.job import run
from harness.run.packing import fit_to_budget
from harness.runlog.journal import normalise_row
from harness.text.tokens import TokenCounter
from tests.conftest import REPO, compose_cfg
from tests.helpers.tiny_models import tiny_llmlingua2_classifier
from tests.helpers.tree_fakes import FakeChatLM

DEMO = REPO / "harness" / "data" / "demo" / "demo_multihop.json"
BUDGET = 96


# ---- the scalar convention -------------------------------------------------------------------------


def test_stage_columns_are_namespaced_scalars():
    info = {
        "flag": np.bool_(True),
        "count": np.int64(3),
        "value": np.float32(0.5),
        "layers": [6, 2, np.int64(1)],
        "timings": {"toc": 0.25},
        "order": np.array([2, 0]),
        "label": "abstractive",
        "nothing": None,
    }
    columns = stage_columns("tree", info)
    assert columns == {
        "tree.flag": True,
        "tree.count": 3,
        "tree.value": 0.5,
        "tree.layers": "[6, 2, 1]",
        "tree.timings": '{"toc": 0.25}',
        "tree.order": "[2, 0]",
        "tree.label": "abstractive",
        "tree.nothing": None,
    }
    assert type(columns["tree.flag"]) is bool and type(columns["tree.count"]) is int
    assert stage_columns("pack", {}) == {}


def test_a_value_that_is_not_a_scalar_or_container_names_its_stage_and_key():
    with pytest.raises(TypeError, match=r"stage 'pack', key 'fit'.*object"):
        stage_columns("pack", {"fit": object()})
    with pytest.raises(TypeError, match=r"stage 'diversify', key 'bad'"):
        stage_columns("diversify", {"bad": [object()]})
    with pytest.raises(ValueError, match="unknown stage 'read'"):
        stage_columns("read", {})
    with pytest.raises(TypeError, match="expected a dict"):
        stage_columns("tree", [("a", 1)])


def test_the_journal_keeps_json_strings_and_flattens_containers():
    row = normalise_row(
        {
            "question_id": "q",
            "tree.sub_questions": '["a?", "b?"]',
            "pack.scores": [0.5, float("nan")],
            "pack.ratio": float("nan"),
        }
    )
    assert row["tree.sub_questions"] == '["a?", "b?"]'
    assert row["pack.scores"] == "[0.5, NaN]" and json.loads(row["pack.scores"])[0] == 0.5
    assert math.isnan(row["pack.ratio"])
    with pytest.raises(TypeError, match="row column 'pack.model'"):
        normalise_row({"question_id": "q", "pack.model": object()})
    assert scalar((1, 2)) == "[1, 2]"


def test_a_normalised_row_is_what_its_json_round_trip_gives_back():
    class Level(enum.IntEnum):
        HIGH = 3

    class Label(str):
        pass

    row = {
        "none": None,
        "flag": True,
        "np_flag": np.bool_(False),
        "count": 3,
        "np_count": np.int64(-4),
        "enum": Level.HIGH,
        "ratio": 2.5,
        "np_ratio": np.float32(0.1),
        "inf": float("inf"),
        "minus_inf": -math.inf,
        "nan": float("nan"),
        "np_nan": np.float64("nan"),
        "text": "café",
        "label": Label("a label"),
        "surrogate": "\ud800",
        "list": [1, float("nan")],
        "tuple": (1, "b"),
        "dict": {"a": np.int32(1)},
        "array": np.arange(3),
    }
    flat = {k: scalar(v) for k, v in row.items()}
    by_round_trip = json.loads(json.dumps(flat, default=lambda v: v.item(), allow_nan=True))
    normalised = normalise_row(row)
    assert list(normalised) == list(by_round_trip)
    for column, expected in by_round_trip.items():
        got = normalised[column]
        assert type(got) is type(expected), column
        assert got == expected or (math.isnan(got) and math.isnan(expected)), column


# ---- fit_to_budget -----------------------------------------------------------------------------------


def prefix_space_tokens() -> TokenCounter:
    """A SentencePiece-style BPE tokenizer (Metaspace, prefix space on the first word only, as Llama's).

    Each word alone is one token (``▁bread``); after a newline it has no ``▁`` and falls apart into
    characters, so the rendered context costs more than its snippets plus separators.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ("bread", "jam", "tea")
    vocab: dict[str, int] = {}
    merges: list[tuple[str, str]] = []
    for symbol in ["\n", "▁", *sorted({c for w in words for c in w})]:
        vocab.setdefault(symbol, len(vocab))
    for word in words:
        piece = "▁"
        for char in word:
            merges.append((piece, char))
            piece += char
            vocab.setdefault(piece, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    return TokenCounter(PreTrainedTokenizerFast(tokenizer_object=tokenizer), name="prefix-space-bpe")


def test_fit_to_budget_counts_the_snippets_it_drops_when_tokens_change_across_a_boundary():
    tokens = prefix_space_tokens()
    # By hand: each word alone is 1 token; after "\n": jam -> j a m (3), tea -> t e a (3), bread -> 5.
    assert [tokens.count(w) for w in ("bread", "jam", "tea")] == [1, 1, 1]
    assert tokens.count("bread\njam") == 1 + 1 + 3
    assert tokens.count("bread\njam\ntea") == 1 + 1 + 3 + 1 + 3
    assert tokens.count("bread\njam\ntea\nbread") == 1 + 1 + 3 + 1 + 3 + 1 + 5
    snippets = [
        Snippet(text=w, cand_id=f"c{i}", source_ids=(f"d{i}",), tokens=1, rank=i)
        for i, w in enumerate(("bread", "jam", "tea", "bread"))
    ]
    budget = packed_cost([s.tokens for s in snippets])  # 4 + 3 separators = 7: every packer accepts it
    assert budget == 7

    context, text, count, trimmed = fit_to_budget(Context(list(snippets), budget, "test"), tokens, budget)
    # 15 > 7: drop the last "bread"; 9 > 7: drop "tea"; 5 <= 7: keep "bread\njam".
    assert trimmed == 2 and len(snippets) - len(context.snippets) == trimmed
    assert text == "bread\njam" and count == 5 == context.tokens

    for limit, expected in ((15, 0), (9, 1), (1, 3), (0, 4)):
        kept, _, _, dropped = fit_to_budget(Context(list(snippets), limit, "test"), tokens, limit)
        assert (dropped, len(kept.snippets)) == (expected, 4 - expected)
    unbounded = fit_to_budget(Context(list(snippets), None, "none"), tokens, None)
    assert unbounded[3] == 0 and unbounded[2] == 15


# ---- real pipeline runs on the demo dataset ------------------------------------------------------------


def compose_unread(overrides: list[str]):
    return compose_cfg(["logger=none", "read=false", *overrides])


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache for the module: the demo pools and embeddings are computed once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def tiny_llmlingua2_model(tmp_path_factory) -> str:
    """A random one-layer BERT token classifier (plumbing only: its choices are noise, not LLMLingua-2's),
    in a folder whose name carries a backbone llmlingua accepts."""
    return tiny_llmlingua2_classifier(tmp_path_factory.mktemp("models"), DEMO.read_text(encoding="utf-8"))


FOCUSED_KEYS = {"query_terms", "covered_terms", "skipped_snippets", "packed_cost"}
SUBMOD_KEYS = {
    "objective",
    "term_rel",
    "term_qry",
    "term_cov",
    "term_div",
    "greedy_objective",
    "singleton_objective",
    "singleton_fallback",
    "selection_order",
    "packed_cost",
}
CLAIM_KEYS = {"claims", "merged_snippets", "claim_edges", "question_entities"}
PACK_KEYS = {
    "none": set(),
    "packed": {"misfit", "packed_cost", "fragment_tokens"},
    "focused": FOCUSED_KEYS,
    "mmr": {"mmr_scores", "packed_cost"},
    "submod": SUBMOD_KEYS,
    "ace_focused": FOCUSED_KEYS | CLAIM_KEYS,
    "ace_submod": SUBMOD_KEYS | CLAIM_KEYS,
    "llmlingua": {
        "method",
        "model",
        "numerics",
        "original_tokens",
        "target_tokens",
        "compressed",
        "truncated",
        "compressed_tokens",
        "compression_ratio",
    },
}


def check_packer_facts(packer: str, row: pd.Series) -> None:
    """What each packer's facts must say about its own context, worked out from the other columns."""
    packed = row["n_snippets"] + row["trimmed_snippets"]  # snippets the packer placed
    if packer != "none" and packer != "llmlingua":
        assert row["pack.packed_cost"] <= BUDGET
        assert row["context_tokens"] <= BUDGET
    if packer == "mmr":
        assert len(json.loads(row["pack.mmr_scores"])) == packed
    if packer in ("submod", "ace_submod"):
        assert len(json.loads(row["pack.selection_order"])) == packed
        greedy, singleton = row["pack.greedy_objective"], row["pack.singleton_objective"]
        assert row["pack.objective"] == pytest.approx(max(greedy, singleton), abs=1e-12)
        assert row["pack.singleton_fallback"] == (singleton > greedy + 1e-12)
        terms = sum(row[f"pack.term_{t}"] for t in ("rel", "qry", "cov", "div"))
        assert terms == pytest.approx(row["pack.objective"], abs=1e-9)
    if packer in ("focused", "ace_focused"):
        assert set(json.loads(row["pack.covered_terms"])) <= set(json.loads(row["pack.query_terms"]))
        assert row["pack.skipped_snippets"] >= 0
    if packer.startswith("ace_"):
        assert row["pack.claims"] + row["pack.merged_snippets"] == row["n_snippets_available"]
    if packer == "packed":
        assert row["pack.misfit"] == "truncate_last" and row["pack.fragment_tokens"] >= 0
    if packer == "llmlingua":
        assert row["pack.method"] == "llmlingua-2" and row["pack.numerics"] == "float32|cpu"
        assert row["pack.original_tokens"] > BUDGET and bool(row["pack.compressed"])  # the demo never fits 96
        assert row["pack.compressed_tokens"] == row["context_tokens"] <= BUDGET
        assert row["pack.compression_ratio"] == pytest.approx(
            row["pack.original_tokens"] / row["pack.compressed_tokens"]
        )
        assert row["pack.compression_ratio"] > 1.0


@pytest.mark.slow  # a real encoder and the reader's tokenizer, one pipeline run per packer
@pytest.mark.parametrize("packer", list(PACK_KEYS))
def test_each_packers_facts_arrive_as_pack_columns(packer, shared_cache, tmp_path, tiny_llmlingua2_model):
    overrides = [f"paths.cache_dir={shared_cache}", f"packer={packer}", f"budget={BUDGET}", "diversifier=rule"]
    if packer == "llmlingua":
        # The default model_config (float32) must work for LLMLingua-2: llmlingua 0.2.2 turns its token
        # probabilities into NumPy, which has no bfloat16.
        overrides += ["packer.use_llmlingua2=true", f"packer.model_name={tiny_llmlingua2_model}"]
    returned = run(compose_unread(overrides), tmp_path)
    rows = pd.read_parquet(tmp_path / "rows.parquet")
    assert len(rows) == 12
    pd.testing.assert_frame_equal(rows, returned, check_dtype=False)

    pack_columns = {c for c in rows.columns if c.startswith("pack.")}
    assert pack_columns == {f"pack.{key}" for key in PACK_KEYS[packer]}
    assert rows[sorted(pack_columns)].notna().all().all()  # every question reports every key
    assert (rows["trimmed_snippets"] >= 0).all()
    for _, row in rows.iterrows():
        check_packer_facts(packer, row)

    # The rule's facts come through the diversifier's own report: tau = min(h, k), fired iff Vendi < tau.
    assert (rows["diversify.rule_tau"] == np.minimum(rows["hops"], 5)).all()
    assert (rows["diversify.rule_triggered"] == (rows["diversify.rule_vendi"] < rows["diversify.rule_tau"])).all()
    assert not any(c.startswith("tree.") for c in rows.columns)  # tree=none reports nothing

    # A run that does not read builds its rows in one step and keeps no row journal (what a reading run's
    # journal gives back is a row's JSON round trip: test_a_normalised_row_is_what_its_json_round_trip_gives_back).
    assert not (tmp_path / "rows.journal.jsonl").exists() and not (tmp_path / "rows.journal.key").exists()


@pytest.mark.slow  # a real encoder; the tree's LM is the fake chat LM
@pytest.mark.parametrize("question_class", ["abstractive", "extractive"])
def test_dtcrs_class_toc_and_sub_questions_reach_the_row(question_class, shared_cache, tmp_path):
    cfg = compose_unread(
        [
            f"paths.cache_dir={shared_cache}",
            "tree=dtcrs",
            "tree.reducer=pca",
            "tree.reduction_dim=2",
            "tree.min_nodes=0",
            "packer=focused",
            f"budget={BUDGET}",
        ]
    )
    cfg.tree.lm = OmegaConf.create(
        {"_target_": "tests.helpers.tree_fakes.FakeChatLM", "question_class": question_class}
    )
    rows = run(cfg, tmp_path)
    fake = FakeChatLM()
    assert len(rows) == 12
    assert (rows["tree.question_class"] == question_class).all() and (rows["tree.class_source"] == "lm").all()
    assert not rows.filter(like="diversify.").columns.size  # knn reports nothing
    for _, row in rows.iterrows():
        layers = json.loads(row["tree.nodes_per_layer"])
        assert layers[0] == 6  # the demo's six paragraphs per question
        assert row["tree.summary_nodes"] == sum(layers[1:])
        assert row["n_candidates"] == 6 + row["tree.summary_nodes"]
        if question_class == "abstractive":
            assert row["tree.built"] and not row["tree.cached"]
            assert row["tree.toc"] == fake.toc
            assert json.loads(row["tree.sub_questions"]) == fake.subquestions
            assert row["tree.sub_question_source"] == "lm"
            assert row["tree.summary_nodes"] > 0 and 1 <= row["tree.first_layer_components"] <= 3
        else:  # no tree, and the row says why: the class is not one the tree is built for
            assert not row["tree.built"]
            assert row["tree.toc"] == "" and json.loads(row["tree.sub_questions"]) == []
            assert row["tree.summary_nodes"] == 0
