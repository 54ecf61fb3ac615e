"""Budgeted submodular evidence packing.

The packer maximises, subject to the reader-token budget (``harness.pack.budget.fits``),

    F(S) = w_rel * Rel(S) / Rel(V) + w_qry * QueryCov(S) / QueryCov(V)
         + w_cov * Repr(S) / Repr(V) + w_div * Div(S) / Div(V)

over the snippets V of one question, where

- Rel(S) = sum_{i in S} rel_i (modular), rel_i the snippet's query relevance of kind ``rel``: lexical
  (fraction of the question's content terms present), bm25 (Okapi BM25 over the question's snippets)
  or dense (clipped cosine of snippet and question embeddings);
- QueryCov(S) = |union_{i in S} terms(i) & query_terms| (set cover of the question's content terms);
- Repr(S) = sum_{i in V} min(sum_{j in S} sim(i, j), alpha * deg_i), sim = max(cosine, 0) and
  deg_i = sum_{j in V} sim(i, j) (saturated facility location, Lin & Bilmes 2011);
- Div(S) = sum_d sqrt(sum_{i in S, doc(i) = d} r_i) over source documents d (a snippet's candidate),
  r_i its lexical relevance, or its clipped cosine to the question (``diversity_relevance="cosine"``).

Each term is monotone submodular and is divided by its value on the whole ground set, so every term
lies in [0, 1] (``normalise="ground_set"``; ``"none"`` keeps the raw terms, so the weights alone set
their balance); a term that is 0 on V is 0 everywhere (monotonicity) and is dropped. Selection is the
cost-scaled greedy (largest marginal gain per token, among snippets that still fit, while some gain is
positive; ``cost_scaled=False`` takes the largest gain instead), followed by the best-singleton check
that gives the greedy its constant-factor guarantee under a knapsack constraint: if one feasible
snippet alone scores more than the greedy set, it wins.
Marginal gains are computed for every candidate at once with NumPy each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.types import Context
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import addable, fits, packed_cost
from harness.pack.features import check_max_snippets, snippet_features
from harness.pack.lexical import bm25_relevance

TERMS = ("rel", "qry", "cov", "div")
RELEVANCE_KINDS = ("lexical", "bm25", "dense")
NORMALISATIONS = ("ground_set", "none")
#: gains at or below this are treated as zero (float noise on saturated terms)
GAIN_TOLERANCE = 1e-12


@dataclass
class GreedyState:
    """What the objective needs to score additions to the chosen set incrementally."""

    chosen: list[int]
    covered_terms: np.ndarray  # (q,) bool: query terms covered by S
    coverage: np.ndarray  # (n,) sum_{j in S} sim(i, j)
    document_mass: np.ndarray  # (D,) sum of diversity relevance of S's snippets per document
    value: float = 0.0


class SubmodularObjective:
    """F(S) for one question's snippets, with vectorised marginal gains."""

    def __init__(
        self,
        relevance: np.ndarray,
        incidence: np.ndarray,
        similarity: np.ndarray,
        doc_codes: np.ndarray,
        weights: dict[str, float],
        alpha: float = 0.3,
        diversity_relevance: np.ndarray | None = None,
        normalise: bool = True,
    ) -> None:
        self.relevance = np.asarray(relevance, dtype=np.float64)
        self.incidence = np.asarray(incidence, dtype=bool)
        self.similarity = np.maximum(np.asarray(similarity, dtype=np.float64), 0.0)
        self.doc_codes = np.asarray(doc_codes, dtype=np.int64)
        self.diversity_relevance = (
            self.relevance if diversity_relevance is None else np.asarray(diversity_relevance, dtype=np.float64)
        )
        if np.any(self.relevance < 0) or np.any(self.diversity_relevance < 0):
            raise ValueError("submodular objective: relevance must be non-negative (Div takes its square root)")
        self.alpha = float(alpha)
        self.n = self.relevance.size
        self.n_documents = int(self.doc_codes.max()) + 1 if self.n else 0
        self.degree = self.similarity.sum(axis=1)
        self.cap = self.alpha * self.degree
        self._incidence_float = self.incidence.astype(np.float64)
        # row x of the transpose holds sim(., x): reducing along contiguous rows is the faster direction
        self._similarity_by_candidate = np.ascontiguousarray(self.similarity.T)
        self._buffer = np.empty_like(self.similarity)
        full = self._raw_terms(None)
        # a monotone term that is 0 on V is 0 on every subset: give it scale 0 instead of dividing by 0
        self.scale = {
            t: ((float(weights[t]) / full[t] if normalise else float(weights[t])) if full[t] > 0 else 0.0)
            for t in TERMS
        }
        self._relevance_gain = self.scale["rel"] * self.relevance  # modular: the same at every step
        self._query_gain_matrix = self.scale["qry"] * self._incidence_float

    # ---- set evaluation (from scratch) -----------------------------------------------------------
    def _raw_terms(self, mask: np.ndarray | None) -> dict[str, float]:
        """Unnormalised terms at the set ``mask`` (boolean), or at the whole ground set for None."""
        if mask is None:  # on V the coverage of row i is deg_i itself
            doc_mass = np.bincount(self.doc_codes, weights=self.diversity_relevance, minlength=self.n_documents)
            return {
                "rel": float(self.relevance.sum()),
                "qry": float(self.incidence.any(axis=0).sum()),
                "cov": float(np.minimum(self.degree, self.cap).sum()),
                "div": float(np.sqrt(doc_mass).sum()),
            }
        doc_mass = np.bincount(self.doc_codes[mask], weights=self.diversity_relevance[mask], minlength=self.n_documents)
        return {
            "rel": float(self.relevance[mask].sum()),
            "qry": float(self.incidence[mask].any(axis=0).sum()),
            "cov": float(np.minimum(self.similarity[:, mask].sum(axis=1), self.cap).sum()),
            "div": float(np.sqrt(doc_mass).sum()),
        }

    def term_values(self, indices) -> dict[str, float]:
        """Each term of F at the set ``indices``, weighted and normalised (their sum is F)."""
        mask = np.zeros(self.n, dtype=bool)
        mask[np.asarray(list(indices), dtype=np.int64)] = True
        raw = self._raw_terms(mask)
        return {t: self.scale[t] * raw[t] for t in TERMS}

    def value(self, indices) -> float:
        return float(sum(self.term_values(indices).values()))

    # ---- incremental greedy ----------------------------------------------------------------------
    def empty_state(self) -> GreedyState:
        return GreedyState(
            chosen=[],
            covered_terms=np.zeros(self.incidence.shape[1], dtype=bool),
            coverage=np.zeros(self.n, dtype=np.float64),
            document_mass=np.zeros(self.n_documents, dtype=np.float64),
        )

    def term_gains(self, state: GreedyState) -> dict[str, np.ndarray]:
        """Weighted, normalised marginal gain of each term for adding each snippet to ``state``.

        Repr: min(c_i + s_ix, cap_i) - min(c_i, cap_i) = min(s_ix, max(cap_i - c_i, 0)), so the gain of
        every candidate x is one row sum of the (n, n) matrix min(S^T, residual[None, :]).
        """
        residual = np.maximum(self.cap - state.coverage, 0.0)
        np.minimum(self._similarity_by_candidate, residual[None, :], out=self._buffer)
        mass = state.document_mass[self.doc_codes]
        return {
            "rel": self.scale["rel"] * self.relevance,
            "qry": self.scale["qry"] * (self._incidence_float @ ~state.covered_terms),
            "cov": self.scale["cov"] * self._buffer.sum(axis=1),
            "div": self.scale["div"] * (np.sqrt(mass + self.diversity_relevance) - np.sqrt(mass)),
        }

    def gains(self, state: GreedyState) -> np.ndarray:
        """Sum of ``term_gains`` without the per-term arrays (the greedy's hot path)."""
        residual = np.maximum(self.cap - state.coverage, 0.0)
        np.minimum(self._similarity_by_candidate, residual[None, :], out=self._buffer)
        total = self._buffer.sum(axis=1)
        total *= self.scale["cov"]
        total += self._relevance_gain
        total += self._query_gain_matrix @ ~state.covered_terms
        mass = state.document_mass[self.doc_codes]
        total += self.scale["div"] * (np.sqrt(mass + self.diversity_relevance) - np.sqrt(mass))
        return total

    def add(self, state: GreedyState, index: int, gain: float) -> None:
        state.chosen.append(index)
        state.covered_terms |= self.incidence[index]
        state.coverage += self.similarity[:, index]
        state.document_mass[self.doc_codes[index]] += self.diversity_relevance[index]
        state.value += gain


def snippet_similarity(embeddings: np.ndarray) -> np.ndarray:
    """Cosine similarities of L2-normalised rows (float32 product: half the time, ample precision)."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    return (embeddings @ embeddings.T).astype(np.float64)


@dataclass
class GreedyResult:
    chosen: list[int]  # selection order
    value: float
    greedy_chosen: list[int]
    greedy_value: float
    singleton: int | None
    singleton_value: float
    fallback_used: bool


def cost_scaled_greedy(
    objective: SubmodularObjective,
    costs: np.ndarray,
    budget: int,
    max_snippets: int | None = None,
    cost_scaled: bool = True,
) -> GreedyResult:
    """Greedy by marginal gain per token (by gain alone without ``cost_scaled``), then the best
    feasible singleton if it scores higher."""
    costs = np.asarray(costs, dtype=np.int64)
    per_token = np.maximum(costs, 1).astype(np.float64)  # an empty snippet still costs its separator
    cap = objective.n if max_snippets is None else min(objective.n, max_snippets)
    state = objective.empty_state()
    available = np.ones(objective.n, dtype=bool)
    singleton_gains = None
    while len(state.chosen) < cap:
        available &= addable(costs[state.chosen], costs, budget)
        if not available.any():
            break
        gains = objective.gains(state)
        if singleton_gains is None:
            singleton_gains = gains  # F({s}) = F({s}) - F(empty)
        score = gains / per_token if cost_scaled else gains
        ratio = np.where(available & (gains > GAIN_TOLERANCE), score, -np.inf)
        best = int(np.argmax(ratio))
        if ratio[best] == -np.inf:
            break
        objective.add(state, best, float(gains[best]))
        available[best] = False

    if singleton_gains is None:
        singleton_gains = objective.gains(objective.empty_state()) if objective.n else np.zeros(0)
    feasible_alone = costs <= budget  # fits([c], budget)
    singleton, singleton_value = None, 0.0
    if feasible_alone.any():
        singleton = int(np.argmax(np.where(feasible_alone, singleton_gains, -np.inf)))
        singleton_value = float(singleton_gains[singleton])
    fallback = singleton is not None and singleton_value > state.value + GAIN_TOLERANCE
    chosen = [singleton] if fallback else list(state.chosen)
    return GreedyResult(
        chosen=chosen,
        value=singleton_value if fallback else state.value,
        greedy_chosen=list(state.chosen),
        greedy_value=state.value,
        singleton=singleton,
        singleton_value=singleton_value,
        fallback_used=bool(fallback),
    )


class SubmodularPacker(Packer):
    """Cost-scaled greedy on relevance + query coverage + representativeness + document diversity."""

    def __init__(
        self,
        name: str = "submod",
        w_rel: float = 1.0,
        w_qry: float = 0.5,
        w_cov: float = 0.4,
        w_div: float = 0.3,
        alpha: float = 0.3,
        max_snippets: int | None = 32,
        diversity_relevance: str = "lexical",
        stem: bool = True,
        rel: str = "lexical",
        normalise: str = "ground_set",
        cost_scaled: bool = True,
    ) -> None:
        super().__init__(name)
        self.weights = {"rel": float(w_rel), "qry": float(w_qry), "cov": float(w_cov), "div": float(w_div)}
        for term, weight in self.weights.items():
            if weight < 0:
                raise ValueError(f"packer {name!r}: weight w_{term} must be >= 0, got {weight}")
        if float(alpha) <= 0:
            raise ValueError(f"packer {name!r}: alpha must be > 0, got {alpha}")
        if diversity_relevance not in ("lexical", "cosine"):
            raise ValueError(
                f"packer {name!r}: diversity_relevance must be 'lexical' or 'cosine', got {diversity_relevance!r}"
            )
        if rel not in RELEVANCE_KINDS:
            raise ValueError(f"packer {name!r}: rel must be one of {RELEVANCE_KINDS}, got {rel!r}")
        if normalise not in NORMALISATIONS:
            raise ValueError(f"packer {name!r}: normalise must be one of {NORMALISATIONS}, got {normalise!r}")
        self.rel = rel
        self.normalise = normalise
        self.cost_scaled = bool(cost_scaled)
        self.alpha = float(alpha)
        self.max_snippets = check_max_snippets(name, max_snippets)
        self.diversity_relevance = diversity_relevance
        self.stem = bool(stem)

    def objective(self, request: PackingRequest, relevance: np.ndarray | None = None) -> SubmodularObjective:
        """The objective for this request; ``relevance`` replaces rel_i and the lexical r_i (claim graphs)."""
        features = snippet_features(request, self.stem)
        cosine = np.maximum(np.asarray(request.relevance, dtype=np.float64), 0.0)
        lexical = features.lexical if relevance is None else np.asarray(relevance, dtype=np.float64)
        if relevance is not None or self.rel == "lexical":
            modular = lexical
        elif self.rel == "bm25":
            modular = bm25_relevance(features.query_terms, [s.text for s in request.snippets], self.stem)
        else:
            modular = cosine
        # Div's r_i keeps its own setting, so that varying the Rel kind changes the Rel term alone
        diversity = cosine if self.diversity_relevance == "cosine" else lexical
        return SubmodularObjective(
            relevance=modular,
            incidence=features.incidence,
            similarity=snippet_similarity(request.snippet_embeddings),
            doc_codes=features.doc_codes,
            weights=self.weights,
            alpha=self.alpha,
            diversity_relevance=diversity,
            normalise=self.normalise == "ground_set",
        )

    def select(self, request: PackingRequest, relevance: np.ndarray | None = None) -> tuple[list[int], dict]:
        costs = request.costs
        if costs.size == 0:
            return [], {
                "objective": 0.0,
                **{f"term_{t}": 0.0 for t in TERMS},
                "greedy_objective": 0.0,
                "singleton_objective": 0.0,
                "singleton_fallback": False,
                "selection_order": [],
                "packed_cost": 0,
            }
        objective = self.objective(request, relevance)
        result = cost_scaled_greedy(objective, costs, request.budget, self.max_snippets, self.cost_scaled)
        if not fits(costs[result.chosen], request.budget):  # the greedy only adds addable snippets
            raise RuntimeError(f"packer {self.name!r} chose {result.chosen} over budget {request.budget}")
        terms = objective.term_values(result.chosen) if result.chosen else {t: 0.0 for t in TERMS}
        extra = {
            "objective": result.value,
            **{f"term_{t}": float(terms[t]) for t in TERMS},  # one scalar column per objective term
            "greedy_objective": result.greedy_value,
            "singleton_objective": result.singleton_value,
            "singleton_fallback": result.fallback_used,
            "selection_order": list(result.chosen),
            "packed_cost": packed_cost(costs[result.chosen]),
        }
        return result.chosen, extra

    def pack(self, request: PackingRequest) -> Context:
        chosen, extra = self.select(request)
        snippets = in_reading_order([request.snippets[i] for i in chosen])
        return Context(snippets=snippets, budget=request.budget, packer=self.name, extra=extra)
