"""A source-linked claim / entity graph over a question's snippets (answer-centric evidence packing).

Nodes are claims: the request's snippets (the sentence units the pipeline cut from the candidates).
Two snippets are the same claim when their normalised text is equal (lowercased, punctuation dropped,
whitespace collapsed) or their embeddings' cosine exceeds ``duplicate_threshold`` (0.95); duplicates
are merged with scipy's connected components into one node that keeps the text, position and rank of
its earliest member in reading order and the union of all members' ``source_ids``, so a claim repeated
by a copy or an overlapping chunk is paid for once but credits every source.

Entities are found with a regular expression, no model: capitalised spans (runs of capitalised words,
allowing "of"/"the"/"de"/"von"/"van"/... between them, a leading "The" dropped) and numbers. A single
capitalised word counts unless it is a stop word ("The", "In", "What"), which filters sentence-initial
capitals. Two claims are linked when they share an entity.

Relevance of a claim, used by the packers run over the claim nodes:

    relevance_c = lexical_c + entity_weight * q_c + neighbour_weight * max_{n in N(c)} q_n

where lexical_c is the fraction of the question's content terms the claim contains
(``harness.pack.lexical``), q_c the fraction of the question's entities the claim mentions, and N(c)
its graph neighbours. The neighbour term lifts bridge claims: a sentence that names the film a
question-entity sentence mentions ("X starred in F" -> "F was directed by Y") gains relevance even
though it shares no word with the question.

How the packers use it (``harness.pack.ace``): the query-focused packer keeps its first key, new
query-term coverage, and ranks ties by this relevance instead of the lexical one; the submodular
packer uses it as rel_i in the Rel term and, with ``diversity_relevance: lexical``, in the Div term,
while QueryCov and Repr are computed on the claims exactly as on snippets. Documents (for the
new-document preference and Div) are the representatives' candidates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from harness.core.types import Snippet
from harness.pack.base import PackingRequest
from harness.pack.lexical import content_terms

_CAPITALISED = r"[A-Z][\w'’\-]*"
_CONNECTOR = r"(?:of|the|de|da|del|di|du|la|le|von|van|der|den|y|and|&)"
_ENTITY = re.compile(
    rf"(?P<span>{_CAPITALISED}(?:\s+(?:{_CONNECTOR}\s+)*{_CAPITALISED})*)|(?P<number>\d(?:[\d,.]*\d)?)"
)
_NON_WORD = re.compile(r"[^\w\s]+")
_SPACES = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"['’]s?$")


def normalise_claim(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: equal results mean the same claim."""
    return _SPACES.sub(" ", _NON_WORD.sub(" ", text.lower())).strip()


def extract_entities(text: str) -> frozenset[str]:
    """Capitalised spans and numbers of ``text``, lowercased (``"The Beatles"`` -> ``"beatles"``)."""
    entities = set()
    for match in _ENTITY.finditer(text):
        if match.group("number"):
            entities.add(match.group("number").replace(",", ""))
            continue
        words = match.group("span").split()
        while words and words[0].lower() in ENGLISH_STOP_WORDS:  # "The Beatles", sentence-initial "In"
            words = words[1:]
        while words and words[-1].lower() in ENGLISH_STOP_WORDS:
            words = words[:-1]
        if words:
            entities.add(_POSSESSIVE.sub("", " ".join(words).lower()))
    entities.discard("")
    return frozenset(entities)


@dataclass
class ClaimGraph:
    claims: list[Snippet]  # one per node, reading-order representative with merged source_ids
    embeddings: np.ndarray  # (m, d) the representatives' embeddings
    members: list[list[int]]  # snippet indices merged into each node
    entities: list[frozenset[str]]
    adjacency: np.ndarray  # (m, m) int: number of shared entities, 0 on the diagonal

    @property
    def n_edges(self) -> int:
        return int(np.count_nonzero(np.triu(self.adjacency, 1)))


def build_claim_graph(request: PackingRequest, duplicate_threshold: float = 0.95) -> ClaimGraph:
    snippets = request.snippets
    n = len(snippets)
    if n == 0:
        empty = np.zeros((0, 0), dtype=np.int64)
        return ClaimGraph([], np.asarray(request.snippet_embeddings)[:0], [], [], empty)
    embeddings = np.asarray(request.snippet_embeddings, dtype=np.float64)
    same_meaning = embeddings @ embeddings.T > duplicate_threshold
    # equal normalised text: link each snippet to the first with the same text (a star per text)
    first_with_text: dict[str, int] = {}
    same_text = np.array([first_with_text.setdefault(normalise_claim(s.text), i) for i, s in enumerate(snippets)])
    rows, cols = np.nonzero(same_meaning)
    rows, cols = np.concatenate([rows, np.arange(n)]), np.concatenate([cols, same_text])
    _, labels = connected_components(coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n)), directed=False)

    order = sorted(range(n), key=lambda i: (snippets[i].rank, snippets[i].position, i))
    groups: dict[int, list[int]] = {}
    for i in order:  # members listed in reading order: the first is the representative
        groups.setdefault(int(labels[i]), []).append(i)
    members = list(groups.values())  # dicts keep insertion order: nodes come in reading order

    claims, entities = [], []
    for group in members:
        first = snippets[group[0]]
        sources = list(dict.fromkeys(s for i in group for s in snippets[i].source_ids))
        claims.append(
            Snippet(
                text=first.text,
                cand_id=first.cand_id,
                source_ids=tuple(sources),
                tokens=request.tokens.count(first.text),
                title=first.title,
                position=first.position,
                rank=first.rank,
            )
        )
        entities.append(extract_entities(first.text))

    vocabulary = sorted(set().union(*entities))
    column = {e: k for k, e in enumerate(vocabulary)}
    mentions = np.zeros((len(claims), len(vocabulary)), dtype=np.int64)
    for row, found in enumerate(entities):
        mentions[row, [column[e] for e in found]] = 1
    adjacency = mentions @ mentions.T
    np.fill_diagonal(adjacency, 0)
    representatives = [group[0] for group in members]
    return ClaimGraph(claims, embeddings[representatives], members, entities, adjacency)


def claim_relevance(
    graph: ClaimGraph,
    question: str,
    entity_weight: float = 0.5,
    neighbour_weight: float = 0.25,
    stem: bool = True,
) -> tuple[np.ndarray, frozenset[str]]:
    """Boosted relevance of every claim (see the module docstring) and the question's entities."""
    m = len(graph.claims)
    query_terms = content_terms(question, stem)
    lexical = np.array(
        [
            len(query_terms & content_terms(c.text, stem)) / len(query_terms) if query_terms else 0.0
            for c in graph.claims
        ],
        dtype=np.float64,
    )
    question_entities = extract_entities(question)
    if not question_entities or m == 0:
        return lexical, question_entities
    entity_overlap = np.array([len(e & question_entities) / len(question_entities) for e in graph.entities])
    linked = graph.adjacency > 0
    neighbour = np.where(linked, entity_overlap[None, :], 0.0).max(axis=1)
    return lexical + entity_weight * entity_overlap + neighbour_weight * neighbour, question_entities


def claim_request(request: PackingRequest, graph: ClaimGraph) -> PackingRequest:
    """The same request with the claim nodes as its snippets."""
    return replace(request, snippets=graph.claims, snippet_embeddings=graph.embeddings)
