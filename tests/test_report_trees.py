import json

import pandas as pd

from harness.report.tables import Options
from harness.report.trees import relative_change, score_by_question_type_table, tree_cost_table


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
