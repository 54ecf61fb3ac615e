"""Per-question metrics: answer scores, packed-context diagnostics and retrieval quality."""

from harness.metrics.answers import answer_tokens, exact_match, f1_score, normalize_answer
from harness.metrics.context import (
    all_gold_in_reader,
    answer_in_context,
    answer_in_context_graded,
    context_diagnostics,
    gold_doc_coverage,
    gold_token_density,
)
from harness.metrics.retrieval import all_gold_at_k, recall_at_k, retrieval_metrics

__all__ = [
    "all_gold_at_k",
    "all_gold_in_reader",
    "answer_in_context",
    "answer_in_context_graded",
    "answer_tokens",
    "context_diagnostics",
    "exact_match",
    "f1_score",
    "gold_doc_coverage",
    "gold_token_density",
    "normalize_answer",
    "recall_at_k",
    "retrieval_metrics",
]
