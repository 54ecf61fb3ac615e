import json

import pandas as pd

from harness.report.tables import Options
from harness.report.trees import score_by_question_type_table, tree_cost_table


def rows():
    records = []
    for tree, layers, seconds in (("raptor", [10, 4, 1], 20.0), ("dtcrs", [10, 1], 5.0)):
        for q, qtype in enumerate(["extractive", "abstractive", "extractive", "yes_no"]):
            records.append({"question_id": f"q{q}", "tree": tree, "policy": f"tree={tree}", "qtype": qtype,
                            "f1": 0.5 if tree == "dtcrs" else 0.25, "tree.nodes_per_layer": json.dumps(layers),
                            "tree.summary_nodes": sum(layers[1:]), "tree.build_seconds": seconds,
                            "tree.cached": False})
    return pd.DataFrame(records)


def test_tree_cost_table_by_hand():
    table = tree_cost_table(rows(), None, Options())
    data = table.data.set_index("tree")
    assert data.loc["raptor", "summary_nodes_mean"] == 5 and data.loc["dtcrs", "summary_nodes_mean"] == 1
    assert json.loads(data.loc["raptor", "nodes_per_layer_mean"]) == [10, 4, 1]
    assert "+80.0% fewer summary nodes" in table.note and "+75.0% less build time" in table.note


def test_score_by_question_type():
    table = score_by_question_type_table(rows(), None, Options(n_resamples=200))
    data = table.data.set_index(["policy", "question_type"])
    assert data.loc[("tree=dtcrs", "extractive"), "mean"] == 0.5
    assert data.loc[("tree=raptor", "yes_no"), "n"] == 1
