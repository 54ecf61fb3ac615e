"""RAPTOR and the dynamic tree behind the Tree interface, with a fake chat LM and a bag-of-words encoder."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.none import NoDiversifier
from harness.pack.base import PackingRequest
from harness.pack.packed import TopKTruncatePacker
from harness.pack.snippets import make_snippets, render_context
from harness.tree.base import TreeServices
from harness.tree.dtcrs import DynamicTree
from harness.tree.raptor import RaptorTree
from harness.tree.recursive import traverse
from tests.helpers.tree_fakes import (
    BagOfWordsEncoder,
    FakeChatLM,
    WordTokens,
    make_long_pool,
    topic_documents,
)

SETTINGS = {"reducer": "pca", "reduction_dim": 2, "max_cluster_tokens": None}


def services(encoder=None, seed=0):
    return TreeServices(encoder=encoder or BagOfWordsEncoder(), tokens=WordTokens(), seed=seed)


def leaves_under(tree_layers, layer, index):
    """Leaf indices under a node, by walking children down (the brute-force reference)."""
    nodes = {index}
    for depth in range(layer, 0, -1):
        nodes = {c for i in nodes for c in tree_layers[depth][i].children}
    return nodes


def test_raptor_pool_holds_leaves_and_summaries_ranked_by_cosine():
    pool = make_long_pool()
    lm = FakeChatLM()
    tree = RaptorTree(lm=lm, **SETTINGS)
    out, info = tree.expand(pool, services())
    assert info["nodes_per_layer"][0] == 18 and len(info["nodes_per_layer"]) >= 2
    assert len(out.candidates) == len(pool.candidates) + info["summary_nodes"]
    # Every leaf survives, and summaries are tree:<layer>:<i> with kind summary.
    assert {c.cand_id for c in out.candidates if c.kind == "document"} == {c.cand_id for c in pool.candidates}
    summaries = [c for c in out.candidates if c.kind == "summary"]
    assert summaries and all(c.cand_id.startswith("tree:") for c in summaries)
    # Sorted by score, descending; embeddings aligned with candidates (score = cosine to the question).
    scores = np.array([c.score for c in out.candidates])
    assert np.all(np.diff(scores) <= 1e-7)
    np.testing.assert_allclose(out.embeddings @ out.query_embedding, scores, atol=1e-5)
    assert out.embeddings.shape == (len(out.candidates), pool.embeddings.shape[1])


def test_summary_sources_are_the_union_of_leaves_beneath():
    pool = make_long_pool()
    tree = RaptorTree(lm=FakeChatLM(), **SETTINGS)
    built, _, _, _ = tree.build(pool, services())
    docs = pool.example.documents
    for layer in range(1, len(built.layers)):
        for node in built.layers[layer]:
            expected = {docs[i].doc_id for i in leaves_under(built.layers, layer, node.index)}
            assert set(node.source_ids) == expected
    # Topic clustering: every first-layer cluster is about one topic (blocks of 6 chunks).
    for node in built.layers[1]:
        assert len({c // 6 for c in node.children}) == 1


def test_tree_is_cached_per_document_in_memory_and_on_disk(tmp_path):
    lm = FakeChatLM()
    tree = RaptorTree(lm=lm, cache_dir=tmp_path, **SETTINGS)
    svc = services()
    first, first_info = tree.expand(make_long_pool(qid="q1"), svc)
    calls = lm.calls
    second, second_info = tree.expand(make_long_pool(question="Why do cats purr?", qid="q2"), svc)
    assert lm.calls == calls and first_info["cached"] is False and second_info["cached"] is True
    assert first_info["cache_key"] == second_info["cache_key"]
    # A new process (fresh tree object, fresh LM) reads the tree from the TextStore.
    other_lm = FakeChatLM()
    reread, _ = RaptorTree(lm=other_lm, cache_dir=tmp_path, **SETTINGS).expand(make_long_pool(qid="q1"), svc)
    assert other_lm.calls == 0
    assert [c.cand_id for c in reread.candidates] == [c.cand_id for c in first.candidates]
    assert [c.text for c in reread.candidates] == [c.text for c in first.candidates]
    assert {c.text for c in second.candidates} == {c.text for c in first.candidates}


def test_raptor_reports_the_lm_work_of_its_build_and_a_cached_tree_reports_the_stored_work(tmp_path):
    lm = FakeChatLM()
    tree = RaptorTree(lm=lm, cache_dir=tmp_path, **SETTINGS)
    svc = services()
    _, first = tree.expand(make_long_pool(qid="q1"), svc)
    # One call per summary (the fake LM returns no empty ones); tokens: the words of every prompt sent.
    assert first["summary_nodes"] > 0 and first["empty_summaries"] == 0
    assert first["lm_calls"] == first["summary_nodes"] == len(lm.prompts)
    assert first["lm_prompt_tokens"] == sum(len(p.split()) for p in lm.prompts) > 0
    assert first["cached"] is False

    # Another question on the document: the tree comes from the cache with its original build's facts.
    _, second = tree.expand(make_long_pool(question="Why do cats purr?", qid="q2"), svc)
    assert second["cached"] is True and lm.calls == first["lm_calls"]
    for key in ("lm_calls", "lm_prompt_tokens", "build_seconds", "summary_nodes"):
        assert second[key] == first[key]

    # A new process (fresh tree and LM) reads the same stored counts from disk and calls nothing.
    other_lm = FakeChatLM()
    _, reread = RaptorTree(lm=other_lm, cache_dir=tmp_path, **SETTINGS).expand(make_long_pool(qid="q1"), svc)
    assert reread["cached"] is True and other_lm.calls == 0
    assert (reread["lm_calls"], reread["lm_prompt_tokens"], reread["build_seconds"]) == (
        first["lm_calls"],
        first["lm_prompt_tokens"],
        first["build_seconds"],
    )


def test_an_lm_without_counters_reports_no_lm_work():
    class PlainLM:
        def chat(self, prompts, max_new_tokens):
            return [f"summary {p.split()[-1]}" for p in prompts]

    _, info = RaptorTree(lm=PlainLM(), **SETTINGS).expand(make_long_pool(), services())
    assert info["summary_nodes"] > 0 and info["lm_calls"] is None and info["lm_prompt_tokens"] is None


def test_fixed_seed_gives_identical_trees():
    def build(seed):
        tree = RaptorTree(lm=FakeChatLM(), reducer="pca", reduction_dim=3, max_cluster_tokens=None)
        built, _, _, _ = tree.build(make_long_pool(documents=topic_documents(per_topic=8, seed=5)), services(seed=seed))
        return [[(n.text, n.children) for n in layer] for layer in built.layers]

    assert build(7) == build(7)


@pytest.mark.parametrize("n_chunks", [1, 2])
def test_tiny_documents_build_without_error(n_chunks):
    docs = topic_documents(per_topic=1)[:n_chunks]
    pool = make_long_pool(documents=docs)
    # RAPTOR's stopping rule: a layer of at most reduction_dim + 1 nodes is not clustered.
    default, _ = RaptorTree(lm=FakeChatLM()).expand(pool, services())
    assert [c.cand_id for c in default.candidates] == [c.cand_id for c in pool.candidates]
    # With the rule off, one or two chunks still build: a single root summary over them.
    tree = RaptorTree(lm=FakeChatLM(), min_nodes=0, **SETTINGS)
    out, info = tree.expand(pool, services())
    assert info["nodes_per_layer"] == [n_chunks, 1]
    root = next(c for c in out.candidates if c.kind == "summary")
    assert set(root.source_ids) == {d.doc_id for d in docs}


@pytest.mark.parametrize("n_chunks", [3, 4, 5, 7])
def test_tiny_clusters_build_without_error(n_chunks):
    docs = topic_documents(per_topic=3, seed=1)[:n_chunks]
    tree = RaptorTree(lm=FakeChatLM(), min_nodes=0, reducer="pca", reduction_dim=10, max_cluster_tokens=20)
    out, info = tree.expand(make_long_pool(documents=docs), services())
    layers = info["nodes_per_layer"]
    assert layers[0] == n_chunks and len(layers) >= 2
    assert len(out.candidates) == sum(layers)


def test_collapsed_tree_retrieval_respects_the_token_cap():
    pool = make_long_pool()
    expanded, _ = RaptorTree(lm=FakeChatLM(), **SETTINGS).expand(pool, services())
    indices, info = NoDiversifier().select(expanded)
    assert indices.tolist() == list(range(len(expanded.candidates))) and info == {}
    selected = expanded.subset(indices)
    tokens = WordTokens()
    snippets = make_snippets(selected, tokens, unit="candidate")
    assert len(snippets) == len(selected.candidates)  # whole nodes, one snippet each
    encoder = BagOfWordsEncoder()
    for budget in (10, 45, 100, 250):
        request = PackingRequest(
            question=pool.example.question,
            pool=selected,
            snippets=snippets,
            snippet_embeddings=encoder.encode_documents([s.text for s in snippets]),
            query_embedding=pool.query_embedding,
            budget=budget,
            tokens=tokens,
        )
        context = TopKTruncatePacker(truncate_last=False).pack(request)
        # The packer charges one token per separator between snippets.
        used = sum(s.tokens for s in context.snippets) + max(0, len(context.snippets) - 1)
        assert used <= budget
        assert tokens.count(render_context(context.snippets)) <= budget
        # Collapsed retrieval takes nodes in rank order until the next one would not fit.
        ranks = [s.rank for s in context.snippets]
        assert ranks == list(range(len(ranks)))
        if len(ranks) < len(snippets):
            assert used + 1 + snippets[len(ranks)].tokens > budget


def test_traversal_matches_a_hand_worked_tree():
    q = np.array([1.0, 0.0], dtype=np.float32)
    emb = [
        np.array([[1, 0], [0.9, 0.1], [0, 1], [0.5, 0.5]], dtype=np.float32),  # leaves
        np.array([[0.2, 0.8], [0.8, 0.2]], dtype=np.float32),  # layer 1: node 0 -> leaves 2,3; node 1 -> 0,1
        np.array([[0.7, 0.3]], dtype=np.float32),  # root -> both
    ]
    children = [[(), (), (), ()], [(2, 3), (0, 1)], [(0, 1)]]
    assert traverse(emb, children, q, top_k=1) == [(2, 0), (1, 1), (0, 0)]
    assert traverse(emb, children, q, top_k=2) == [(2, 0), (1, 1), (1, 0), (0, 0), (0, 1)]


def test_traversal_pool_keeps_only_nodes_on_the_chosen_paths():
    pool = make_long_pool()
    tree = RaptorTree(lm=FakeChatLM(), retrieval="traversal", traversal_top_k=2, **SETTINGS)
    out, _ = tree.expand(pool, services())
    built, _, _, _ = tree.build(pool, services())
    chosen = {c.cand_id for c in out.candidates}
    top = len(built.layers) - 1
    assert len([c for c in chosen if c.startswith(f"tree:{top}:")]) == min(2, len(built.layers[top]))
    # Every chosen leaf sits under a chosen layer-1 node.
    layer1 = [int(c.split(":")[2]) for c in chosen if c.startswith("tree:1:")]
    allowed = {pool.example.documents[i].doc_id for n in layer1 for i in built.layers[1][n].children}
    leaves = {c for c in chosen if not c.startswith("tree:")}
    assert leaves and leaves <= allowed and len(leaves) <= 2


def test_tree_accepts_an_lm_config():
    tree = RaptorTree(lm={"_target_": "tests.helpers.tree_fakes.FakeChatLM", "question_class": "yes_no"})
    lm = tree.language_model()
    assert isinstance(lm, FakeChatLM) and lm.question_class == "yes_no"
    with pytest.raises(ValueError, match="no language model"):
        RaptorTree().language_model()


# --------------------------------------------------------------------------------------------- DTCRS


def test_dynamic_tree_seeds_the_first_layer_with_subquestion_means():
    lm = FakeChatLM()
    encoder = BagOfWordsEncoder()
    tree = DynamicTree(lm=lm, **SETTINGS)
    pool = make_long_pool(encoder=encoder)
    out, info = tree.expand(pool, services(encoder))
    assert info["question_class"] == "abstractive" and info["class_source"] == "lm" and info["built"] is True
    assert info["toc"] == lm.toc
    assert info["sub_questions"] == lm.subquestions and info["sub_question_source"] == "lm"
    assert not hasattr(tree, "build_info")  # per-question facts travel with the pool, not on the tree
    fit = tree.last_fit
    assert fit.mixture.n_components == 3
    expected = fit.reducer.transform(encoder.encode_queries(lm.subquestions))
    np.testing.assert_allclose(fit.mixture.means_init, expected, atol=1e-6)
    # One first-layer node per sub-question, each about that sub-question's topic.
    assert info["nodes_per_layer"][:2] == [18, 3]
    built_children = [set(n.children) for n in _first_layer(tree, info)]
    for component, topic_block in zip(fit.components, ([0, 6], [6, 12], [12, 18]), strict=False):
        assert set(range(*topic_block)) <= built_children[fit.components.index(component)]
    assert info["build_seconds"] > 0 and info["timings"]["toc_seconds"] >= 0
    assert len(out.candidates) == 18 + info["summary_nodes"]
    # The table of contents reached the decomposition prompt.
    assert any(p.startswith("Table of contents of a document:\n1. Cats") for p in lm.prompts)


def _first_layer(tree, info):
    record = tree.cached(info["cache_key"])
    from harness.tree.summary_tree import SummaryTree

    return SummaryTree.from_json(record["tree"]).layers[1]


def test_dynamic_tree_leaves_non_abstractive_questions_alone():
    lm = FakeChatLM(question_class="extractive")
    tree = DynamicTree(lm=lm, **SETTINGS)
    pool = make_long_pool(question="What fuel does the rocket use?")
    out, info = tree.expand(pool, services())
    assert out is pool
    assert info["question_class"] == "extractive" and info["built"] is False and info["summary_nodes"] == 0
    assert info["toc"] == "" and info["sub_questions"] == []
    assert len(lm.prompts) == 1 and lm.prompts[0].startswith("Classify")


def test_unparseable_class_falls_back_to_rules_and_annotation_mode_reads_the_dataset():
    lm = FakeChatLM(question_class="I am not sure about this one")
    tree = DynamicTree(lm=lm, classify_by="generation", **SETTINGS)
    _, info = tree.expand(make_long_pool(question="How does a rocket engine produce thrust?"), services())
    assert info["question_class"] == "abstractive"
    assert info["class_source"] == "rules"
    annotation = DynamicTree(lm=FakeChatLM(), classifier="annotation", **SETTINGS)
    pool = make_long_pool(qtype="yes_no")
    out, info = annotation.expand(pool, services())
    assert out is pool and info["class_source"] == "annotation" and info["question_class"] == "yes_no"


def test_failed_decomposition_seeds_with_the_question_itself():
    lm = FakeChatLM(subquestions=[])
    tree = DynamicTree(lm=lm, **SETTINGS)
    _, info = tree.expand(make_long_pool(), services())
    assert info["sub_questions"] == ["How does a rocket engine produce thrust?"]
    assert info["sub_question_source"] == "fallback"
    assert info["nodes_per_layer"][1] == 1


def test_dynamic_tree_is_cached_per_question():
    lm = FakeChatLM()
    tree = DynamicTree(lm=lm, **SETTINGS)
    svc = services()
    _, first = tree.expand(make_long_pool(qid="q1"), svc)
    prompts = len(lm.prompts)
    _, again = tree.expand(make_long_pool(qid="q1"), svc)
    assert first["cached"] is False and again["cached"] is True
    # The cached tree reports the facts of its build: the same table of contents and sub-questions.
    assert (again["toc"], again["sub_questions"]) == (first["toc"], first["sub_questions"])
    assert len(lm.prompts) == prompts + 1  # the classification is asked again (the LM caches it)
    _, other = tree.expand(make_long_pool(question="Why do cats purr so much?", qid="q3"), svc)
    assert other["cached"] is False


def test_dynamic_tree_reports_the_lm_work_of_every_step():
    lm = FakeChatLM()
    tree = DynamicTree(lm=lm, **SETTINGS)
    svc = services()
    _, built = tree.expand(make_long_pool(qid="q1"), svc)
    # Classification, table of contents, decomposition, then one call per summary.
    assert built["built"] is True and built["lm_calls"] == 3 + built["summary_nodes"] == len(lm.prompts)
    assert built["lm_prompt_tokens"] == sum(len(p.split()) for p in lm.prompts)
    sent = len(lm.prompts)
    _, again = tree.expand(make_long_pool(qid="q1"), svc)
    assert again["cached"] is True and len(lm.prompts) == sent + 1  # the classification is asked again
    assert (again["lm_calls"], again["lm_prompt_tokens"]) == (built["lm_calls"], built["lm_prompt_tokens"])
    # No tree for an extractive question: the classification is the only LM work; with rules, none.
    extractive = FakeChatLM(question_class="extractive")
    _, skipped = DynamicTree(lm=extractive, **SETTINGS).expand(make_long_pool(), svc)
    assert skipped["built"] is False and skipped["lm_calls"] == 1 == extractive.calls
    assert skipped["lm_prompt_tokens"] == len(extractive.prompts[0].split())
    _, by_rules = DynamicTree(lm=FakeChatLM(), classifier="rules", **SETTINGS).expand(
        make_long_pool(question="Who launched the rocket?"), svc
    )
    assert by_rules["built"] is False and (by_rules["lm_calls"], by_rules["lm_prompt_tokens"]) == (0, 0)


def test_dynamic_tree_rejects_bad_settings():
    with pytest.raises(ValueError, match="tree_classes"):
        DynamicTree(lm=FakeChatLM(), tree_classes=["opinion"])
    with pytest.raises(ValueError, match="classifier"):
        DynamicTree(lm=FakeChatLM(), classifier="oracle")
    with pytest.raises(ValueError, match="retrieval"):
        RaptorTree(lm=FakeChatLM(), retrieval="beam")


def offline_smollm2(cache_dir):
    """The real offline SmolLM2 on one thread (the suite runs two workers on two cores)."""
    from harness.backends.offline_models import default_folder
    from harness.lm.local import LocalChatLM

    return LocalChatLM(
        pretrained=str(default_folder("smollm2")),
        offline_model="smollm2",
        cache_dir=cache_dir,
        torch_threads=1,
        batch_size=4,
    )


# One test a tree, so the two run side by side (together 61 s on an AVX2-only Zen 3).
@pytest.mark.slow
def test_the_static_tree_builds_with_the_real_offline_smollm2(tmp_path):
    pool = make_long_pool(documents=topic_documents(per_topic=3, words=20))
    raptor = RaptorTree(
        lm=offline_smollm2(tmp_path), min_nodes=0, reducer="pca", reduction_dim=2, summary_max_tokens=40
    )
    out, _ = raptor.expand(pool, services())
    summaries = [c for c in out.candidates if c.kind == "summary"]
    assert summaries and all(c.text.strip() for c in summaries)


@pytest.mark.slow
def test_the_dynamic_tree_builds_with_the_real_offline_smollm2(tmp_path):
    pool = make_long_pool(documents=topic_documents(per_topic=3, words=20))
    dynamic = DynamicTree(
        lm=offline_smollm2(tmp_path),
        classifier="rules",
        reducer="pca",
        reduction_dim=2,
        min_nodes=0,
        summary_max_tokens=40,
        toc_max_tokens=60,
        decompose_max_tokens=60,
    )
    _, info = dynamic.expand(pool, services())
    assert info["question_class"] == "abstractive" and info["toc"]
    assert 1 <= len(info["sub_questions"]) <= 4 and info["nodes_per_layer"][0] == 9


@pytest.mark.slow
def test_raptor_counts_the_work_of_the_llama_cpp_lm_and_stores_it_with_the_tree(tmp_path):
    from harness.backends.offline_models import DEFAULT_MODELS_DIR
    from harness.lm.llama_cpp import LlamaCppChatLM
    from harness.tree.summary_tree import SUMMARY_PROMPT

    def llama_lm():
        return LlamaCppChatLM(models_dir=DEFAULT_MODELS_DIR, llama_cpp={"n_ctx": 2048, "n_threads": 1})

    lm = llama_lm()
    pool = make_long_pool(documents=topic_documents(per_topic=3, words=20))
    settings = {"min_nodes": 0, "reducer": "pca", "reduction_dim": 2, "summary_max_tokens": 24, "cache_dir": tmp_path}
    built, _, _, _ = RaptorTree(lm=lm, **settings).build(pool, services())
    _, info = RaptorTree(lm=lm, **settings).expand(pool, services())  # same process, new tree: from disk
    assert built.empty_summaries == 0 and info["summary_nodes"] == len(built.summary_nodes()) > 0
    assert info["lm_calls"] == info["summary_nodes"] == lm.calls and info["cached"] is True
    # The prompt of each summary, rebuilt from its children, in the tokens the model read.
    prompts = [
        SUMMARY_PROMPT.format(
            context="\n\n".join(" ".join(built.layers[n.layer - 1][c].text.splitlines()) for c in n.children)
        )
        for n in built.summary_nodes()
    ]
    assert info["lm_prompt_tokens"] == lm.prompt_tokens == sum(len(ids) for ids in lm.encode(prompts, 24))
    # A new process: the cached tree reports the stored counts and no LM is called.
    fresh = llama_lm()
    _, reread = RaptorTree(lm=fresh, **settings).expand(pool, services())
    assert reread["cached"] is True and fresh.calls == 0 and fresh._generator is None
    assert (reread["lm_calls"], reread["lm_prompt_tokens"]) == (info["lm_calls"], info["lm_prompt_tokens"])
