"""Every config option composes, and every component config instantiates (no weights are loaded)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from tests.conftest import CONF, REPO, compose_cfg

GROUPS = [
    "dataset",
    "retriever",
    "reranker",
    "perturb",
    "tree",
    "diversifier",
    "packer",
    "reader",
    "prompt",
    "snippets",
    "logger",
]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes_and_instantiates(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    node = cfg[group]
    if group in ("dataset", "snippets") or not node:
        return  # datasets read files at instantiation; snippets is plain settings; empty = disabled
    if group == "retriever":
        settings = {k: v for k, v in node.items() if k != "encoder"}
        obj = instantiate(settings, encoder=instantiate(node.encoder))
    else:
        obj = instantiate(node)
    assert obj is not None
    if hasattr(obj, "name"):
        assert obj.name


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = compose_cfg([f"experiment={experiment}"])
    assert cfg.budget > 0


def test_top_level_keys_make_a_sweep():
    cfg = compose_cfg(["packer=packed", "budget=96", "seed=13"])
    assert cfg.budget == 96 and cfg.seed == 13 and cfg.packer.name == "packed"


def sweep_names() -> list[str]:
    return sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("sweep", sweep_names())
def test_every_sweep_composes_with_each_swept_value(sweep):
    base = compose_cfg([f"+sweeps={sweep}"], return_hydra_config=True)
    params = dict(base.hydra.sweeper.params)
    assert params, f"sweeps/{sweep}.yaml sweeps nothing"
    for key, values in params.items():
        for value in str(values).split(","):
            cfg = compose_cfg([f"+sweeps={sweep}", f"{key}={value}"])
            group = key.split(".")[0].lstrip("+")
            if group in ("packer", "diversifier", "tree", "perturb") and cfg[group]:
                assert instantiate(cfg[group]) is not None


def test_the_reranker_is_its_own_group_and_a_valid_top_level_key():
    from harness.retrieve.rerank import CrossEncoderReranker
    from harness.run.config_check import problems

    plain = compose_cfg([])
    assert not plain.reranker and "reranker" not in plain.retriever and problems(plain) == []
    cfg = compose_cfg(["retriever=bge_small_320", "reranker=bge_v2_m3", "reranker.max_length=256"])
    assert cfg.retriever.encoder.model == "BAAI/bge-small-en-v1.5" and "reranker" not in cfg.retriever
    reranker = instantiate(cfg.reranker)  # the cross-encoder loads lazily
    assert isinstance(reranker, CrossEncoderReranker)
    assert (reranker.model_name, reranker.max_length) == ("BAAI/bge-reranker-v2-m3", 256)
    assert problems(cfg) == []
    assert not compose_cfg(["reranker=bge_v2_m3", "reranker=none"]).reranker


def test_experiment_values_override_top_level_defaults():
    cfg = compose_cfg(["experiment=trees_qasper"])
    assert cfg.budget == 512 and cfg.k == 10 and cfg.snippets.unit == "candidate"


@pytest.mark.parametrize("option", options("lm"))
def test_every_lm_option_composes_as_a_trees_lm(option):
    cfg = compose_cfg(["tree=raptor", f"lm@tree.lm={option}"])
    assert cfg.tree.lm.name
    if cfg.tree.lm._target_.endswith("LlamaCppChatLM"):  # builds without starting llama.cpp
        lm = instantiate(cfg.tree.lm)
        assert lm.backend == "llama_cpp" and lm._generator is None
        # No LM config pins a thread count: null takes this job's share of the CPUs (harness.core.threads).
        assert lm.settings.n_threads is None and "|quant=Q4" in lm.model_id


@pytest.mark.parametrize(
    "variant, tree, classifier",
    [("raptor", "raptor", None), ("dtcrs_lm", "dtcrs", "lm"), ("dtcrs_annotation", "dtcrs", "annotation")],
)
def test_the_trees_replication_sweep_gives_every_tree_the_gguf_summariser(variant, tree, classifier):
    # A variant is listed before the study, as the study's sweeper lists it.
    cfg = compose_cfg([f"+sweeps/replication_trees={variant}", "+sweeps=replication_trees", "dataset=quality"])
    assert cfg.tree.name == tree and cfg.dataset.name == "quality" and cfg.dataset.chunk_tokens == 100
    assert cfg.tree.get("classifier") == classifier
    # every question of the file, each read (the answer verdicts of seed 002)
    assert (cfg.budget, cfg.k, cfg.read, cfg.snippets.unit) == (512, 10, True, "candidate")
    assert cfg.dataset.sample_size is None
    assert not cfg.logger  # logger=none: an empty group
    # each variant keeps its own LM responses, so none reuses another's summaries
    assert cfg.tree.lm.cache_dir.endswith(f"tree_lm/{variant}")
    lm = instantiate(cfg.tree.lm)
    assert type(lm).__name__ == "LlamaCppChatLM" and lm.settings.n_ctx == 8192
    assert lm.model_id.startswith("offline:smollm2|gguf=SmolLM2-135M-Instruct.Q4_1.gguf:")


def test_the_trees_study_reads_a_dense_baseline_and_classifies_without_reading():
    """The answer tables' baseline: no tree over the same chunks, budget and packing; the classification-only
    runs read nothing (their rows score the classifier alone)."""
    dense = compose_cfg(["+sweeps/replication_trees=dense", "+sweeps=replication_trees"])
    assert dense.tree.name == "none" and dense.read and dense.dataset.sample_size is None
    assert (dense.budget, dense.k, dense.dataset.chunk_tokens, dense.packer.name) == (512, 10, 100, "packed")
    assert instantiate(dense.tree).name == "none"  # the study's tree.cache_dir is accepted by the no-tree stage
    classify = compose_cfg(["+sweeps/replication_trees=classify", "+sweeps=replication_trees"])
    assert classify.tree.name == "dtcrs_classify" and classify.read is False and not classify.tree.tree_classes
