import pandas as pd
import pytest

from harness.metrics import registry
from harness.metrics.registry import UnknownMetricError, get_metric, heading, metric_names, register_metric
from harness.report import formatting, tables
from harness.runlog import outputs, wandb_logger


def test_directions():
    for name in ("f1", "em", "answer_in_context", "gold_doc_coverage", "recall_at_k", "s_recall", "qasper_f1"):
        assert get_metric(name).higher_is_better is True, name
    assert get_metric("pool_redundancy").higher_is_better is False
    for name in ("context_tokens", "prompt_tokens", "diversify.rule_triggered"):
        assert get_metric(name).higher_is_better is None, name


def test_flags_of_known_metrics():
    aic = get_metric("answer_in_context")
    assert (aic.summary, aic.wandb, aic.policy_table, aic.diagnostic) == (True, True, True, True)
    assert aic.heading == "answer in ctx"
    density = get_metric("gold_token_density")
    assert (density.summary, density.wandb, density.policy_table, density.diagnostic) == (True, False, False, True)
    prompt = get_metric("prompt_tokens")
    assert (prompt.summary, prompt.wandb, prompt.policy_table, prompt.diagnostic) == (True, True, False, False)
    qasper = get_metric("qasper_f1")
    assert not (qasper.summary or qasper.wandb or qasper.policy_table or qasper.diagnostic)


def test_constants_are_the_column_names():
    assert (registry.F1, registry.EM, registry.ANSWER_IN_CONTEXT, registry.RULE_TRIGGERED) == (
        "f1",
        "em",
        "answer_in_context",
        "diversify.rule_triggered",
    )


def test_unknown_name_is_an_error_that_lists_the_registered_ones():
    with pytest.raises(UnknownMetricError, match=r"unknown metric 'f2'; registered: f1, em, "):
        get_metric("f2")
    with pytest.raises(KeyError):
        get_metric("f2")
    assert heading("f2") == "f2"
    assert formatting.heading("cfg.packer.relevance_weight") == "packer.relevance_weight"
    assert formatting.heading("answer_in_context_graded") == "graded"


def test_bad_declarations_and_queries_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_metric("f1", higher_is_better=True)
    with pytest.raises(ValueError, match="higher_is_better"):
        register_metric("not_registered_here", higher_is_better="yes")
    assert not registry.is_registered("not_registered_here")
    with pytest.raises(ValueError, match="unknown metric flag"):
        metric_names(summarised=True)


def test_summary_list_is_the_registry_query():
    assert outputs.SUMMARY_METRICS == metric_names(summary=True)
    assert outputs.SUMMARY_METRICS == (
        "f1",
        "em",
        "answer_in_context",
        "answer_in_context_graded",
        "gold_doc_coverage",
        "all_gold_in_reader",
        "gold_token_density",
        "sp_em",
        "sp_f1",
        "sp_precision",
        "sp_recall",
        "joint_em",
        "joint_f1",
        "support_em",
        "support_f1",
        "evidence_f1",
        "recall_at_k",
        "all_gold_at_k",
        "recall",
        "ndcg",
        "alpha_ndcg",
        "s_recall",
        "err_ia",
        "nerr_ia",
        "apd",
        "vendi",
        "pool_redundancy",
        "diversify.rule_triggered",
        "context_tokens",
        "prompt_tokens",
        "rougeL",
        "meteor",
    )
    rows = pd.DataFrame(
        {"f1": [1.0, 0.0], "qasper_f1": [0.5, 0.5], "diversify.rule_triggered": [1.0, 0.0], "answer": ["a", "b"]}
    )
    assert list(outputs.summarize(rows, n_resamples=50)["metric"]) == ["f1", "diversify.rule_triggered"]


def test_wandb_columns_are_the_registry_query():
    assert wandb_logger.TABLE_COLUMNS == [
        "question_id",
        "question",
        "gold_answers",
        "answer",
        "f1",
        "em",
        "answer_in_context",
        "answer_in_context_graded",
        "gold_doc_coverage",
        "context_tokens",
        "prompt_tokens",
    ]


def test_report_lists_are_registry_queries():
    assert tables.POLICY_METRICS == (
        "f1",
        "em",
        "answer_in_context",
        "answer_in_context_graded",
        "gold_doc_coverage",
        "all_gold_in_reader",
        "sp_em",
        "sp_f1",
        "joint_em",
        "joint_f1",
        "support_f1",
        "evidence_f1",
        "context_tokens",
    )
    assert tables.DIAGNOSTICS == (
        "answer_in_context",
        "answer_in_context_graded",
        "gold_doc_coverage",
        "all_gold_in_reader",
        "gold_token_density",
        "recall_at_k",
        "all_gold_at_k",
    )
    assert tables.POLICY_METRICS == metric_names(policy_table=True)
    assert tables.DIAGNOSTICS == metric_names(diagnostic=True)
