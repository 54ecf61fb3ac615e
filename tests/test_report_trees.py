import json
import math

import pandas as pd

from harness.report.tables import Options
from harness.report.trees import (
    classified_questions,
    classifier_agreement_tables,
    relative_change,
    score_by_question_type_table,
    tree_cost_table,
    tree_tables,
)


def rows(dtcrs_seconds=5.0):
    records = []
    for tree, layers, seconds in (("raptor", [10, 4, 1], 20.0), ("dtcrs", [10, 1], dtcrs_seconds)):
        for q, qtype in enumerate(["extractive", "abstractive", "extractive", "yes_no"]):
            records.append(
                {
                    "question_id": f"q{q}",
                    "tree": tree,
                    "policy": f"tree={tree}",
                    "qtype": qtype,
                    "f1": 0.5 if tree == "dtcrs" else 0.25,
                    "tree.nodes_per_layer": json.dumps(layers),
                    "tree.summary_nodes": sum(layers[1:]),
                    "tree.build_seconds": seconds,
                    "tree.cached": False,
                }
            )
    return pd.DataFrame(records)


def test_tree_cost_table_by_hand():
    table = tree_cost_table(rows(), None, Options())
    data = table.data.set_index("tree")
    assert data.loc["raptor", "summary_nodes_mean"] == 5 and data.loc["dtcrs", "summary_nodes_mean"] == 1
    assert json.loads(data.loc["raptor", "nodes_per_layer_mean"]) == [10, 4, 1]
    assert table.note.startswith("DTCRS vs RAPTOR: 80.0% fewer summary nodes, 75.0% less build time per question")


def test_tree_cost_note_says_more_for_a_slower_tree():
    note = tree_cost_table(rows(dtcrs_seconds=22.6), None, Options()).note
    assert note.startswith("DTCRS vs RAPTOR: 80.0% fewer summary nodes, 13.0% more build time per question")
    assert "-" not in note.split("(")[0]


def test_relative_change_in_words():
    assert relative_change(1.0, 5.0, "summary nodes", "fewer") == "80.0% fewer summary nodes"
    assert relative_change(6.0, 5.0, "summary nodes", "fewer") == "20.0% more summary nodes"
    assert relative_change(5.0, 5.0, "build time", "less") == "0.0% less build time"
    assert relative_change(float("nan"), 5.0, "build time", "less") == "build time not comparable"
    assert relative_change(1.0, 0.0, "build time", "less") == "build time not comparable"


def test_score_by_question_type():
    table = score_by_question_type_table(rows(), None, Options(n_resamples=200))
    data = table.data.set_index(["policy", "question_type"])
    assert data.loc[("tree=dtcrs", "extractive"), "mean"] == 0.5
    assert data.loc[("tree=raptor", "yes_no"), "n"] == 1


def classifier_rows():
    """Six questions routed by the LM classifier and by the annotation classifier, one RAPTOR row, and a
    repeat of q0 under a second seed (counted once)."""
    lm_cases = [  # (question, annotated, predicted, source, parsed)
        ("q0", "abstractive", "abstractive", "lm", True),
        ("q1", "abstractive", "extractive", "rules", False),
        ("q2", "extractive", "extractive", "rules", False),
        ("q3", "yes_no", "yes_no", "rules", False),
        ("q4", "unanswerable", "extractive", "lm", True),
        ("q5", "unannotated", "extractive", "rules", False),
    ]
    records = []
    for seed in (0, 1):
        for qid, annotated, predicted, source, parsed in lm_cases if seed == 0 else lm_cases[:1]:
            base = {"dataset": "qasper", "question_id": qid, "seed": seed, "tree": "dtcrs"}
            base["cfg.tree.lm.name"] = "smollm2-135m-gguf"
            records.append(
                {
                    **base,
                    "tree.classifier": "lm",
                    "tree.annotated_class": annotated,
                    "tree.question_class": predicted,
                    "tree.class_source": source,
                    "tree.lm_parsed": parsed,
                }
            )
            oracle = annotated  # classifier=annotation: the annotated class, "unannotated" for q5
            records.append(
                {
                    **base,
                    "tree.classifier": "annotation",
                    "tree.annotated_class": annotated,
                    "tree.question_class": oracle,
                    "tree.class_source": "annotation",
                    "tree.lm_parsed": None,
                }
            )
    records.append({"dataset": "qasper", "question_id": "q0", "seed": 0, "tree": "raptor"})
    return pd.DataFrame(records)


def test_classifier_agreement_by_hand():
    tables = {t.name: t for t in classifier_agreement_tables(classifier_rows(), None, Options())}
    summary = tables["classifier_agreement"].data.set_index("classifier")
    lm = summary.loc["lm"]
    assert (lm["lm"], lm["questions"], lm["annotated"], lm["unannotated"]) == ("smollm2-135m-gguf", 6, 5, 1)
    # Correct: q0, q2, q3 of the 5 annotated; q5 is not scored.
    assert (lm["correct"], lm["accuracy"]) == (3, 0.6)
    assert lm["lm_parsed_share"] == 2 / 6 and lm["rules_share"] == 4 / 6
    assert lm["lm_accuracy"] == 0.5  # q0 right, q4 wrong
    assert lm["predicted_abstractive_share"] == 1 / 6 and lm["annotated_abstractive_share"] == 2 / 5
    oracle = summary.loc["annotation"]
    assert (oracle["accuracy"], oracle["unannotated"], oracle["rules_share"]) == (1.0, 1, 0.0)
    assert math.isnan(oracle["lm_parsed_share"])
    assert tables["classifier_agreement"].display.set_index("classifier").loc["lm", "accuracy"] == "0.600 (3/5)"

    confusion = tables["classifier_confusion"].data
    lm_matrix = confusion[confusion["classifier"] == "lm"].set_index("annotated")
    assert list(lm_matrix.index) == ["extractive", "abstractive", "yes_no", "unanswerable", "unannotated"]
    expected = {  # annotated -> {predicted: count}
        "extractive": {"extractive": 1},
        "abstractive": {"abstractive": 1, "extractive": 1},
        "yes_no": {"yes_no": 1},
        "unanswerable": {"extractive": 1},
        "unannotated": {"extractive": 1},
    }
    for annotated, row in lm_matrix.iterrows():
        for predicted in ("extractive", "abstractive", "yes_no", "unanswerable", "unannotated"):
            assert row[f"predicted {predicted}"] == expected[annotated].get(predicted, 0), (annotated, predicted)
    oracle_matrix = confusion[confusion["classifier"] == "annotation"].set_index("annotated")
    assert oracle_matrix.loc["unannotated", "predicted unannotated"] == 1
    assert oracle_matrix.loc["abstractive", "predicted abstractive"] == 2


def test_classifier_agreement_needs_the_annotated_class():
    assert classifier_agreement_tables(rows(), None, Options()) == []
    assert classified_questions(classifier_rows().drop(columns=["tree.annotated_class"])) is None
    names = [t.name for t in tree_tables(classifier_rows(), None, Options())]
    assert names == ["classifier_agreement", "classifier_confusion"]


def test_summary_reach_by_hand():
    """Two budgets: at B = 100 the tree's summary (ranked 3rd of 3 by score, though listed 2nd) is not packed and
    the context is the no-tree one; at B = 200 it is packed (30 tokens) and the context differs. A question
    without a summary in its pool counts in neither the pool count nor the rank."""
    pool = json.dumps([{"kind": "document", "score": 0.9}, {"kind": "summary", "score": 0.5},
                       {"kind": "document", "score": 0.7}])  # fmt: skip
    plain = json.dumps([{"kind": "document", "score": 0.9}])
    records = []
    for budget in (100, 200):
        for q in ("q1", "q2"):
            base = {"qkey": q, "budget": budget, "dataset": "d", "n_candidates": 3}
            records.append({**base, "tree": "none", "policy": "tree=none", "pool": plain, "snippets": "[]",
                            "context": f"chunks {q} {budget}"})  # fmt: skip
            read = budget == 200 and q == "q1"
            records.append({**base, "tree": "dtcrs", "policy": "tree=dtcrs", "pool": pool if q == "q1" else plain,
                            "snippets": json.dumps([{"kind": "summary", "tok": 30}] if read else []),
                            "context": "summary" if read else f"chunks {q} {budget}"})  # fmt: skip
    frame = pd.DataFrame(records)
    table = tree_tables(frame, None, Options())
    reach = next(t for t in table if t.name == "summary_reach").data
    assert reach.to_dict("records") == [
        {  # 4 rows: q1 and q2 at two budgets; 30 summary tokens over 4 contexts; 3 of them the no-tree ones
            "dataset": "d",
            "policy": "tree=dtcrs",
            "questions": 4,
            "with_summaries_in_pool": 2,
            "best_summary_rank_median": 3.0,
            "pool_size_median": 3.0,
            "contexts_with_summary": 1,
            "summary_tokens_mean": 7.5,
            "contexts_as_no_tree": 3,
        }
    ]
