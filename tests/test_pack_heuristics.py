"""Query-focused, MMR and claim-graph packers: hand-worked cases, loop references, budgets, configs."""

from __future__ import annotations

import inspect
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.core.types import Example, Pool, Snippet
from harness.pack.ace import AcePacker
from harness.pack.base import PackingRequest
from harness.pack.budget import fits
from harness.pack.claim_graph import (
    build_claim_graph,
    claim_relevance,
    extract_entities,
    normalise_claim,
)
from harness.pack.focused import QueryFocusedPacker
from harness.pack.lexical import content_terms, lexical_relevance, light_stem
from harness.pack.mmr import MMRPacker
from harness.pack.submod import SubmodularPacker
from harness.text.tokens import WordCounter

CONF = Path(__file__).resolve().parents[1] / "conf" / "packer"


def make_request(question, items, embeddings, budget, query=None, tokens=None) -> PackingRequest:
    """``items``: (text, cand_id, rank, position) tuples; cost = tokens.count(text)."""
    tokens = tokens or WordCounter()
    embeddings = np.asarray(embeddings, dtype=np.float32)
    snippets = [
        Snippet(text=t, cand_id=c, source_ids=(c,), tokens=tokens.count(t), rank=r, position=p) for t, c, r, p in items
    ]
    dim = embeddings.shape[1]
    if query is None:
        query = np.zeros(dim, dtype=np.float32)
        query[0] = 1.0
    query = np.asarray(query, dtype=np.float32)
    example = Example(question_id="q", question=question, answers=("a",), gold_doc_ids=(), documents=())
    pool = Pool(example=example, candidates=[], embeddings=embeddings[:0], query_embedding=query)
    return PackingRequest(question, pool, snippets, embeddings, query, budget, tokens)


VOCABULARY = [f"w{k}" for k in range(25)] + ["the", "of", "in", "Paris", "France", "1889", "Eiffel Tower"]


def random_request(seed: int, duplicates: bool = True) -> PackingRequest:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    n_docs = int(rng.integers(1, 7))
    question = " ".join(rng.choice(VOCABULARY, size=int(rng.integers(1, 7)))) + "?"
    items, positions = [], {}
    for _ in range(n):
        if duplicates and items and rng.random() < 0.15:
            text = items[int(rng.integers(0, len(items)))][0]  # a repeated sentence (copy / overlap)
        else:
            text = " ".join(rng.choice(VOCABULARY, size=int(rng.integers(1, 25))))
        doc = int(rng.integers(0, n_docs))
        positions[doc] = positions.get(doc, -1) + 1
        items.append((text, f"d{doc}", doc, positions[doc]))
    dim = 8
    embeddings = rng.standard_normal((n, dim))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    query = rng.standard_normal(dim)
    query /= np.linalg.norm(query)
    return make_request(question, items, embeddings, int(rng.integers(0, 100)), query=query)


ALL_SELECTORS = [
    QueryFocusedPacker("focused"),
    QueryFocusedPacker("focused", max_snippets=2),
    MMRPacker("mmr"),
    MMRPacker("mmr", relevance_weight=0.3, max_snippets=3),
    SubmodularPacker("submod"),
    AcePacker("ace_focused", QueryFocusedPacker("focused")),
    AcePacker("ace_submod", SubmodularPacker("submod", diversity_relevance="cosine")),
]
SELECTOR_IDS = ["focused", "focused-cap2", "mmr", "mmr-0.3-cap3", "submod", "ace_focused", "ace_submod-cosine"]


# ---- lexical relevance -------------------------------------------------------------------------
def test_content_terms_drop_stop_words_and_stem_plurals():
    assert content_terms("The films of Obama's studies in 1960") == {"film", "obama", "study", "1960"}
    assert content_terms("The films", stem=False) == {"films"}
    assert light_stem("glass") == "glass" and light_stem("status") == "status" and light_stem("bus") == "bus"


def test_lexical_relevance_is_the_share_of_query_terms():
    query = content_terms("Who founded the Acme company in Paris?")
    assert query == {"founded", "acme", "company", "paris"}
    assert lexical_relevance(query, content_terms("Acme is a company.")) == 0.5
    assert lexical_relevance(frozenset(), content_terms("anything")) == 0.0


# ---- query-focused ------------------------------------------------------------------------------
def test_focused_skips_what_does_not_fit_and_keeps_covering():
    question = "Who founded the Acme company in Paris?"
    items = [
        ("Acme is a company", "d0", 0, 0),  # covers acme, company; 4 tokens
        ("It was founded in Paris", "d1", 1, 0),  # covers founded, paris; 5 tokens
        ("Acme company founded Paris " + "x " * 16, "d2", 2, 0),  # covers all; 20 tokens
        ("Unrelated filler text", "d3", 3, 0),
    ]
    request = make_request(question, items, np.eye(4), budget=12)
    context = QueryFocusedPacker("focused").pack(request)
    # the all-covering snippet is the first choice but does not fit; the two halves do (4 + 1 + 5 = 10),
    # and the filler (3 tokens + separator) no longer fits in the 2 tokens left
    assert [s.cand_id for s in context.snippets] == ["d0", "d1"]
    assert context.extra["skipped_snippets"] == 2
    assert context.extra["covered_terms"] == ["acme", "company", "founded", "paris"]


def test_focused_never_divides_by_length():
    items = [("alpha", "d0", 0, 0), ("alpha beta " + "x " * 30, "d1", 1, 0)]
    request = make_request("alpha beta?", items, np.eye(2), budget=100)
    packer = QueryFocusedPacker("focused")
    chosen, _ = packer.select(request)
    assert chosen[0] == 1  # two new terms beat one, whatever the length


def test_focused_prefers_a_new_document_then_rank():
    items = [
        ("alpha one", "d0", 0, 0),
        ("beta", "d0", 0, 1),
        ("beta", "d1", 1, 0),
        ("gamma", "d2", 2, 0),
    ]
    request = make_request("alpha beta?", items, np.eye(4), budget=100)
    chosen, _ = QueryFocusedPacker("focused").select(request)
    # after "alpha one" (d0), both "beta"s add one term at relevance 1/2: the one from unused d1 wins
    assert chosen[:2] == [0, 2]


def focused_reference(request: PackingRequest, max_snippets=None) -> list[int]:
    query = content_terms(request.question)
    terms = [content_terms(s.text) for s in request.snippets]
    relevance = [lexical_relevance(query, t) for t in terms]
    available = list(range(len(request.snippets)))
    covered, used_docs, chosen = set(), set(), []
    limit = len(available) if max_snippets is None else max_snippets
    while len(chosen) < limit and available:
        best = max(
            available,
            key=lambda i: (
                len((terms[i] & query) - covered),
                relevance[i],
                request.snippets[i].cand_id not in used_docs,
                -request.snippets[i].rank,
                -request.snippets[i].position,
                -i,
            ),
        )
        available.remove(best)
        if not fits([request.snippets[j].tokens for j in chosen] + [request.snippets[best].tokens], request.budget):
            continue
        chosen.append(best)
        covered |= terms[best] & query
        used_docs.add(request.snippets[best].cand_id)
    return chosen


@pytest.mark.parametrize("seed", range(40))
def test_focused_matches_loop_reference(seed):
    request = random_request(seed)
    cap = [None, 1, 3][seed % 3]
    chosen, _ = QueryFocusedPacker("focused", max_snippets=cap).select(request)
    assert chosen == focused_reference(request, cap)


# ---- MMR ------------------------------------------------------------------------------------------
def unit(*v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_mmr_trade_off_hand_worked():
    # q = (1, 0); s0 ~ (0.995, 0.0998), s1 ~ (0.995, -0.0998) (near copy of s0), s2 ~ (0.7, -0.714)
    embeddings = np.stack([unit(0.995, 0.0998), unit(0.995, -0.0998), unit(0.7, -0.714)])
    items = [("a", "d0", 0, 0), ("b", "d1", 1, 0), ("c", "d2", 2, 0)]
    request = make_request("q?", items, embeddings, budget=3, query=[1.0, 0.0])  # room for two
    # lambda 0.5, step 2: s1 scores .5(.995) - .5(.980) = .0075, s2 scores .5(.700) - .5(.625) = .037
    assert [s.cand_id for s in MMRPacker("mmr", relevance_weight=0.5).pack(request).snippets] == ["d0", "d2"]
    # lambda 0.9: s1 .9(.995) - .1(.980) = .797, s2 .9(.700) - .1(.625) = .568
    assert [s.cand_id for s in MMRPacker("mmr", relevance_weight=0.9).pack(request).snippets] == ["d0", "d1"]


def mmr_reference(request: PackingRequest, relevance_weight: float, max_snippets=None) -> list[int]:
    e = np.asarray(request.snippet_embeddings, dtype=np.float64)
    q = np.asarray(request.query_embedding, dtype=np.float64)
    n = len(request.snippets)
    costs = [s.tokens for s in request.snippets]
    chosen: list[int] = []
    limit = n if max_snippets is None else max_snippets
    while len(chosen) < limit:
        best, best_score = None, -math.inf
        for i in range(n):
            if i in chosen or not fits([costs[j] for j in chosen] + [costs[i]], request.budget):
                continue
            redundancy = max(float(np.dot(e[i], e[j])) for j in chosen) if chosen else 0.0
            score = relevance_weight * float(np.dot(e[i], q)) - (1 - relevance_weight) * redundancy
            if score > best_score:
                best, best_score = i, score
        if best is None:
            break
        chosen.append(best)
    return chosen


@pytest.mark.parametrize("seed", range(40))
def test_mmr_matches_loop_reference(seed):
    request = random_request(seed)
    weight, cap = [0.7, 0.3, 1.0, 0.0][seed % 4], [None, 2][seed % 2]
    context = MMRPacker("mmr", relevance_weight=weight, max_snippets=cap).pack(request)
    expected = mmr_reference(request, weight, cap)
    assert sorted((s.rank, s.position, s.text) for s in context.snippets) == sorted(
        (request.snippets[i].rank, request.snippets[i].position, request.snippets[i].text) for i in expected
    )


def test_mmr_rejects_bad_lambda():
    with pytest.raises(ValueError, match="1.5"):
        MMRPacker("mmr", relevance_weight=1.5)


# ---- claim graph ----------------------------------------------------------------------------------
def test_entities_are_capitalised_spans_and_numbers():
    found = extract_entities("In 1889, the Eiffel Tower opened in Paris for the Exposition Universelle.")
    assert found == {"1889", "eiffel tower", "paris", "exposition universelle"}
    assert extract_entities("The University of Oxford has 12,500 students.") == {"university of oxford", "12500"}
    assert normalise_claim("  Obama was BORN in Hawaii! ") == "obama was born in hawaii"


def obama_request(budget=100) -> PackingRequest:
    items = [
        ("Barack Obama was born in Hawaii.", "d1", 0, 0),
        ("Barack Obama was born in Hawaii!", "d2", 1, 0),  # the same claim from another source
        ("Hawaii became a state of the United States in 1959.", "d3", 2, 0),
        ("Bananas are yellow.", "d4", 3, 0),
        ("Bananas are yellow fruit", "d5", 4, 0),  # same meaning: identical embedding below
    ]
    embeddings = np.eye(5, 6)
    embeddings[4] = embeddings[3]
    return make_request("Where was Barack Obama born?", items, embeddings, budget=budget)


def test_claim_graph_merges_duplicates_and_links_shared_entities():
    request = obama_request()
    graph = build_claim_graph(request)
    assert [c.text for c in graph.claims] == [
        "Barack Obama was born in Hawaii.",
        "Hawaii became a state of the United States in 1959.",
        "Bananas are yellow.",
    ]
    assert graph.claims[0].source_ids == ("d1", "d2")
    assert graph.claims[2].source_ids == ("d4", "d5")
    assert graph.members == [[0, 1], [2], [3, 4]]
    assert graph.adjacency.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0]]  # "hawaii" links the first two
    assert graph.n_edges == 1


def test_claim_relevance_boosts_question_entities_and_their_neighbours():
    graph = build_claim_graph(obama_request())
    relevance, question_entities = claim_relevance(graph, "Where was Barack Obama born?", 0.5, 0.25)
    assert question_entities == {"barack obama"}
    # claim 0: all of {barack, obama, born} + the question entity; claim 1: neighbour of claim 0 only
    np.testing.assert_allclose(relevance, [1.0 + 0.5, 0.25, 0.0])


def test_ace_packers_emit_claims_with_merged_sources_and_reader_costs():
    tokens = WordCounter()
    for packer in (AcePacker("ace_focused", QueryFocusedPacker()), AcePacker("ace_submod", SubmodularPacker())):
        context = packer.pack(obama_request(budget=7))  # room for one 6-token claim only
        assert [s.text for s in context.snippets] == ["Barack Obama was born in Hawaii."]
        assert context.snippets[0].source_ids == ("d1", "d2")
        assert context.snippets[0].tokens == tokens.count(context.snippets[0].text)
        assert context.extra["claims"] == 3 and context.extra["merged_snippets"] == 2
        assert context.packer == packer.name


def test_ace_bridge_claim_outranks_an_unlinked_one():
    items = [
        ("Alice Smith starred in Moon River.", "d1", 0, 0),
        ("The weather was directed by winds.", "d3", 1, 0),
        ("Moon River was directed by Bob Jones.", "d2", 2, 0),
    ]
    request = make_request("Who directed the film that Alice Smith starred in?", items, np.eye(3), budget=100)
    graph = build_claim_graph(request)
    relevance, _ = claim_relevance(graph, request.question)
    # question terms {directed, film, alice, smith, starred}; "Moon River" links claim 2 to claim 0,
    # which names the question entity "Alice Smith": 3/5 + .5, 1/5, 1/5 + .25
    np.testing.assert_allclose(relevance, [0.6 + 0.5, 0.2, 0.2 + 0.25])
    # both later claims add the one term "directed": plain focused breaks the tie by rank, ACE by the boost
    plain = QueryFocusedPacker("focused", max_snippets=2).pack(request)
    assert [s.cand_id for s in plain.snippets] == ["d1", "d3"]
    ace = AcePacker("ace_focused", QueryFocusedPacker("focused", max_snippets=2)).pack(request)
    assert [s.cand_id for s in ace.snippets] == ["d1", "d2"]


# ---- budgets, output shape and configs ---------------------------------------------------------------
@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("packer", ALL_SELECTORS, ids=SELECTOR_IDS)
def test_no_packer_exceeds_the_budget(packer, seed):
    request = random_request(seed)
    context = packer.pack(request)
    assert fits([s.tokens for s in context.snippets], request.budget)
    assert [(s.rank, s.position) for s in context.snippets] == sorted((s.rank, s.position) for s in context.snippets)
    assert context.budget == request.budget and context.packer == packer.name
    originals = {(s.text, s.cand_id) for s in request.snippets}
    assert all((s.text, s.cand_id) in originals for s in context.snippets)
    assert len({(s.rank, s.position) for s in context.snippets}) == len(context.snippets)


@pytest.mark.parametrize("packer", ALL_SELECTORS, ids=SELECTOR_IDS)
def test_empty_and_zero_budget_requests(packer):
    request = random_request(5)
    request.budget = 0
    assert packer.pack(request).snippets == []
    empty = make_request("alpha?", [], np.zeros((0, 4)), budget=50)
    assert packer.pack(empty).snippets == []


def test_real_minilm_tokenizer_budgets():
    from transformers import AutoTokenizer

    from harness.retrieve.encoder import resolve_model_path
    from harness.text.tokens import TokenCounter

    tokens = TokenCounter(AutoTokenizer.from_pretrained(resolve_model_path("offline:all-MiniLM-L6-v2")))
    sentences = [
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris.",
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower.",
        "It was constructed from 1887 to 1889 as the centrepiece of the 1889 World's Fair.",
        "The Statue of Liberty was designed by Frederic Auguste Bartholdi.",
        "Its metal framework was built by Gustave Eiffel.",
        "Bananas are an elongated, edible fruit.",
    ]
    items = [(s, f"d{i // 3}", i // 3, i % 3) for i, s in enumerate(sentences)]
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((len(items), 12))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    question = "Who designed the tower built for the 1889 World's Fair?"
    for budget in (0, 10, 25, 40, 80, 500):
        request = make_request(question, items, embeddings, budget, query=embeddings[0], tokens=tokens)
        for packer in ALL_SELECTORS:
            context = packer.pack(request)
            assert fits([s.tokens for s in context.snippets], budget), packer.name
            assert all(s.tokens == tokens.count(s.text) for s in context.snippets)
            rendered = "\n".join(s.text for s in context.snippets)
            assert tokens.count(rendered) <= budget, packer.name


CONFIGS = {
    "focused": QueryFocusedPacker,
    "mmr": MMRPacker,
    "submod": SubmodularPacker,
    "ace_focused": AcePacker,
    "ace_submod": AcePacker,
}


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conf")
    shutil.copytree(CONF, root / "packer")
    (root / "config.yaml").write_text(
        f"defaults:\n  - packer: packed\n  - _self_\npaths:\n  models_dir: /models\n  cache_dir: {root / 'cache'}\n"
    )
    return root


def compose_packer(config_dir: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose("config", overrides=overrides).packer


@pytest.mark.parametrize("name", sorted(CONFIGS) + ["llmlingua"])
def test_configs_instantiate_and_name_every_parameter(config_dir, name):
    node = compose_packer(config_dir, [f"packer={name}"])
    packer = instantiate(node)
    assert packer.name == name
    target = type(packer)
    if name in CONFIGS:
        assert target is CONFIGS[name]
    parameters = set(inspect.signature(target.__init__).parameters) - {"self"}
    assert parameters <= set(node.keys()), parameters - set(node.keys())


@pytest.mark.parametrize(("name", "inner"), [("ace_focused", "focused"), ("ace_submod", "submod")])
def test_ace_builds_its_inner_packer_from_the_packer_group(config_dir, name, inner):
    node = compose_packer(config_dir, [f"packer={name}"])
    assert OmegaConf.to_container(node.inner) == OmegaConf.to_container(compose_packer(config_dir, [f"packer={inner}"]))
    packer = instantiate(node)
    assert type(packer.inner) is CONFIGS[inner] and packer.inner.name == inner
    # the claim-graph keys stay the outer packer's, the selection keys are the inner packer's alone
    assert {"duplicate_threshold", "entity_weight", "neighbour_weight"} <= set(node.keys())
    assert not {"stem", "max_snippets", "w_rel"} & set(node.keys())


def test_ace_inner_overrides_reach_the_inner_packer(config_dir):
    overrides = ["packer=ace_submod", "packer.inner.w_div=0.5", "packer.inner.max_snippets=8"]
    packer = instantiate(compose_packer(config_dir, overrides))
    assert packer.inner.weights["div"] == 0.5 and packer.inner.max_snippets == 8
    packer = instantiate(compose_packer(config_dir, ["packer=ace_focused", "packer.inner.stem=false"]))
    assert packer.inner.stem is False
    request = random_request(3)
    assert packer.pack(request).extra["query_terms"] == sorted(content_terms(request.question, stem=False))
    swapped = instantiate(compose_packer(config_dir, ["packer=ace_submod", "packer@packer.inner=focused"]))
    assert isinstance(swapped.inner, QueryFocusedPacker) and swapped.name == "ace_submod"


def test_ace_refuses_an_inner_packer_without_select():
    with pytest.raises(TypeError, match="inner must be a packer"):
        AcePacker("ace_mmr", MMRPacker("mmr"))
