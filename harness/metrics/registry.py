"""The metric registry: every per-question figure that a summary, a W&B run or a report table names.

In the style of lm-evaluation-harness's ``register_metric``: a metric is declared once, with its row
column, its table heading, its direction and where it is reported, and the lists that used to be written
out by hand (summary.json, the W&B question table, the report's policy and diagnostic tables) are queries
of this registry (:func:`metric_names`). ``register_metric`` returns the column name, so code names a
metric through a constant (``ANSWER_IN_CONTEXT``) rather than a repeated string literal.

Registration order is report order: the answer scores lead, the reader-token counts close.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Metric:
    """What the harness knows about one per-question column.

    ``higher_is_better`` is None for figures that describe a run rather than grade it (token counts, how
    often a rule fired). ``summary``: a mean with a bootstrap CI in summary.json (and the W&B run summary).
    ``wandb``: a column of the W&B per-question table. ``policy_table``: a per-policy mean with a
    question-clustered bootstrap CI in the report's policy table. ``diagnostic``: a context or retrieval
    diagnostic whose correlation with the reader's scores the report measures.
    """

    name: str
    heading: str
    higher_is_better: bool | None
    summary: bool = False
    wandb: bool = False
    policy_table: bool = False
    diagnostic: bool = False


class UnknownMetricError(KeyError):
    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


_METRICS: dict[str, Metric] = {}
_FLAGS = tuple(f.name for f in fields(Metric) if f.type == "bool")


def register_metric(
    name: str,
    *,
    higher_is_better: bool | None,
    heading: str | None = None,
    summary: bool = False,
    wandb: bool = False,
    policy_table: bool = False,
    diagnostic: bool = False,
) -> str:
    """Declare a metric and return its name (the row column). The heading defaults to the name."""
    if name in _METRICS:
        raise ValueError(f"metric {name!r} is already registered")
    if higher_is_better not in (True, False, None):
        raise ValueError(f"metric {name!r}: higher_is_better must be True, False or None, got {higher_is_better!r}")
    _METRICS[name] = Metric(name, heading or name, higher_is_better, summary, wandb, policy_table, diagnostic)
    return name


def get_metric(name: str) -> Metric:
    try:
        return _METRICS[name]
    except KeyError:
        raise UnknownMetricError(f"unknown metric {name!r}; registered: {', '.join(_METRICS)}") from None


def is_registered(name: str) -> bool:
    return name in _METRICS


def heading(name: str) -> str:
    """The table label of a registered metric; any other column is shown under its own name."""
    return _METRICS[name].heading if name in _METRICS else name


def metric_names(**flags: bool) -> tuple[str, ...]:
    """Registered metric names, in registration order, whose flags have the given values
    (``metric_names(summary=True)``)."""
    unknown = set(flags) - set(_FLAGS)
    if unknown:
        raise ValueError(f"unknown metric flag(s) {sorted(unknown)}; flags: {list(_FLAGS)}")
    return tuple(m.name for m in _METRICS.values() if all(getattr(m, k) == v for k, v in flags.items()))


# ---- answer scores (harness.metrics.answers) ------------------------------------------------------------
F1 = register_metric("f1", heading="F1", higher_is_better=True, summary=True, wandb=True, policy_table=True)
EM = register_metric("em", heading="EM", higher_is_better=True, summary=True, wandb=True, policy_table=True)

# ---- what reached the reader (harness.metrics.context) --------------------------------------------------
# Shown in every place (summary, W&B table, policy table) and correlated with the reader's scores.
_CONTEXT_SCORE = {"summary": True, "wandb": True, "policy_table": True, "diagnostic": True}
ANSWER_IN_CONTEXT = register_metric(
    "answer_in_context", heading="answer in ctx", higher_is_better=True, **_CONTEXT_SCORE
)
ANSWER_IN_CONTEXT_GRADED = register_metric(
    "answer_in_context_graded", heading="graded", higher_is_better=True, **_CONTEXT_SCORE
)
GOLD_DOC_COVERAGE = register_metric("gold_doc_coverage", heading="gold cov.", higher_is_better=True, **_CONTEXT_SCORE)
ALL_GOLD_IN_READER = register_metric(
    "all_gold_in_reader", heading="all gold", higher_is_better=True, summary=True, policy_table=True, diagnostic=True
)
GOLD_TOKEN_DENSITY = register_metric(
    "gold_token_density", heading="gold density", higher_is_better=True, summary=True, diagnostic=True
)

# ---- the official evidence metrics, on what reached the reader (harness.metrics.support) -----------------
SP_EM = register_metric("sp_em", heading="sp EM", higher_is_better=True, summary=True, policy_table=True)
SP_F1 = register_metric("sp_f1", heading="sp F1", higher_is_better=True, summary=True, policy_table=True)
SP_PRECISION = register_metric("sp_precision", heading="sp precision", higher_is_better=True, summary=True)
SP_RECALL = register_metric("sp_recall", heading="sp recall", higher_is_better=True, summary=True)
JOINT_EM = register_metric("joint_em", heading="joint EM", higher_is_better=True, summary=True, policy_table=True)
JOINT_F1 = register_metric("joint_f1", heading="joint F1", higher_is_better=True, summary=True, policy_table=True)
SUPPORT_EM = register_metric("support_em", heading="support EM", higher_is_better=True, summary=True)
SUPPORT_F1 = register_metric("support_f1", heading="support F1", higher_is_better=True, summary=True, policy_table=True)
EVIDENCE_F1 = register_metric(
    "evidence_f1", heading="evidence F1", higher_is_better=True, summary=True, policy_table=True
)

# ---- retrieval (harness.metrics.retrieval) --------------------------------------------------------------
RECALL_AT_K = register_metric("recall_at_k", heading="recall@k", higher_is_better=True, summary=True, diagnostic=True)
ALL_GOLD_AT_K = register_metric(
    "all_gold_at_k", heading="all gold@k", higher_is_better=True, summary=True, diagnostic=True
)

# ---- the selection and its diversity (harness.metrics.diversity, harness.metrics.ranking) ---------------
RECALL = register_metric("recall", higher_is_better=True, summary=True)
NDCG = register_metric("ndcg", higher_is_better=True, summary=True)
ALPHA_NDCG = register_metric("alpha_ndcg", higher_is_better=True, summary=True)
S_RECALL = register_metric("s_recall", heading="S-Recall", higher_is_better=True, summary=True)
ERR_IA = register_metric("err_ia", heading="ERR-IA (unnormalised)", higher_is_better=True, summary=True)
NERR_IA = register_metric("nerr_ia", heading="nERR-IA", higher_is_better=True, summary=True)  # ndeval's nERR-IA
APD = register_metric("apd", higher_is_better=True, summary=True)
VENDI = register_metric("vendi", higher_is_better=True, summary=True)
POOL_REDUNDANCY = register_metric("pool_redundancy", higher_is_better=False, summary=True)

# ---- stage reports (``<stage>.<key>`` columns) ----------------------------------------------------------
RULE_TRIGGERED = register_metric("diversify.rule_triggered", higher_is_better=None, summary=True)

# ---- reader tokens --------------------------------------------------------------------------------------
CONTEXT_TOKENS = register_metric(
    "context_tokens", heading="ctx tokens", higher_is_better=None, summary=True, wandb=True, policy_table=True
)
PROMPT_TOKENS = register_metric("prompt_tokens", higher_is_better=None, summary=True, wandb=True)

# ---- dataset scorers (harness.metrics.longform, chosen by the dataset config's ``scorers``) -------------
QASPER_F1 = register_metric("qasper_f1", higher_is_better=True)
QUALITY_CORRECT = register_metric("quality_correct", higher_is_better=True)
# Sentence BLEU per question (smoothed); the papers' corpus BLEU is a run-level figure (summary.json
# ``corpus_metrics``, the report's NarrativeQA table), not a mean of these.
BLEU1_SENTENCE = register_metric("bleu1_sentence", heading="BLEU-1 (sentence)", higher_is_better=True)
BLEU4_SENTENCE = register_metric("bleu4_sentence", heading="BLEU-4 (sentence)", higher_is_better=True)
ROUGE_L = register_metric("rougeL", heading="ROUGE-L", higher_is_better=True, summary=True)
METEOR = register_metric("meteor", heading="METEOR", higher_is_better=True, summary=True)
