"""The report names each dataset's EM/F1 rule and flags 2Wiki scores made without the alias file."""

from __future__ import annotations

import pandas as pd

from harness.report.scoring import scoring_lines


def test_the_report_names_each_dataset_s_rule_and_the_lower_bound():
    rows = pd.DataFrame(
        {
            "dataset": ["hotpotqa", "hotpotqa", "musique", "2wikimultihopqa", "2wikimultihopqa", "2wikimultihopqa"],
            "qkey": ["h1", "h2", "m1", "w1", "w2", "w2"],
            "answer_scorer": ["hotpotqa", "hotpotqa", "musique", "hotpotqa", "hotpotqa", "hotpotqa"],
            "answers_lower_bound": [None, None, None, True, True, True],
        }
    )
    first, second = scoring_lines(rows)
    assert first.endswith("2wikimultihopqa: hotpotqa; hotpotqa: hotpotqa; musique: musique.")
    assert second.startswith("**2wikimultihopqa: EM/F1 are a lower bound** for 2 questions")
    aliased = rows.assign(answers_lower_bound=[None, None, None, False, False, False])
    assert len(scoring_lines(aliased)) == 1
    assert scoring_lines(pd.DataFrame({"dataset": ["demo"], "f1": [1.0]})) == []  # rows from before the columns
